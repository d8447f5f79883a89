"""``CodeMode``: one async context manager for the sandbox, the code runtime and the tool runtime; misuse
fails where it is made, with ``LifecycleError``."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from codemode import CodeMode, LifecycleError, ToolContext, tool
from codemode.runtime import (
    Agent,
    ConfigError,
    Deny,
    ToolCall,
    ToolCallRequest,
    ToolResult,
    ToolRuntime,
    UsageError,
)
from codemode.sandbox import Sandbox
from codemode.tools import PythonCodeRuntime
from codemode.tools.demo import demo_tools

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def sandbox() -> AsyncIterator[Sandbox]:
    """One warm worker supply shared by this module's CodeMode instances (each would start its own)."""
    async with Sandbox() as shared:
        yield shared


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def multiply(a: float, b: float) -> float:
    """Multiply two numbers (registered as a plain function)."""
    return a * b


@tool(timeout_ms=50)
async def slow() -> str:
    """Take far longer than the budget."""
    await anyio.sleep(10)
    return "late"


async def test_run_executes_a_program_against_the_tools(sandbox: Sandbox) -> None:
    """It runs a program through run_code, with decorated tools and plain functions alike."""
    async with CodeMode(tools=[add, multiply], sandbox=sandbox) as cm:
        with anyio.fail_after(30):
            result = await cm.run("s = await tools.add(a=2, b=3)\nprint('sum', s)\n"
                                  "return await tools.multiply(a=s, b=0.5)")
    assert isinstance(result, ToolResult) and not result.is_error
    assert result.value == {"logs": ["sum 5"], "result": 2.5}
    assert result.text == "sum 5\n2.5"
    calls = [event for event in cm.agent.events.events if event.type == "tool/call"]
    assert [json.loads(event.data["arguments"])["description"] for event in calls] == ["Run a Python program"]


async def test_a_failed_program_is_an_error_result(sandbox: Sandbox) -> None:
    """It returns the run_code failure (kind and captured output), it does not raise."""
    async with CodeMode(tools=[add], sandbox=sandbox) as cm:
        with anyio.fail_after(30):
            result = await cm.run("print('before')\nraise ValueError('boom')", description="Fail on purpose")
    assert result.code == "CODE_RUN_FAILED"
    assert result.error is not None and "ValueError: boom" in result.error.message
    assert "before" in result.error.message


async def test_prompt_and_a_model_turn(sandbox: Sandbox) -> None:
    """It offers run_code with the SDK in code mode and runs a model turn's calls, results in order."""
    async with CodeMode(tools=[add], sandbox=sandbox) as cm:
        prompt = cm.prompt()
        assert [schema["name"] for schema in prompt.tools] == ["run_code"]
        sdk = prompt.section("tools:sdk")
        assert sdk is not None and "async def add(self, args: AddArgs) -> int:" in sdk.text
        program = json.dumps({"code": "return await tools.add(a=1, b=1)", "description": "Add one and one"})
        with anyio.fail_after(30):
            results = await cm.execute_tool_calls([ToolCallRequest("c1", "run_code", program),
                                                   ToolCallRequest("c2", "add", '{"a": 1, "b": 1}')])
    assert [result.value for result in results] == [{"logs": [], "result": 2}, None]
    assert results[1].code == "UNKNOWN_TOOL"  # code mode: add is reachable only from a program


async def test_both_mode_offers_the_tools_and_run_code(sandbox: Sandbox) -> None:
    """``mode="both"`` offers the native tools beside run_code; a direct call works."""
    async with CodeMode(tools=[add], mode="both", sandbox=sandbox) as cm:
        assert sorted(schema["name"] for schema in cm.prompt().tools) == ["add", "run_code"]
        [result] = await cm.execute_tool_calls([ToolCallRequest("c1", "add", '{"a": 2, "b": 2}')])
    assert result.value == 4 and result.text == "4"


async def test_timeouts_are_enforced_by_default(sandbox: Sandbox) -> None:
    """A tool's ``timeout_ms`` holds inside programs without any setup (the policy is installed)."""
    async with CodeMode(tools=[slow], sandbox=sandbox) as cm:
        assert cm.timeout_policy is not None
        with anyio.fail_after(30):
            result = await cm.run("try:\n    await tools.slow()\nexcept ToolCallError as err:\n"
                                  "    return err.code")
    assert result.value == {"logs": [], "result": "TOOL_TIMEOUT"}


async def test_the_tool_runtime_is_reachable_for_hooks_and_policies(sandbox: Sandbox) -> None:
    """Hooks added on ``cm.runtime`` (before entering) apply to a program's calls."""
    cm = CodeMode(tools=[add], sandbox=sandbox, agent=Agent("alice"))

    async def refuse_big(call: ToolCall, call_next: Any) -> Any:
        if call.name == "add" and call.arguments["a"] > 100:
            return Deny("numbers that big are not allowed")
        return await call_next()

    cm.runtime.on_pre_execute(refuse_big)
    assert isinstance(cm.runtime, ToolRuntime) and cm.agent.name == "alice"
    async with cm:
        with anyio.fail_after(30):
            result = await cm.run("try:\n    await tools.add(a=1000, b=1)\nexcept ToolCallError as err:\n"
                                  "    return [err.code, str(err)]")
    assert result.value == {"logs": [], "result": ["DENIED", "numbers that big are not allowed"]}


async def test_the_context_reaches_a_decorated_tool_inside_a_program(sandbox: Sandbox) -> None:
    """A child call's ToolContext carries the child's identity (``<run id>:code:<n>``)."""

    @tool
    def whoami(ctx: ToolContext) -> str:
        return ctx.call_id

    async with CodeMode(tools=[whoami], sandbox=sandbox) as cm:
        with anyio.fail_after(30):
            result = await cm.run("return await tools.whoami()")
    assert result.value == {"logs": [], "result": "run-1:code:1"}


# ---------------------------------------------------------------------------------- misuse


async def _use(cm: CodeMode, what: str) -> Any:
    if what == "run":
        return await cm.run("return 1")
    if what == "prompt":
        return cm.prompt()
    return await cm.execute_tool_calls([])


@pytest.mark.parametrize("what", ["run", "prompt", "execute_tool_calls"])
async def test_calling_before_entering_fails_where_it_is_made(what: str) -> None:
    """It raises LifecycleError (a RuntimeError with a stable code) naming the method and the fix."""
    cm = CodeMode(tools=[add])
    expected = rf"CodeMode.{what}\(\) was called before `async with`"
    with pytest.raises(LifecycleError, match=expected) as caught:
        await _use(cm, what)
    assert isinstance(caught.value, RuntimeError) and isinstance(caught.value, UsageError)
    assert caught.value.code == "INVALID_LIFECYCLE"


@pytest.mark.parametrize("what", ["run", "prompt", "execute_tool_calls"])
async def test_calling_after_exit_fails(what: str, sandbox: Sandbox) -> None:
    """It raises LifecycleError after the block ended (a closed runtime would otherwise offer nothing)."""
    async with CodeMode(tools=[add], sandbox=sandbox) as cm:
        pass
    with pytest.raises(LifecycleError, match="after its `async with` block ended"):
        await _use(cm, what)


async def test_entering_twice_fails(sandbox: Sandbox) -> None:
    """It refuses a second ``async with``, both while open and after exit, and stays usable while open."""
    cm = CodeMode(tools=[add], sandbox=sandbox)
    async with cm:
        with pytest.raises(LifecycleError, match="already entered"):
            await cm.__aenter__()
        assert (await cm.run("return 7")).value == {"logs": [], "result": 7}
    with pytest.raises(LifecycleError, match="can be entered once"):
        async with cm:
            pass


async def test_native_mode_runs_no_programs() -> None:
    """``mode="native"`` starts no sandbox; run() and sandbox options say why they cannot work."""
    async with CodeMode(tools=[add], mode="native") as cm:
        assert cm.code_runtime is None
        assert [schema["name"] for schema in cm.prompt().tools] == ["add"]
        with pytest.raises(ConfigError, match='mode "native" does not offer'):
            await cm.run("return 1")
    with pytest.raises(ConfigError, match='mode "native" runs no programs'):
        CodeMode(mode="native", persistent_sessions=True)


async def test_a_code_runtime_that_was_never_entered_fails_in_the_integrators_hands() -> None:
    """A run_code call on a PythonCodeRuntime that was never entered raises LifecycleError before
    anything runs, instead of a tool error the model would see; other calls are unaffected."""
    code_runtime = PythonCodeRuntime()
    async with ToolRuntime("both", code_runtime=code_runtime) as rt:
        for definition in demo_tools():
            rt.register(definition)
        program = json.dumps({"code": "return 1", "description": "Return one"})
        with pytest.raises(LifecycleError, match="PythonCodeRuntime was never entered"):
            await rt.execute_tool_calls([ToolCallRequest("c1", "run_code", program)])
        with pytest.raises(LifecycleError, match="never entered"):
            await rt.execute("run_code", {"code": "return 1", "description": "Return one"})
        [echoed] = await rt.execute_tool_calls([ToolCallRequest("c2", "echo", '{"text": "hi"}')])
        assert echoed.value == {"text": "hi"}


async def test_a_code_runtime_after_exit_or_entered_twice_fails(sandbox: Sandbox) -> None:
    """A PythonCodeRuntime refuses a second entry and, once exited, run_code calls."""
    code_runtime = PythonCodeRuntime(sandbox)
    rt = ToolRuntime("code", code_runtime=code_runtime)
    async with code_runtime:
        with pytest.raises(LifecycleError, match="entered once"):
            await code_runtime.__aenter__()
    with pytest.raises(LifecycleError, match="PythonCodeRuntime has exited"):
        await rt.execute("run_code", {"code": "return 1", "description": "Return one"})


async def test_the_tool_runtime_reports_its_own_lifecycle_misuse() -> None:
    """ToolRuntime: entering twice and tying a resource before entering raise LifecycleError."""
    rt = ToolRuntime()
    with pytest.raises(LifecycleError, match="needs the runtime to be entered"):
        await rt.enter_async_context(PythonCodeRuntime())
    async with rt:
        with pytest.raises(LifecycleError, match="can be entered once"):
            await rt.__aenter__()
    with pytest.raises(LifecycleError, match="can be entered once"):
        async with rt:
            pass


# ---------------------------------------------------------------------------------- the README


def _readme_program() -> str:
    """The first Python block of the README's library section."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("\n## Library"):]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match is not None
    return match.group(1)


def test_the_readme_opens_the_library_section_with_a_short_program(tmp_path: Path) -> None:
    """The first library example is at most 12 lines (a decorated tool, CodeMode, one program run) and
    prints the program's result when run as written."""
    program = _readme_program()
    assert len(program.splitlines()) <= 12
    assert "@tool" in program and "CodeMode(" in program and "cm.run(" in program
    (tmp_path / "first.py").write_text(program, encoding="utf-8")
    done = subprocess.run([sys.executable, "first.py"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "5"
