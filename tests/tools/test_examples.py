"""Every program in examples/programs runs through run_code and prints exactly what it is documented to."""

from __future__ import annotations

import shutil
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


@pytest.mark.anyio
async def test_the_agent_loop_example_executes_the_models_run_code_call(workspace: Path) -> None:
    """It feeds the prompt to the (scripted) model and returns the executed program's output."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("agent_loop", EXAMPLES / "agent_loop.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with anyio.fail_after(30):
        text = await module.main(str(workspace))
    assert text == '{\n  "docs/notes.md": 25,\n  "docs/todo.txt": 12,\n  "src/app.py": 13\n}'
