"""The codemode CLI: call and prompt, JSON shapes, exit codes, usage errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from codemode.app import cli


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_call_success_json(capsys: pytest.CaptureFixture[str]) -> None:
    """It prints the pinned JSON object and exits 0 for a success."""
    code, out, _ = _run(capsys, "call", "add", "--args", '{"a": 1, "b": 2}', "--json")
    assert code == 0
    assert json.loads(out) == {"is_error": False, "value": {"sum": 3},
                               "content": [{"type": "text", "text": "3"}], "error": None}


def test_call_error_result_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    """It exits 1 for an error result and reports its code and message."""
    code, out, _ = _run(capsys, "call", "fail", "--args", '{"message": "nope"}', "--json")
    assert code == 1
    payload = json.loads(out)
    assert payload["is_error"] is True and payload["value"] is None
    assert payload["error"] == {"code": "TOOL_FAILED", "message": "nope"}


def test_call_plain_text_output(capsys: pytest.CaptureFixture[str]) -> None:
    """It prints the result text without --json (errors on stderr)."""
    assert _run(capsys, "call", "echo", "--args", '{"text": "hi"}') == (0, "hi\n", "")
    code, out, err = _run(capsys, "call", "missing")
    assert (code, out) == (1, "")
    assert 'unknown tool "missing"' in err


@pytest.mark.parametrize(("argv", "fragment"), [
    (("call", "echo", "--args", "{bad"), "--args is not valid JSON"),
    (("call", "echo", "--args", '{"a": NaN}'), "--args is not valid JSON"),
    (("call", "echo", "--mode", "sideways"), "invalid choice"),
    (("call",), "required"),
    (("prompt", "--bogus"), "unrecognized arguments"),
    (("call", "echo", "--toolset", "nocolon"), "must look like MODULE:ATTR"),
    (("call", "echo", "--toolset", "no_such_module_xyz:tools"), "cannot import"),
    (("call", "echo", "--toolset", "codemode.tools.demo:missing"), "has no attribute"),
    (("call", "echo", "--toolset", "json:dumps"), "calling dumps() failed"),
])
def test_usage_errors_exit_2_with_a_clear_message(capsys: pytest.CaptureFixture[str], argv: tuple[str, ...],
                                                  fragment: str) -> None:
    """It exits 2 with a one-line explanation on stderr for bad flags, JSON or toolsets."""
    code, out, err = _run(capsys, *argv)
    assert code == 2
    assert fragment in err
    assert out == ""


def test_no_command_prints_help_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    """It prints help and exits 2 without a subcommand."""
    code, _, err = _run(capsys)
    assert code == 2 and "usage: codemode" in err


def test_invalid_arguments_are_an_error_result(capsys: pytest.CaptureFixture[str]) -> None:
    """It runs non-object JSON arguments through the pipeline (INVALID_ARGS, exit 1)."""
    code, out, _ = _run(capsys, "call", "echo", "--args", '"text"', "--json")
    assert code == 1
    assert json.loads(out)["error"]["code"] == "INVALID_ARGS"


def test_prompt_json_native(capsys: pytest.CaptureFixture[str]) -> None:
    """It prints the built-in tools lexicographically with their parameters, and no sections."""
    code, out, _ = _run(capsys, "prompt", "--json")
    payload: dict[str, Any] = json.loads(out)
    assert code == 0
    assert [t["name"] for t in payload["tools"]] == [
        "add", "counter_increment", "echo", "fail", "grep", "list_files", "read_text", "sleep", "todo_write",
        "write_text"]
    assert set(payload["tools"][0]) == {"name", "description", "parameters"}
    assert payload["sections"] == []


def test_prompt_plain_text(capsys: pytest.CaptureFixture[str]) -> None:
    """It lists the tools in human-readable form."""
    code, out, _ = _run(capsys, "prompt")
    assert code == 0 and "echo: Return the given text unchanged." in out


def test_toolset_option_loads_definitions(capsys: pytest.CaptureFixture[str]) -> None:
    """It loads tools from module:attr (a callable returning definitions)."""
    code, out, _ = _run(capsys, "prompt", "--json", "--toolset", "codemode.tools.demo:demo_tools")
    assert code == 0 and len(json.loads(out)["tools"]) == 5


def test_code_mode_prompt_and_signposted_call(capsys: pytest.CaptureFixture[str]) -> None:
    """It offers only run_code in code mode and signposts a direct demo-tool call."""
    code, out, _ = _run(capsys, "prompt", "--mode", "code", "--json")
    payload = json.loads(out)
    assert code == 0
    assert [t["name"] for t in payload["tools"]] == ["run_code"]
    assert [s["name"] for s in payload["sections"]] == ["tools:code-only", "tools:sdk"]
    code, out, _ = _run(capsys, "call", "echo", "--args", '{"text": "x"}', "--mode", "code", "--json")
    assert code == 1
    assert json.loads(out)["error"]["code"] == "UNKNOWN_TOOL"
    assert "from inside a `run_code` program" in json.loads(out)["error"]["message"]


def test_serve_is_wired_lazily(capsys: pytest.CaptureFixture[str]) -> None:
    """It lists serve in the help and builds its flags from the MCP bridge only when selected."""
    code, out, _ = _run(capsys, "--help")
    assert code == 0 and "serve" in out
    code, out, _ = _run(capsys, "serve", "--help")
    assert code == 0 and "--upstream" in out


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    """It prints the version and exits 0."""
    code, out, _ = _run(capsys, "--version")
    assert code == 0 and out.startswith("codemode ")


def test_call_run_code_in_native_mode_points_to_code_mode(capsys: pytest.CaptureFixture[str]) -> None:
    """It refuses `call run_code` in native mode with a usage error naming --mode code."""
    code, out, err = _run(capsys, "call", "run_code", "--args", '{"code": "return 1", "description": "x"}')
    assert (code, out) == (2, "")
    assert "--mode code" in err and "codemode run" in err


def test_call_run_code_in_code_mode_runs_the_program(capsys: pytest.CaptureFixture[str]) -> None:
    """It runs `call run_code` where run_code is offered."""
    code, out, _ = _run(capsys, "call", "run_code", "--mode", "code", "--json",
                        "--args", '{"code": "return 6 * 7", "description": "x"}')
    assert code == 0 and json.loads(out)["value"]["result"] == 42


def test_toolset_is_imported_from_the_current_directory_like_python_m(tmp_path: Path) -> None:
    """The console script finds ``--toolset mod:attr`` in the current directory, as `python -m` would,
    though the script's own sys.path does not hold it."""
    (tmp_path / "cwd_toolset_probe.py").write_text(
        "from codemode.tools import demo_tools\n\ntools = [t for t in demo_tools() if t.name == 'add']\n",
        encoding="utf-8")
    script = Path(sys.executable).parent / "codemode"
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    done = subprocess.run([str(script), "call", "add", "--args", '{"a": 2, "b": 5}', "--json",
                           "--toolset", "cwd_toolset_probe:tools"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["value"] == {"sum": 7}


@pytest.mark.parametrize(("argv", "missing", "extra"), [
    (("serve",), "mcp", "codemode[mcp]"),
    (("serve",), "mcp_types", "codemode[mcp]"),
    (("check", "-"), "mypy", "codemode[check]"),
])
def test_a_missing_extra_is_named(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                                  argv: tuple[str, ...], missing: str, extra: str) -> None:
    """A command whose optional dependencies are not installed exits 2 and names the extra to install."""
    monkeypatch.setitem(sys.modules, missing, None)  # (an import of it now fails, as if not installed)
    for name in [name for name in sys.modules if name.startswith(("codemode.app.mcp_bridge", "mcp."))]:
        monkeypatch.delitem(sys.modules, name)
    code, out, err = _run(capsys, *argv)
    assert (code, out) == (2, "")
    assert f"pip install '{extra}'" in err and err.count("\n") == 1


def test_the_core_runs_programs_without_the_extras(tmp_path: Path) -> None:
    """`codemode run` needs neither the MCP SDK nor mypy."""
    probe = ("import sys\nsys.modules.update(mcp=None, mcp_types=None, mypy=None)\n"
             "from codemode.app.cli import main\nsys.exit(main(['run', '-', '--quiet', '--json']))\n")
    done = subprocess.run([sys.executable, "-c", probe], input="return await tools.add(a=1, b=2)",
                          cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["result"] == {"sum": 3}
