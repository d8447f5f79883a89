"""``codemode run``, ``sdk`` and ``check``: outputs, the pinned --json shape and every usage error."""

from __future__ import annotations

import io
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from codemode import tool
from codemode.app import cli

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    shutil.copytree(EXAMPLES / "workspace", root)
    return root


def _program(tmp_path: Path, text: str) -> str:
    path = tmp_path / "program.py"
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_run_prints_output_and_a_child_call_table(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """It prints logs and result on stdout, then a table of child calls; progress goes to stderr."""
    program = _program(tmp_path, 'r = await tools.echo({"text": "hi"})\nprint(r["text"])\nreturn 7')
    code, out, err = _run(capsys, "run", program, "--workspace", str(tmp_path))
    assert code == 0
    assert out.startswith("hi\n7\n")
    assert "run-1:code:1" in out and "echo" in out and "ok" in out
    assert "| hi" in err


def test_run_json_has_the_pinned_shape(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """It prints exactly the keys is_error, logs, result, error and dispatches."""
    program = _program(tmp_path, 'await tools.add(a=1, b=2)\nprint("x")\nreturn {"ok": True}')
    code, out, _ = _run(capsys, "run", program, "--json", "--quiet", "--workspace", str(tmp_path))
    payload = json.loads(out)
    assert code == 0
    assert payload == {"is_error": False, "logs": ["x"], "result": {"ok": True}, "error": None,
                       "dispatches": [{"call_id": "run-1:code:1", "name": "add", "parent": "run-1",
                                       "is_error": False}]}


@pytest.mark.parametrize(
    ("text", "kind"),
    [("raise KeyError('k')", "exception"), ("x = (", "syntax"), ("import subprocess", "exception"),
     ("exec('1')", "policy"), ("while True:\n    pass", "timeout")],
)
def test_run_failure_reports_the_kind_and_exits_1(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                  text: str, kind: str) -> None:
    """It exits 1 and reports the failure kind in --json output."""
    program = _program(tmp_path, text)
    code, out, _ = _run(capsys, "run", program, "--json", "--quiet", "--timeout", "1",
                        "--workspace", str(tmp_path))
    payload = json.loads(out)
    assert code == 1 and payload["is_error"] is True
    accepted = {kind, "cpu-limit"} if kind == "timeout" else {kind}
    assert payload["error"]["kind"] in accepted


def test_run_reads_stdin(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                         tmp_path: Path) -> None:
    """It reads the program from standard input when given -."""
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO("return 'from stdin'"))
    code, out, _ = _run(capsys, "run", "-", "--quiet", "--workspace", str(tmp_path))
    assert (code, out.strip()) == (0, "from stdin")


def test_run_over_the_workspace_and_events_file(capsys: pytest.CaptureFixture[str], workspace: Path,
                                                tmp_path: Path) -> None:
    """It roots the workspace tools at --workspace and writes a paired event log with --events."""
    events = tmp_path / "events.jsonl"
    program = str(EXAMPLES / "programs" / "find_todos.py")
    code, out, _ = _run(capsys, "run", program, "--quiet", "--workspace", str(workspace),
                        "--events", str(events))
    assert code == 0 and "docs/todo.txt: 2 TODO(s)" in out
    records: list[dict[str, Any]] = [json.loads(line) for line in events.read_text().splitlines()]
    types = [record["type"] for record in records]
    assert types[0] == "tool/call" and types[-1] == "tool/result"
    assert types.count("tool/code-dispatch-start") == types.count("tool/code-dispatch") == 1


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("run", "/no/such/program.py"), "program file not found"),
        (("run", "PROGRAM", "--mode", "native"), "invalid choice"),
        (("run", "PROGRAM", "--timeout", "-1"), "--timeout must be a positive number"),
        (("run", "PROGRAM", "--workspace", "/no/such/dir"), "not a directory"),
        (("run", "PROGRAM", "--toolset", "nope"), "must look like MODULE:ATTR"),
        (("run", "PROGRAM", "--toolset", "json:dumps"), "calling dumps() failed"),
        (("run",), "the following arguments are required"),
        (("run", "PROGRAM", "--bogus"), "unrecognized arguments"),
        (("check", "/no/such/program.py"), "program file not found"),
        (("sdk", "--toolset", "no_such_module_xyz:x"), "cannot import"),
    ],
)
def test_usage_errors_exit_2_with_a_clear_message(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                  argv: tuple[str, ...], message: str) -> None:
    """It refuses bad flags, missing files and bad toolsets with exit code 2 and one clear line."""
    program = _program(tmp_path, "return 1")
    code, out, err = _run(capsys, *[program if item == "PROGRAM" else item for item in argv])
    assert code == 2 and message in err and out == ""


def test_unreadable_program_is_a_usage_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """It reports a program that is not UTF-8 text."""
    path = tmp_path / "binary.py"
    path.write_bytes(b"\xff\xfe\x00bad")
    code, _, err = _run(capsys, "run", str(path))
    assert code == 2 and "cannot read program" in err


def test_sdk_prints_the_section_and_writes_stubs(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """It prints the tools:sdk section and, with --out, writes tools.pyi and a stub package."""
    code, out, _ = _run(capsys, "sdk", "--workspace", str(tmp_path))
    assert code == 0 and "class Tools(Protocol):" in out and "async def read_text(" in out
    code, out, _ = _run(capsys, "sdk", "--out", str(tmp_path / "stubs"),
                        "--toolset", "codemode.tools.demo:demo_tools")
    assert code == 0
    stub = (tmp_path / "stubs" / "tools.pyi").read_text()
    assert "echo: " in stub and "read_text" not in stub


def test_check_reports_type_errors_on_program_lines(capsys: pytest.CaptureFixture[str],
                                                    tmp_path: Path) -> None:
    """It exits 1 with the program's own line number for a type error, and 0 for a clean program."""
    bad = _program(tmp_path, 'x = 1\nr = await tools.add(a=1, b="two")\n')
    code, out, _ = _run(capsys, "check", bad, "--toolset", "codemode.tools.demo:demo_tools")
    assert code == 1 and f"{bad}:2:" in out
    good = str(EXAMPLES / "programs" / "hello.py")
    code, out, _ = _run(capsys, "check", good, "--toolset", "codemode.tools.demo:demo_tools")
    assert code == 0 and "no type errors" in out


def test_run_announces_a_child_call_still_running_after_a_second(capsys: pytest.CaptureFixture[str],
                                                                 tmp_path: Path) -> None:
    """It prints a "started" line for a slow child call while it runs, and none for a quick one."""
    program = _program(tmp_path, 'await tools.echo(text="quick")\nawait tools.sleep(ms=1300)\nreturn 1')
    code, _, err = _run(capsys, "run", program, "--workspace", str(tmp_path))
    lines = err.splitlines()
    started = [i for i, line in enumerate(lines) if "started, still running after" in line]
    settled = [i for i, line in enumerate(lines) if line.startswith("  > run-1:code:2 sleep ok")]
    assert code == 0 and len(started) == 1 and len(settled) == 1
    assert "run-1:code:2 sleep" in lines[started[0]] and started[0] < settled[0]
    assert not any("run-1:code:1" in line and "started" in line for line in lines)


def test_run_prefixes_every_line_of_a_multi_line_print(capsys: pytest.CaptureFixture[str],
                                                       tmp_path: Path) -> None:
    """It prefixes each line of one printed text on the progress stream, not only the first."""
    program = _program(tmp_path, 'print("first\\nsecond\\n\\nfourth")\nreturn 0')
    code, _, err = _run(capsys, "run", program, "--workspace", str(tmp_path))
    assert code == 0
    assert "  | first\n  | second\n  | \n  | fourth\n" in err


PEEK_TOOLSET = '''
from pathlib import Path

from codemode import tool


@tool
def peek(path: str) -> list[str]:
    """The lines of a text file, as they are now."""
    return Path(path).read_text(encoding="utf-8").splitlines()


tools = [peek]
'''


def test_run_writes_events_while_the_program_runs(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """It writes --events as events happen: a tool reading the file mid-run sees one complete JSON line
    per event so far (the run_code call and its own dispatch start)."""
    (tmp_path / "peek_toolset_cli_events.py").write_text(PEEK_TOOLSET, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    events = tmp_path / "events.jsonl"
    program = _program(tmp_path, f'return await tools.peek(path={str(events)!r})')
    code, out, _ = _run(capsys, "run", program, "--json", "--quiet", "--events", str(events),
                        "--toolset", "peek_toolset_cli_events:tools")
    assert code == 0
    seen = [json.loads(line) for line in json.loads(out)["result"]]
    assert [(record["seq"], record["type"]) for record in seen] == [
        (1, "tool/call"), (2, "tool/code-dispatch-start")]
    final = [json.loads(line)["type"] for line in events.read_text(encoding="utf-8").splitlines()]
    assert final == ["tool/call", "tool/code-dispatch-start", "tool/code-dispatch", "tool/result"]


def test_events_path_that_cannot_be_written_is_a_usage_error_before_the_run(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """It refuses an --events path it cannot open, before running anything."""
    program = _program(tmp_path, 'print("ran")\nreturn 1')
    code, out, err = _run(capsys, "run", program, "--events", str(tmp_path / "no" / "dir" / "e.jsonl"))
    assert code == 2 and "--events" in err and "cannot write" in err and "ran" not in out + err


@tool(timeout_ms=50)
async def slow() -> str:
    """Take far longer than the budget."""
    await anyio.sleep(10)
    return "late"


def slow_toolset() -> list[Any]:
    """A toolset for the command line: one tool whose body outlasts its budget."""
    return [slow]


@pytest.mark.parametrize("argv", [["call", "slow", "--mode", "native", "--json"],
                                  ["run", "-", "--quiet", "--json"]], ids=["call", "run"])
def test_the_command_line_enforces_timeout_ms(argv: list[str], capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """``codemode call`` and ``codemode run`` install the timeout policy, so a budget holds there too."""
    monkeypatch.setattr(sys, "stdin", io.StringIO("await tools.slow()\n"))  # (what `run -` reads)
    code = cli.main([*argv, "--toolset", f"{__name__}:slow_toolset"])
    out = json.loads(capsys.readouterr().out)
    assert code == 1
    assert "tool call timed out after 50ms" in json.dumps(out)
