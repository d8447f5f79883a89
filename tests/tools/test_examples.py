"""Every program in examples/programs runs through run_code and prints exactly what it is documented to."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from codemode.runtime import Agent, ToolRuntime
from codemode.tools.run_code import PythonCodeRuntime
from codemode.tools.toolsets import default_toolset

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

EXPECTED: dict[str, str] = {
    "hello": 'hello from codemode\n{\n  "echoed": "hello from codemode",\n  "sum": 5\n}',
    "parallel_fanout": (
        "echoed: ALPHA, BETA, GAMMA, DELTA, EPSILON\nnaps: 200 ms of sleeping in total\n"
        '[\n  "ALPHA",\n  "BETA",\n  "GAMMA",\n  "DELTA",\n  "EPSILON"\n]'
    ),
    "error_handling": "fail: TOOL_FAILED\nadd: INVALID_ARGS\necho: ok {'text': 'still here'}\n3",
    "counter_barrier": "counter after each call: [1, 3, 6, 10]\n10",
    "data_shaping": (
        '{"ada": 238.5, "bob": 24.5, "cy": 19.0}\nmost popular: mouse x 2\nmedian price: 19.0\n'
        '{\n  "totals": {\n    "ada": 238.5,\n    "bob": 24.5,\n    "cy": 19.0\n  },\n'
        '  "top_customer": "ada"\n}'
    ),
    "timeouts": 'gave up after 50 ms\n{\n  "slow": "gave up after 50 ms",\n  "quick_ms": 5\n}',
    "sums_and_checks": 'sum of squares 1..5 = 55\n{\n  "sum_of_squares": 55,\n  "sqrt": 7.4162\n}',
    "retry_flaky": (
        "TOOL_FAILED: attempt 1 failed\nTOOL_FAILED: attempt 2 failed\nattempt 3 succeeded\n"
        '{\n  "attempts": 3\n}'
    ),
    "workspace_summary": (
        "docs/notes.md: 8 lines, 25 words\ndocs/todo.txt: 3 lines, 12 words\nsrc/app.py: 3 lines, 13 words\n"
        '{\n  "files": 3,\n  "words": 50\n}'
    ),
    "find_todos": (
        "docs/notes.md: 1 TODO(s)\ndocs/todo.txt: 2 TODO(s)\nsrc/app.py: 1 TODO(s)\n"
        '{\n  "total": 4,\n  "first": "docs/notes.md:5"\n}'
    ),
    "plan_with_todos": (
        "started: {'pending': 2, 'in_progress': 1, 'completed': 0}\n"
        "later: {'pending': 0, 'in_progress': 1, 'completed': 2}\n"
        '{\n  "pending": 0,\n  "in_progress": 1,\n  "completed": 2\n}'
    ),
    "write_report": (
        'Report\n- Goals\n- Risks\n- Next steps\n{\n  "bytes": 36,\n  "headings": 3\n}'
    ),
}


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def code_runtime() -> AsyncIterator[PythonCodeRuntime]:
    async with PythonCodeRuntime() as shared:
        yield shared


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "workspace"
    shutil.copytree(EXAMPLES / "workspace", root)
    return root


@pytest.fixture
async def runtime(code_runtime: PythonCodeRuntime, workspace: Path) -> AsyncIterator[ToolRuntime]:
    """A fresh runtime (fresh demo counter, fresh workspace) over the module's shared sandbox."""
    async with ToolRuntime("code", code_runtime=code_runtime) as rt:
        for definition in default_toolset(workspace):
            rt.register(definition)
        yield rt


def test_every_example_has_an_expected_output() -> None:
    """It keeps the expectation table in step with the example folder."""
    assert sorted(EXPECTED) == sorted(path.stem for path in (EXAMPLES / "programs").glob("*.py"))


@pytest.fixture(scope="module")
def mypy_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mypy-cache")


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_example_program_passes_the_type_check(name: str, workspace: Path, mypy_cache: Path) -> None:
    """Every shipped example type-checks clean against the stubs of the tools it is run with.

    (``codemode check`` is what an author runs before a program goes out; an example it flags would
    teach the wrong thing.)
    """
    from codemode.sdk import check_program
    from codemode.tools.run_code import signature_of

    program = (EXAMPLES / "programs" / f"{name}.py").read_text(encoding="utf-8")
    signatures = [signature_of(definition) for definition in default_toolset(workspace)]
    found = check_program(program, signatures, cache_dir=mypy_cache)
    assert [item for item in found if item.severity == "error"] == []


@pytest.mark.anyio
@pytest.mark.parametrize("name", sorted(EXPECTED))
async def test_example_program_output(runtime: ToolRuntime, name: str) -> None:
    """It runs the example through run_code and compares the model-visible text exactly."""
    program = (EXAMPLES / "programs" / f"{name}.py").read_text(encoding="utf-8")
    agent = Agent("examples")
    with anyio.fail_after(30):
        result = await runtime.execute("run_code", {"code": program, "description": f"run {name}"},
                                       agent=agent, call_id="ex")
    content: Any = result.content
    assert (result.is_error, content[0]["text"]) == (False, EXPECTED[name])
    dispatches = [event for event in agent.events.events if event.type == "tool/code-dispatch"]
    starts = [event for event in agent.events.events if event.type == "tool/code-dispatch-start"]
    assert len(dispatches) == len(starts)
    assert (len(starts) > 0) is (name != "data_shaping")


# -- examples/agent_loop.py ----------------------------------------------------------------------

TRANSCRIPT = [
    "user: How many words are in each file of the workspace?",
    "assistant -> run_code: Count the words of every file",
    'tool: {\n  "docs/notes.md": 25,\n  "docs/todo.txt": 12,\n  "src/app.py": 13\n}',
    "assistant: Word counts: docs/notes.md 25, docs/todo.txt 12, src/app.py 13.",
    "user: Append the line 'Reviewed.' to docs/notes.md, then finish.",
    "assistant -> run_code: Append a review line to the notes",
    "tool: Appended 'Reviewed.' to docs/notes.md.",
    "(the turn was concluded by a tool)",
]


def _agent_loop() -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location("agent_loop", EXAMPLES / "agent_loop.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _offline_env() -> dict[str, str]:
    return {key: value for key, value in os.environ.items() if not key.startswith("OPENAI_")}


@pytest.mark.anyio
async def test_the_agent_loop_example_runs_two_turns(workspace: Path) -> None:
    """It answers the first turn from a program's output, and the second ends when a child of run_code
    concludes the turn; the event log records both turns."""
    module = _agent_loop()
    model = module.ScriptedModel()
    lines: list[str] = []
    with anyio.fail_after(60):
        agent = await module.main(workspace, model=model, say=lines.append)
    assert lines == TRANSCRIPT
    assert (workspace / "docs" / "notes.md").read_text(encoding="utf-8").endswith("benchmarks.\nReviewed.\n")
    ends = [event.data["reason"] for event in agent.events if event.type == "turn/end"]
    assert ends == ["completed", "concluded"]
    users = [event for event in agent.events if event.type == "user/message"]
    assert [event.data["source"]["kind"] for event in users] == ["user", "user"]
    assert len(model.requests) == 3  # the concluded turn did not call the model again
    roles = [message["role"] for message in model.requests[-1]["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "user"]


def test_the_agent_loop_example_runs_from_any_directory(tmp_path: Path) -> None:
    """It runs as a script from another directory and leaves examples/workspace untouched."""
    before = (EXAMPLES / "workspace" / "docs" / "notes.md").read_bytes()
    done = subprocess.run([sys.executable, str(EXAMPLES / "agent_loop.py")], cwd=tmp_path, env=_offline_env(),
                          capture_output=True, text=True, timeout=120, check=False)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == "\n".join(TRANSCRIPT) + "\n"
    assert (EXAMPLES / "workspace" / "docs" / "notes.md").read_bytes() == before


async def _serve_chat(listener: Any, model: Any, seen: list[tuple[str, str, Any]]) -> None:
    """A loopback stand-in for an OpenAI-compatible endpoint: one JSON answer per POST."""
    async def handle(stream: Any) -> None:
        async with stream:
            data = b""
            while b"\r\n\r\n" not in data:
                data += await stream.receive()
            head, _, body = data.partition(b"\r\n\r\n")
            request_line, *header_lines = head.decode("latin-1").split("\r\n")
            headers = {name.lower(): value.strip()
                       for name, value in (line.split(":", 1) for line in header_lines)}
            while len(body) < int(headers["content-length"]):
                body += await stream.receive()
            request = json.loads(body)
            seen.append((request_line, headers.get("authorization", ""), request))
            answer = json.dumps(model.complete(request)).encode("utf-8")
            await stream.send(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
                              b"Content-Length: " + str(len(answer)).encode() + b"\r\n\r\n" + answer)

    await listener.serve(handle)


@pytest.mark.anyio
async def test_the_agent_loop_example_talks_to_an_openai_compatible_endpoint(tmp_path: Path) -> None:
    """It sends chat-completions requests (URL, key and model from the environment) over HTTP and runs
    the same conversation on the answers (a loopback endpoint here, answering as the scripted model)."""
    from anyio.abc import SocketAttribute

    seen: list[tuple[str, str, Any]] = []
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    port = listener.extra(SocketAttribute.local_port)
    env = {**_offline_env(), "OPENAI_BASE_URL": f"http://127.0.0.1:{port}/v1/", "OPENAI_API_KEY": "sk-test",
           "OPENAI_MODEL": "test-model"}
    with anyio.fail_after(120):
        async with listener, anyio.create_task_group() as group:
            group.start_soon(_serve_chat, listener, _agent_loop().ScriptedModel(), seen)
            done = await anyio.run_process([sys.executable, str(EXAMPLES / "agent_loop.py")], cwd=tmp_path,
                                           env=env, check=False)
            group.cancel_scope.cancel()
    assert (done.returncode, done.stderr.decode()) == (0, "")
    assert done.stdout.decode() == "\n".join(TRANSCRIPT) + "\n"
    assert [(line, key) for line, key, _ in seen] == [
        ("POST /v1/chat/completions HTTP/1.1", "Bearer sk-test")] * 3
    assert {request["model"] for _, _, request in seen} == {"test-model"}
