"""run_code hands up what its children hand up: a turn's conclusion, image content, additional contexts,
and the code-dispatch log hook over the logged copy of each child's content."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import anyio
import pytest

from codemode.runtime import (
    Accept,
    Agent,
    Block,
    CodeDispatch,
    Scope,
    ToolCall,
    ToolContext,
    ToolOutput,
    ToolResult,
    ToolRuntime,
    define_tool,
    text_block,
)
from codemode.tools.demo import demo_tools
from codemode.tools.run_code import CODE_MODE_PLUGIN, PythonCodeRuntime

pytestmark = pytest.mark.anyio

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
IMAGE_CONTENT = [{"type": "text", "text": "image result"},
                 {"type": "image", "data": PNG, "mimeType": "image/png"}]


def _image_tool() -> Any:
    async def execute(args: Any, ctx: ToolContext) -> Any:
        return {"caption": "image result"}

    return define_tool(
        name="snapshot", description="Return one image.", parameters={},
        output=ToolOutput(schema={"type": "object"}, render=lambda args, value: IMAGE_CONTENT),
        execute=execute, is_concurrency_safe=lambda args: True)


def _finish_tool() -> Any:
    async def execute(args: Any, ctx: ToolContext) -> Any:
        ctx.conclude_turn()
        return "done"

    return define_tool(name="finish", description="End the turn.", parameters={},
                       output=ToolOutput(schema={"type": "string"}, render=lambda a, v: [text_block(v)]),
                       execute=execute)


def _gated_tool() -> tuple[Any, dict[str, anyio.Event], anyio.Event]:
    """A concurrency-safe tool whose calls ("a", "b") finish when the test releases them, in any order;
    the returned event fires once both are running."""
    gates = {"a": anyio.Event(), "b": anyio.Event()}
    both_running = anyio.Event()
    running: list[str] = []

    async def execute(args: Any, ctx: ToolContext) -> Any:
        running.append(args["id"])
        if len(running) == 2:
            both_running.set()
        await gates[args["id"]].wait()
        return args["id"]

    definition = define_tool(
        name="gated", description="Wait for the test.",
        parameters={"id": {"type": "string", "required": True}},
        output=ToolOutput(schema={"type": "string"}, render=lambda a, v: [text_block(v)]),
        execute=execute, is_concurrency_safe=lambda args: True)
    return definition, gates, both_running


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def code_runtime() -> AsyncIterator[PythonCodeRuntime]:
    async with PythonCodeRuntime() as runtime:
        yield runtime


@pytest.fixture
async def rt(code_runtime: PythonCodeRuntime) -> AsyncIterator[ToolRuntime]:
    async with ToolRuntime("code", code_runtime=code_runtime) as runtime:
        for definition in (*demo_tools(), _image_tool(), _finish_tool()):
            runtime.register(definition)
        yield runtime


async def run(rt: ToolRuntime, code: str, *, agent: Scope | None = None) -> ToolResult:
    with anyio.fail_after(30):
        return await rt.execute("run_code", {"code": code, "description": "test program"},
                                agent=agent, call_id="outer")


def _context_note(text: str) -> Callable[..., Awaitable[Any]]:
    async def hook(call: ToolCall, result: ToolResult, call_next: Callable[[], Awaitable[Any]]) -> Any:
        decision = await call_next()
        if call.name != "echo":
            return decision
        note = {"content": [{"type": "text", "text": f"{text} {call.call_id}"}],
                "source": {"kind": "plugin", "plugin": "test"}}
        return Accept(additional_contexts=(*decision.additional_contexts, note))

    return hook


# -- the turn's conclusion ------------------------------------------------------------------------


async def test_a_childs_conclusion_reaches_the_successful_run_code_result(rt: ToolRuntime) -> None:
    """It forwards a nested conclusion onto run_code's result (and only then)."""
    concluded = await run(rt, 'await tools.finish({})\nreturn "program complete"')
    plain = await run(rt, 'await tools.echo({"text": "x"})')
    assert (concluded.is_error, concluded.concludes_turn) == (False, True)
    assert plain.concludes_turn is False


async def test_a_blocked_child_does_not_conclude_even_when_the_program_recovers(rt: ToolRuntime) -> None:
    """It keeps a child that a post-execute policy blocked from ending the turn through a catching program."""
    async def veto(call: ToolCall, result: ToolResult, call_next: Callable[[], Awaitable[Any]]) -> Any:
        return Block("terminal rejected") if call.name == "finish" else await call_next()

    rt.on_post_execute(veto)
    recovered = await run(rt, 'try:\n    await tools.finish({})\nexcept ToolCallError as err:\n'
                              '    return err.code')
    assert (recovered.is_error, recovered.concludes_turn) == (False, False)
    assert recovered.value == {"logs": [], "result": "DENIED"}


async def test_a_program_that_fails_after_a_concluding_child_does_not_conclude(rt: ToolRuntime) -> None:
    """It never lets a failed run_code carry the conclusion (failures never conclude)."""
    failed = await run(rt, 'await tools.finish({})\nraise ValueError("later")')
    assert (failed.is_error, failed.code, failed.concludes_turn) == (True, "CODE_RUN_FAILED", False)


# -- image content --------------------------------------------------------------------------------


async def test_image_content_is_deferred_as_one_user_message_naming_the_plugin(rt: ToolRuntime) -> None:
    """It attaches an image-bearing child's whole content after the run, once, naming the code-mode
    plugin; the program sees only the value."""
    result = await run(rt, 'shot = await tools.snapshot({})\nreturn shot["caption"]')
    assert result.value == {"logs": [], "result": "image result"}
    assert result.additional_contexts == [{
        "content": IMAGE_CONTENT,
        "source": {"kind": "plugin", "plugin": CODE_MODE_PLUGIN, "tool": "snapshot",
                   "call_id": "outer:code:1"},
    }]
    assert CODE_MODE_PLUGIN == "code-mode"


async def test_each_image_bearing_child_is_one_context_and_text_children_none(rt: ToolRuntime) -> None:
    """It defers one context per image-bearing child, in call order, and nothing for text results."""
    result = await run(rt, "import asyncio\nawait tools.echo({'text': 'x'})\n"
                           "await asyncio.gather(tools.snapshot({}), tools.snapshot({}))")
    assert [context["source"]["call_id"] for context in result.additional_contexts] == [
        "outer:code:2", "outer:code:3"]


@pytest.mark.parametrize("decision", ["block", "replace"])
async def test_images_removed_by_a_nested_policy_are_not_deferred(rt: ToolRuntime, decision: str) -> None:
    """It defers nothing when a post-execute decision blocked the image or replaced its content."""
    async def strip(call: ToolCall, result: ToolResult, call_next: Callable[[], Awaitable[Any]]) -> Any:
        if call.name != "snapshot":
            return await call_next()
        return Block("blocked") if decision == "block" else Accept(content=[text_block("replaced")])

    rt.on_post_execute(strip)
    result = await run(rt, "try:\n    await tools.snapshot({})\nexcept ToolCallError:\n    pass")
    assert result.is_error is False
    assert result.additional_contexts == []


# -- additional contexts --------------------------------------------------------------------------


async def test_child_contexts_follow_submission_order_under_out_of_order_completion(
        code_runtime: PythonCodeRuntime) -> None:
    """It attaches the children's contexts in submission order even when the later child finishes first."""
    gated, gates, both_running = _gated_tool()
    async with ToolRuntime("code", code_runtime=code_runtime) as rt:
        rt.register(gated)

        async def note(call: ToolCall, result: ToolResult, call_next: Callable[[], Awaitable[Any]]) -> Any:
            await call_next()
            if call.name != "gated":
                return Accept()
            note = {"content": [text_block(f"ctx:{call.call_id}")], "source": {}}
            return Accept(additional_contexts=[note])

        rt.on_post_execute(note)

        async def release_in_reverse() -> None:
            await both_running.wait()
            gates["b"].set()
            await anyio.sleep(0.05)
            gates["a"].set()

        async with anyio.create_task_group() as group:
            group.start_soon(release_in_reverse)
            result = await run(rt, "import asyncio\nreturn await asyncio.gather("
                                   "tools.gated({'id': 'a'}), tools.gated({'id': 'b'}))")
    assert result.value == {"logs": [], "result": ["a", "b"]}
    assert [c["content"][0]["text"] for c in result.additional_contexts] == [
        "ctx:outer:code:1", "ctx:outer:code:2"]


async def test_contexts_are_kept_when_the_program_fails_later(rt: ToolRuntime) -> None:
    """It keeps the contexts (and images) children handed up before the program failed."""
    rt.on_post_execute(_context_note("nested context"))
    result = await run(rt, 'await tools.echo({"text": "x"})\nawait tools.snapshot({})\n'
                           'raise RuntimeError("program failed later")')
    assert (result.is_error, result.code) == (True, "CODE_RUN_FAILED")
    assert [c["source"].get("plugin") for c in result.additional_contexts] == ["test", CODE_MODE_PLUGIN]
    assert result.additional_contexts[0]["content"] == [
        {"type": "text", "text": "nested context outer:code:1"}]


async def test_an_outer_block_discards_the_handed_up_contexts(rt: ToolRuntime) -> None:
    """It drops the children's contexts with the run_code result an outer post-execute policy blocks."""
    async def block_run_code(call: ToolCall, result: ToolResult,
                             call_next: Callable[[], Awaitable[Any]]) -> Any:
        decision = await call_next()
        return Block("no programs today") if call.name == "run_code" else decision

    rt.on_post_execute(block_run_code)
    result = await run(rt, "await tools.snapshot({})")
    assert (result.is_error, result.additional_contexts) == (True, [])


# -- the code-dispatch log hook -------------------------------------------------------------------


def _dispatch_events(agent: Agent) -> list[Any]:
    return [event.data for event in agent.events if event.type == "tool/code-dispatch"]


async def test_a_log_hook_replaces_only_the_logged_copy(rt: ToolRuntime) -> None:
    """It lets a plugin spill a large child output: the event gets a preview and a locator, while the
    program and the model still see the whole value."""
    seen: list[CodeDispatch] = []
    spilled: dict[str, Any] = {}

    async def spill(dispatch: CodeDispatch, call_next: Callable[[], Awaitable[Sequence[Any]]]) -> Any:
        seen.append(dispatch)
        content = await call_next()
        text = content[0]["text"] if content and content[0].get("type") == "text" else ""
        if len(text) <= 100:
            return content
        spilled[dispatch.sub_call_id] = content
        return [text_block(f"{text[:10]}... ({len(text)} chars spilled to spill://{dispatch.sub_call_id})")]

    rt.on_code_dispatch_log(spill)
    agent = Agent("a")
    program = ('big = await tools.echo({"text": "x" * 5000})\n'
               'small = await tools.echo({"text": "short"})\nreturn len(big["text"])')
    result = await run(rt, program, agent=agent)
    assert result.value == {"logs": [], "result": 5000}
    logged = _dispatch_events(agent)
    assert logged[0]["content"] == [{"type": "text", "text": "xxxxxxxxxx... (5000 chars spilled to "
                                                               "spill://outer:code:1)"}]
    assert logged[1]["content"] == [{"type": "text", "text": "short"}]
    assert spilled["outer:code:1"][0]["text"] == "x" * 5000
    first = seen[0]
    assert (first.root_call_id, first.parent_call_id, first.sub_call_id, first.name) == (
        "outer", "outer", "outer:code:1", "echo")
    assert (first.arguments, first.agent, first.is_error) == ({"text": "x" * 5000}, agent, False)


@pytest.mark.parametrize("broken", ["raises", "not-blocks"])
async def test_a_failing_log_hook_is_contained(rt: ToolRuntime, broken: str,
                                               caplog: pytest.LogCaptureFixture) -> None:
    """It logs the original content and a warning when a hook raises or answers garbage; the run goes on."""
    async def hook(dispatch: CodeDispatch, call_next: Callable[[], Awaitable[Sequence[Any]]]) -> Any:
        if broken == "raises":
            raise RuntimeError("log-content listener failed")
        return "not a list of blocks"

    rt.on_code_dispatch_log(hook)
    agent = Agent("a")
    with caplog.at_level(logging.WARNING, logger="runtime"):
        result = await run(rt, 'return (await tools.echo({"text": "x"}))["text"]', agent=agent)
    assert result.value == {"logs": [], "result": "x"}
    assert _dispatch_events(agent)[0]["content"] == [{"type": "text", "text": "x"}]
    messages = [record.getMessage() for record in caplog.records]
    warning = next(message for message in messages if "code-dispatch-log hook failed" in message)
    assert 'tool "echo" (outer:code:1)' in warning
    assert ("log-content listener failed" if broken == "raises" else "must return a list") in warning


async def test_a_scoped_log_hook_sees_only_its_agents_children(rt: ToolRuntime) -> None:
    """It applies a hook registered for one agent to that agent's programs alone."""
    mine, other = Agent("mine"), Agent("other")

    async def redact(dispatch: CodeDispatch, call_next: Callable[[], Awaitable[Sequence[Any]]]) -> Any:
        return [text_block("[redacted]")]

    rt.on_code_dispatch_log(redact, scope=mine)
    for agent in (mine, other):
        await run(rt, 'await tools.echo({"text": "secret"})', agent=agent)
    assert _dispatch_events(mine)[0]["content"] == [{"type": "text", "text": "[redacted]"}]
    assert _dispatch_events(other)[0]["content"] == [{"type": "text", "text": "secret"}]
