"""Text that is not Unicode (lone surrogates) on every surface text leaves by: the CLI's JSON and plain
output, the event log and tool results. Each refuses it with a clear error; none crashes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from codemode.runtime import Agent, EventLog, ToolRuntime
from codemode.runtime.scheduler import ToolCallRequest
from codemode.tools.demo import demo_tools


def _codemode(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The real CLI in a child process: its stdout is a strict UTF-8 stream, as a terminal's is."""
    return subprocess.run([sys.executable, "-m", "codemode", *argv], capture_output=True, text=True,
                          encoding="utf-8", errors="strict", timeout=120, cwd=cwd, check=False)


@pytest.mark.parametrize(("program", "kind", "fragment"), [
    ('return "\\ud800"', "invalid-output", "lone surrogate"),
    ("print(chr(0xdc80))", "exception", "UnicodeEncodeError"),
    ('return await tools.echo(text="\\udc80")', "exception", "lone surrogate"),
])
def test_run_json_reports_lone_surrogates_as_json(tmp_path: Path, program: str, kind: str,
                                                  fragment: str) -> None:
    """`codemode run --json` prints one JSON object naming the failure, never a traceback."""
    (tmp_path / "prog.py").write_text(program)
    done = _codemode("run", "--json", "--quiet", "--workspace", str(tmp_path), "prog.py", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    payload = json.loads(done.stdout)
    assert payload["is_error"] is True and payload["error"]["kind"] == kind
    assert fragment in payload["error"]["message"]
    assert "Traceback (most recent call last)" not in done.stderr


def test_run_plain_output_survives_a_surrogate_error(tmp_path: Path) -> None:
    """The plain form prints the error text (escaped), exit 1, no crash."""
    (tmp_path / "prog.py").write_text("raise ValueError(chr(0xd800))")
    done = _codemode("run", "--quiet", "--workspace", str(tmp_path), "prog.py", cwd=tmp_path)
    assert done.returncode == 1
    assert "ValueError: \\ud800" in done.stderr


@pytest.mark.parametrize("flag", [[], ["--json"]])
def test_call_refuses_surrogate_arguments_with_a_usage_error(tmp_path: Path, flag: list[str]) -> None:
    """`codemode call echo --args '{"text": "\\ud800"}'` is a one-line usage error (exit 2)."""
    done = _codemode("call", "echo", "--args", '{"text": "\\ud800"}', *flag, "--workspace", str(tmp_path),
                     cwd=tmp_path)
    assert done.returncode == 2, done.stdout
    assert "lone surrogate" in done.stderr and len(done.stderr.strip().splitlines()) == 1


@pytest.mark.anyio
async def test_raw_surrogates_in_a_model_turn_become_error_results_and_a_sound_log() -> None:
    """A model-level call whose raw argument text, name or id holds a lone surrogate gets INVALID_ARGS
    (or UNKNOWN_TOOL); the event log records it escaped and exports and re-imports as JSON lines."""
    agent = Agent("a")
    async with ToolRuntime("native") as rt:
        for definition in demo_tools():
            rt.register(definition)
        results = await rt.execute_tool_calls([
            ToolCallRequest("c1", "echo", '{"text": "\ud800"}'),
            ToolCallRequest("c2", "echo", '{"text": "\\udc80"}'),
            ToolCallRequest("c3\udcff", "ech\udcff", "{}"),
        ], agent=agent)
    assert [r.error.code if r.error else None for r in results] == ["INVALID_ARGS", "INVALID_ARGS",
                                                                   "UNKNOWN_TOOL"]
    for result in results:
        assert result.error is not None
        json.dumps(result.to_json(), ensure_ascii=False).encode("utf-8")
    exported = agent.events.to_jsonl()
    exported.encode("utf-8")
    assert '"arguments":"{\\"text\\": \\"\\\\ud800\\"}"' in exported
    assert len(EventLog.from_jsonl(exported).events) == len(agent.events.events)
