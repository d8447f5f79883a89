"""The five-stage pipeline: stage order, failure containment, cancellation, post-execute, finalize."""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import replace
from typing import Any

import anyio
import pytest

from codemode.runtime import (
    Accept,
    Agent,
    Allow,
    Block,
    CancelSource,
    Deny,
    ToolCall,
    ToolContext,
    ToolError,
    ToolOutput,
    ToolResult,
    ToolRuntime,
    define_tool,
)

from .helpers import TEXT_OUTPUT, body_tool, echo_tool, render_text

pytestmark = pytest.mark.anyio


class Recorder:
    """Installs one hook of each stage and counts how often each ran."""

    def __init__(self, rt: ToolRuntime) -> None:
        self.counts: Counter[str] = Counter()
        self.results: list[ToolResult] = []
        rt.on_pre_execute(self.pre)
        rt.around_execute(self.around)
        rt.on_post_execute(self.post)
        rt.on_result(self.observe)

    async def pre(self, call: ToolCall, call_next: Any) -> Any:
        self.counts["pre"] += 1
        return await call_next()

    async def around(self, call: ToolCall, call_next: Any) -> ToolResult:
        self.counts["around"] += 1
        result: ToolResult = await call_next()
        return result

    async def post(self, call: ToolCall, result: ToolResult, call_next: Any) -> Any:
        self.counts["post"] += 1
        return await call_next()

    def observe(self, call: ToolCall, result: ToolResult) -> None:
        self.counts["observe"] += 1
        self.results.append(result)


@pytest.fixture
def rt() -> ToolRuntime:
    runtime = ToolRuntime()
    runtime.register(echo_tool())
    return runtime


async def run(rt: ToolRuntime, name: str, args: Any, **kw: Any) -> ToolResult:
    with anyio.fail_after(5):
        return await rt.execute(name, args, **kw)


async def test_success_runs_every_stage_once(rt: ToolRuntime) -> None:
    """It runs pre, around, body, post and observers once and returns a frozen success."""
    recorder = Recorder(rt)
    result = await run(rt, "echo", {"text": "hi"})
    assert result.is_error is False
    assert result.value == {"text": "hi"}
    assert result.content == [{"type": "text", "text": "hi"}]
    assert result.error is None
    assert recorder.counts == Counter(pre=1, around=1, post=1, observe=1)
    assert recorder.results == [result]
    with pytest.raises(TypeError):
        result.value["text"] = "x"
    with pytest.raises(TypeError):
        result.content.append({"type": "text", "text": "x"})


@pytest.mark.parametrize("bad", [float("nan"), {1: 2}, (1, 2), {"a": {"b"}}, b"x"])
async def test_non_json_arguments_are_a_final_error(rt: ToolRuntime, bad: Any) -> None:
    """It rejects lossy arguments at creation: no policy stage runs, observers still see it."""
    recorder = Recorder(rt)
    source = CancelSource()
    source.cancel()
    result = await run(rt, "echo", {"text": bad}, cancel=source.signal)
    assert result.code == "INVALID_ARGS"
    assert "must be losslessly JSON-serializable" in result.error.message
    assert recorder.counts == Counter(observe=1)


async def test_pre_aborted_call_runs_nothing(rt: ToolRuntime) -> None:
    """It settles a pre-cancelled call ABORTED_BEFORE_DISPATCH without any hook or body."""
    recorder = Recorder(rt)
    source = CancelSource()
    source.cancel("user pressed stop")
    result = await run(rt, "echo", {"text": "x"}, cancel=source.signal)
    assert result.code == "ABORTED_BEFORE_DISPATCH"
    assert result.content == [{"type": "text", "text": "Error: tool call aborted before dispatch"}]
    assert recorder.counts == Counter(observe=1)


async def test_invalid_arguments_reach_post_execute(rt: ToolRuntime) -> None:
    """It validates define_tool arguments before the body, path-qualified, as a post-result."""
    recorder = Recorder(rt)
    result = await run(rt, "echo", {"text": 3})
    assert result.code == "INVALID_ARGS"
    assert result.error.message == 'invalid arguments: "text" must be a string'
    assert recorder.counts["post"] == 1
    non_object = await run(rt, "echo", "hello")
    assert non_object.error.message == 'invalid arguments: "arguments" must be an object'


async def test_unknown_tool_keeps_the_ordinary_path(rt: ToolRuntime) -> None:
    """It lets pre-execute see an unknown name, fails dispatch with UNKNOWN_TOOL, runs post-execute."""
    recorder = Recorder(rt)
    result = await run(rt, "nope", {})
    assert result.code == "UNKNOWN_TOOL"
    assert result.error.message == 'unknown tool "nope"'
    assert recorder.counts == Counter(pre=1, around=1, post=1, observe=1)


async def test_pre_execute_deny_and_guard_deny_are_post_results(rt: ToolRuntime) -> None:
    """It turns a deny or a guard reason into a DENIED post-result without running the body."""
    calls: list[Any] = []
    rt.register(echo_tool("tracked", calls=calls))
    recorder = Recorder(rt)

    async def deny(call: ToolCall, call_next: Any) -> Any:
        return Deny("not today") if call.arguments.get("text") == "deny" else await call_next()

    rt.on_pre_execute(deny)
    rt.guard(lambda call: "guarded" if call.arguments.get("text") == "guard" else None)
    denied = await run(rt, "tracked", {"text": "deny"})
    guarded = await run(rt, "tracked", {"text": "guard"})
    assert (denied.code, denied.error.message) == ("DENIED", "not today")
    assert denied.content == [{"type": "text", "text": "Error: not today"}]
    assert (guarded.code, guarded.error.message) == ("DENIED", "guarded")
    assert calls == []
    assert recorder.counts["post"] == 2
    assert recorder.counts["around"] == 0


async def test_allow_does_not_override_a_guard(rt: ToolRuntime) -> None:
    """It still runs guards after an explicit Allow (guards are monotonic)."""

    async def allow(call: ToolCall, call_next: Any) -> Any:
        return Allow()

    rt.on_pre_execute(allow)
    rt.guard(lambda call: "no")
    assert (await run(rt, "echo", {"text": "x"})).code == "DENIED"


@pytest.mark.parametrize("broken", ["raise", "garbage", "guard-raise", "guard-garbage"])
async def test_broken_policy_fails_closed_and_skips_post_execute(rt: ToolRuntime, broken: str) -> None:
    """It turns a raising or misbehaving hook or guard into a final POLICY_FAILED result."""
    recorder = Recorder(rt)

    async def pre(call: ToolCall, call_next: Any) -> Any:
        if broken == "raise":
            raise RuntimeError("permission hook broke")
        if broken == "garbage":
            return "yes please"
        return await call_next()

    def guard(call: ToolCall) -> Any:
        if broken == "guard-raise":
            raise ValueError("guard broke")
        return 42 if broken == "guard-garbage" else None

    rt.on_pre_execute(pre)
    rt.guard(guard)
    result = await run(rt, "echo", {"text": "x"})
    assert result.code == "POLICY_FAILED"
    assert recorder.counts["post"] == 0
    assert recorder.counts["observe"] == 1
    if broken == "raise":
        assert result.content == [{"type": "text", "text": "Error: permission hook broke"}]


class CustomBase(BaseException):
    """A BaseException that is not cancellation."""


@pytest.mark.parametrize(("exc", "code", "message"), [
    (RuntimeError("disk on fire"), "TOOL_FAILED", "disk on fire"),
    (ValueError(), "TOOL_FAILED", "ValueError"),
    (ToolError("custom tool error"), "TOOL_ERROR", "custom tool error"),
    (SystemExit(3), "TOOL_FAILED", "SystemExit: 3"),
    (KeyboardInterrupt(), "TOOL_FAILED", "KeyboardInterrupt"),
    (GeneratorExit(), "TOOL_FAILED", "GeneratorExit"),
    (CustomBase("odd"), "TOOL_FAILED", "CustomBase: odd"),
])
async def test_any_body_exception_becomes_an_error_result(exc: BaseException, code: str,
                                                         message: str) -> None:
    """It never lets a body's exception (incl. non-cancellation BaseExceptions) reach the host."""
    rt = ToolRuntime()

    async def body(args: Any, ctx: ToolContext) -> Any:
        raise exc

    rt.register(body_tool("boom", body))
    result = await run(rt, "boom", {})
    assert (result.code, result.error.message) == (code, message)
    assert result.value is None


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no")


async def test_unprintable_exception_message() -> None:
    """It renders an exception whose str() raises as <unprintable thrown value>."""
    rt = ToolRuntime()

    async def body(args: Any, ctx: ToolContext) -> Any:
        raise Unprintable()

    rt.register(body_tool("u", body))
    assert (await run(rt, "u", {})).error.message == "<unprintable thrown value>"


@pytest.mark.parametrize(("value", "render", "fragment"), [
    ({"text": float("nan")}, render_text, "value is not lossless JSON"),
    (object(), render_text, "value is not lossless JSON"),
    ({"text": 1}, render_text, '"value.text" must be a string'),
    ({"text": "x", "extra": 1}, render_text,
     '"value.extra" is not a declared property (additionalProperties: false)'),
    ({"text": "x"}, lambda a, v: 1 / 0, "output.render failed: division by zero"),
    ({"text": "x"}, lambda a, v: "text", "output.render must return a list of content blocks"),
    ({"text": "x"}, lambda a, v: [{"text": "no type"}], 'without a string "type"'),
    ({"text": "x"}, lambda a, v: [{"type": "text", "text": {1, 2}}], "returned non-lossless JSON"),
])
async def test_bad_outputs_are_invalid_tool_output(value: Any, render: Any, fragment: str) -> None:
    """It validates, snapshots and renders the body's value, reporting INVALID_TOOL_OUTPUT."""
    rt = ToolRuntime()

    async def body(args: Any, ctx: ToolContext) -> Any:
        return value

    rt.register(define_tool(name="out", description="d", parameters={},
                            output=ToolOutput(schema=TEXT_OUTPUT, render=render), execute=body))
    result = await run(rt, "out", {})
    assert result.code == "INVALID_TOOL_OUTPUT"
    assert result.error.message.startswith('tool "out" returned invalid output: ')
    assert fragment in result.error.message


async def test_presentation_meta_only_for_top_level_calls() -> None:
    """It computes presentation_meta for calls without a parent token only."""
    rt = ToolRuntime()
    output = ToolOutput(schema=TEXT_OUTPUT, render=render_text,
                        presentation_meta=lambda a, v: {"len": len(v["text"])})
    rt.register(replace(echo_tool("m"), output=output))
    top = await run(rt, "m", {"text": "abc"})
    parent = rt.stages.create("m", {"text": "x"}).token
    nested = await run(rt, "m", {"text": "abc"}, parent=parent)
    assert top.meta == {"len": 3}
    assert nested.meta is None


async def test_context_identity_fields() -> None:
    """It gives the body its call id, root call id, agent, token, parent and the runtime."""
    rt = ToolRuntime()
    agent = Agent("a")
    seen: list[ToolContext] = []

    async def body(args: Any, ctx: ToolContext) -> Any:
        seen.append(ctx)
        return None

    rt.register(body_tool("id", body))
    outer = rt.stages.create("id", {}, call_id="c1")
    await run(rt, "id", {}, call_id="c1:code:1", root_call_id="c1", agent=agent, parent=outer.token)
    await run(rt, "id", {}, call_id="top")
    child, top = seen
    assert (child.call_id, child.root_call_id, child.agent, child.parent) == ("c1:code:1", "c1", agent,
                                                                              outer.token)
    assert child.runtime is rt
    assert (top.root_call_id, top.parent, top.agent) == ("top", None, None)
    assert child.token is not top.token


# ------------------------------------------------------------------------------------------- cancellation


async def test_cancel_during_body_yields_aborted_and_awaits_the_body() -> None:
    """It cancels the body at its next await, waits for its cleanup, and reports ABORTED."""
    rt = ToolRuntime()
    cleaned: list[str] = []

    async def body(args: Any, ctx: ToolContext) -> Any:
        try:
            await anyio.sleep(10)
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.sleep(0.01)
            cleaned.append("done")
        return {}

    rt.register(body_tool("slow", body))
    source = CancelSource()
    async with anyio.create_task_group() as tg:
        tg.start_soon(_cancel_later, source)
        result = await run(rt, "slow", {}, cancel=source.signal)
    assert result.code == "ABORTED"
    assert result.error.message == "tool call aborted"
    assert cleaned == ["done"]


async def _cancel_later(source: CancelSource, delay: float = 0.02) -> None:
    await anyio.sleep(delay)
    source.cancel("stop")


async def test_a_body_that_swallows_cancellation_still_reports_aborted() -> None:
    """It replaces a success that settled after cancellation with ABORTED."""
    rt = ToolRuntime()

    async def body(args: Any, ctx: ToolContext) -> Any:
        with anyio.CancelScope(shield=True):
            await ctx.cancel.wait()
        return {"ok": True}

    rt.register(body_tool("stubborn", body))
    source = CancelSource()
    async with anyio.create_task_group() as tg:
        tg.start_soon(_cancel_later, source)
        result = await run(rt, "stubborn", {}, cancel=source.signal)
    assert result.code == "ABORTED"


async def test_a_tool_failure_racing_cancellation_is_kept() -> None:
    """It keeps the more specific tool failure over ABORTED."""
    rt = ToolRuntime()

    async def body(args: Any, ctx: ToolContext) -> Any:
        with anyio.CancelScope(shield=True):
            await ctx.cancel.wait()
        raise RuntimeError("failed while stopping")

    rt.register(body_tool("failing", body))
    source = CancelSource()
    async with anyio.create_task_group() as tg:
        tg.start_soon(_cancel_later, source)
        result = await run(rt, "failing", {}, cancel=source.signal)
    assert (result.code, result.error.message) == ("TOOL_FAILED", "failed while stopping")


async def test_cancel_while_pre_execute_pending_is_aborted_before_dispatch() -> None:
    """It never starts the body when the caller cancelled during pre-execute."""
    rt = ToolRuntime()
    calls: list[Any] = []
    rt.register(echo_tool(calls=calls))
    source = CancelSource()

    async def slow_allow(call: ToolCall, call_next: Any) -> Any:
        source.cancel()
        return await call_next()

    rt.on_pre_execute(slow_allow)
    result = await run(rt, "echo", {"text": "x"}, cancel=source.signal)
    assert result.code == "ABORTED_BEFORE_DISPATCH"
    assert calls == []


async def test_genuine_outer_cancellation_propagates_after_the_body() -> None:
    """It lets an outer anyio cancellation of the caller propagate once the body has finished."""
    rt = ToolRuntime()
    finished: list[bool] = []

    async def body(args: Any, ctx: ToolContext) -> Any:
        try:
            await anyio.sleep(10)
        finally:
            finished.append(True)
        return {}

    rt.register(body_tool("slow", body))
    with anyio.fail_after(5):
        with anyio.move_on_after(0.02) as scope:
            await rt.execute("slow", {})
    assert scope.cancelled_caught
    assert finished == [True]


async def test_wrapper_substitute_signal_is_fused_with_the_callers() -> None:
    """It runs the body under the caller's signal fused with a wrapper's substitute (timeout policy)."""
    rt = ToolRuntime()
    seen: list[Any] = []

    async def body(args: Any, ctx: ToolContext) -> Any:
        seen.append(ctx.cancel)
        await anyio.sleep(10)
        return {}

    deadline = CancelSource()

    async def around(call: ToolCall, call_next: Any) -> ToolResult:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_cancel_later, deadline)
            result: ToolResult = await call_next(cancel=deadline.signal)
        return result

    rt.register(body_tool("slow", body))
    rt.around_execute(around)
    caller = CancelSource()
    result = await run(rt, "slow", {}, cancel=caller.signal)
    assert result.code == "ABORTED"
    assert seen[0] is not caller.signal and seen[0] is not deadline.signal
    assert seen[0].cancelled


# ------------------------------------------------------------------------------------------- around / post


async def test_around_authored_success_is_rerendered_from_its_value(rt: ToolRuntime) -> None:
    """It re-validates and re-renders an authored success; the wrapper's content is ignored."""

    async def cached(call: ToolCall, call_next: Any) -> ToolResult:
        return ToolResult(is_error=False, value={"text": "cached"}, content=[{"type": "text", "text": "lie"}],
                          additional_contexts=[{"content": [], "source": {"kind": "cache"}}])

    rt.around_execute(cached)
    result = await run(rt, "echo", {"text": "x"})
    assert result.content == [{"type": "text", "text": "cached"}]
    assert result.additional_contexts == [{"content": [], "source": {"kind": "cache"}}]


async def test_around_authored_invalid_success_and_error(rt: ToolRuntime) -> None:
    """It rejects an authored value that violates the output schema, and rebuilds authored errors."""
    mode = {"kind": "bad"}

    async def wrapper(call: ToolCall, call_next: Any) -> ToolResult:
        if mode["kind"] == "bad":
            return ToolResult(is_error=False, value={"text": 5})
        return ToolResult.failure("TOOL_TIMEOUT", "tool call timed out after 5ms")

    rt.around_execute(wrapper)
    assert (await run(rt, "echo", {"text": "x"})).code == "INVALID_TOOL_OUTPUT"
    mode["kind"] = "error"
    result = await run(rt, "echo", {"text": "x"})
    assert (result.code, result.text) == ("TOOL_TIMEOUT", "Error: tool call timed out after 5ms")


@pytest.mark.parametrize("misbehaviour", ["raise", "garbage"])
async def test_broken_wrapper_is_final_and_skips_post(rt: ToolRuntime, misbehaviour: str) -> None:
    """It turns a raising wrapper or a non-result into a final error (post-execute skipped)."""
    recorder = Recorder(rt)

    async def wrapper(call: ToolCall, call_next: Any) -> Any:
        if misbehaviour == "raise":
            raise RuntimeError("wrapper broke")
        return {"not": "a result"}

    rt.around_execute(wrapper)
    result = await run(rt, "echo", {"text": "x"})
    assert result.code == "POLICY_FAILED"
    assert recorder.counts["post"] == 0


async def test_post_execute_accept_replacements(rt: ToolRuntime) -> None:
    """It re-renders a replaced value, replaces content only, and appends contexts."""
    mode = {"kind": "value"}

    async def post(call: ToolCall, result: ToolResult, call_next: Any) -> Any:
        if mode["kind"] == "value":
            return Accept(value={"text": "replaced"}, additional_contexts=[{"content": [], "source": {}}])
        if mode["kind"] == "content":
            return Accept(content=[{"type": "text", "text": "only content"}])
        if mode["kind"] == "both":
            return Accept(value={"text": "a"}, content=[])
        if mode["kind"] == "invalid":
            return Accept(value={"text": 1})
        return Block("blocked!")

    rt.on_post_execute(post)
    replaced = await run(rt, "echo", {"text": "x"})
    assert replaced.value == {"text": "replaced"}
    assert replaced.content == [{"type": "text", "text": "replaced"}]
    assert replaced.additional_contexts == [{"content": [], "source": {}}]
    mode["kind"] = "content"
    content = await run(rt, "echo", {"text": "x"})
    assert (content.value, content.text) == ({"text": "x"}, "only content")
    mode["kind"] = "both"
    both = await run(rt, "echo", {"text": "x"})
    assert both.code == "POLICY_FAILED"
    assert "cannot replace both value and content" in both.text
    mode["kind"] = "invalid"
    assert (await run(rt, "echo", {"text": "x"})).code == "INVALID_TOOL_OUTPUT"


async def test_post_execute_cannot_replace_a_failed_value(rt: ToolRuntime) -> None:
    """It refuses Accept(value=...) on a failure."""

    async def post(call: ToolCall, result: ToolResult, call_next: Any) -> Any:
        return Accept(value={"text": "rescued"})

    rt.on_post_execute(post)
    result = await run(rt, "echo", {"text": 1})
    assert result.code == "POLICY_FAILED"
    assert "cannot replace the value of a failed result" in result.text


async def test_block_drops_deferred_contexts_and_keeps_its_own() -> None:
    """It replaces the outcome with the feedback; only the block's contexts survive."""
    rt = ToolRuntime()

    async def body(args: Any, ctx: ToolContext) -> Any:
        ctx.defer_context({"content": [{"type": "text", "text": "deferred"}], "source": {}})
        return {"text": "x"}

    rt.register(define_tool(name="d", description="", parameters={},
                            output=ToolOutput(schema=TEXT_OUTPUT, render=render_text), execute=body))
    outcome = {"block": False}

    async def post(call: ToolCall, result: ToolResult, call_next: Any) -> Any:
        if outcome["block"]:
            return Block([{"type": "text", "text": "no"}, {"type": "image", "data": ""}],
                         additional_contexts=[{"content": [], "source": {"by": "block"}}])
        return await call_next()

    rt.on_post_execute(post)
    kept = await run(rt, "d", {})
    assert kept.additional_contexts == [{"content": [{"type": "text", "text": "deferred"}], "source": {}}]
    outcome["block"] = True
    blocked = await run(rt, "d", {})
    assert blocked.code == "DENIED"
    assert blocked.error.message == "no\n[image content]"
    assert blocked.value is None
    assert blocked.additional_contexts == [{"content": [], "source": {"by": "block"}}]


async def test_empty_block_feedback_gets_the_default_message(rt: ToolRuntime) -> None:
    """It uses the default message when the feedback has no text."""

    async def post(call: ToolCall, result: ToolResult, call_next: Any) -> Any:
        return Block([])

    rt.on_post_execute(post)
    result = await run(rt, "echo", {"text": "x"})
    assert result.error.message == "tool result blocked by post-execute policy"


async def test_tool_unregistered_mid_call_resolves_again() -> None:
    """It re-resolves the definition at post-execute value replacement (UNKNOWN_TOOL when gone)."""
    rt = ToolRuntime()
    dispose = rt.register(echo_tool())

    async def post(call: ToolCall, result: ToolResult, call_next: Any) -> Any:
        dispose()
        return Accept(value={"text": "new"})

    rt.on_post_execute(post)
    assert (await run(rt, "echo", {"text": "x"})).code == "UNKNOWN_TOOL"


async def test_scoped_hooks_see_only_their_scope_and_descendants() -> None:
    """It filters scoped hooks by the call's agent chain; anonymous calls reach only unscoped hooks."""
    rt = ToolRuntime()
    rt.register(echo_tool())
    preset = Agent("preset")
    child, other = Agent("child", preset), Agent("other")
    seen: list[str] = []

    async def pre(call: ToolCall, call_next: Any) -> Any:
        seen.append(call.agent.name if call.agent else "-")
        return await call_next()

    rt.on_pre_execute(pre, scope=preset)
    for agent in (child, other, None, preset):
        await run(rt, "echo", {"text": "x"}, agent=agent)
    assert seen == ["child", "preset"]


# ------------------------------------------------------------------------------------------- finish


async def test_finalize_content_runs_exactly_once_even_on_failures() -> None:
    """It applies finalize_content once per outcome, including failures that skip post-execute."""
    calls: list[str] = []

    def finalize(call: ToolCall, result: ToolResult) -> Any:
        calls.append(result.code or "ok")
        return [{"type": "text", "text": "final"}] if not result.is_error else None

    rt = ToolRuntime()
    rt.register(echo_tool(finalize_content=finalize))
    ok = await run(rt, "echo", {"text": "x"})
    bad = await run(rt, "echo", {"text": float("nan")})
    assert ok.text == "final"
    assert bad.code == "INVALID_ARGS"
    assert calls == ["ok", "INVALID_ARGS"]


async def test_raising_finalizer_becomes_the_error_and_is_not_rerun() -> None:
    """It turns a raising finalizer into the final error without calling it again."""
    calls: list[int] = []

    def finalize(call: ToolCall, result: ToolResult) -> Any:
        calls.append(1)
        raise RuntimeError("finalizer broke")

    rt = ToolRuntime()
    rt.register(echo_tool(finalize_content=finalize))
    result = await run(rt, "echo", {"text": "x"})
    assert (result.code, result.error.message) == ("TOOL_FAILED", "finalizer broke")
    assert calls == [1]


async def test_observers_that_raise_are_contained_and_logged(rt: ToolRuntime,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    """It logs failing sync and async observers and still calls the others."""
    seen: list[str] = []

    def sync_bad(call: ToolCall, result: ToolResult) -> None:
        raise RuntimeError("sync observer broke")

    async def async_bad(call: ToolCall, result: ToolResult) -> None:
        raise RuntimeError("async observer broke")

    rt.on_result(sync_bad)
    rt.on_result(async_bad)
    rt.on_result(lambda call, result: seen.append(call.call_id))
    with caplog.at_level(logging.ERROR, logger="runtime"):
        result = await run(rt, "echo", {"text": "x"}, call_id="c7")
    assert result.value == {"text": "x"}
    assert seen == ["c7"]
    messages = [record.getMessage() for record in caplog.records]
    assert 'tool "echo" (c7): on_result observer failed: sync observer broke' in messages
    assert 'tool "echo" (c7): on_result observer failed: async observer broke' in messages


async def test_deferred_contexts_are_prepended_for_errors_too() -> None:
    """It attaches contexts deferred by the body to the result, before wrapper contexts, on failure too."""
    rt = ToolRuntime()

    async def body(args: Any, ctx: ToolContext) -> Any:
        ctx.defer_context({"content": [{"type": "text", "text": "note"}], "source": {}})
        raise RuntimeError("then failed")

    rt.register(body_tool("d", body))
    result = await run(rt, "d", {})
    assert result.code == "TOOL_FAILED"
    assert result.additional_contexts == [{"content": [{"type": "text", "text": "note"}], "source": {}}]


async def test_stage_api_composes_like_execute(rt: ToolRuntime) -> None:
    """It exposes create/prepare/dispatch/finish and the re-classification for schedulers."""
    stages = rt.stages
    execution = stages.create("echo", {"text": "s"}, call_id="k1")
    assert stages.execution_mode(execution) == "parallel"
    assert stages.claims(execution) is None
    prepared = await stages.prepare(execution)
    assert prepared.ready
    dispatched = await stages.dispatch(prepared)
    result = await stages.finish(dispatched)
    assert result.value == {"text": "s"}
    with pytest.raises(RuntimeError, match="already finished"):
        await stages.finish(dispatched)
    settled = await stages.prepare(stages.create("echo", {"text": float("inf")}))
    assert not settled.ready
    assert (await stages.finish(settled)).code == "INVALID_ARGS"


async def test_execution_mode_only_literal_true_is_parallel(rt: ToolRuntime) -> None:
    """It classifies parallel only for a literal True from a working classifier."""

    def truthy(args: Any) -> Any:
        return 1

    def raising(args: Any) -> bool:
        raise RuntimeError("classifier broke")

    rt.register(replace(echo_tool("truthy"), is_concurrency_safe=truthy))
    rt.register(replace(echo_tool("raising"), is_concurrency_safe=raising))
    rt.register(echo_tool("plain", safe=False))
    assert rt.execution_mode("echo", {"text": "x"}) == "parallel"
    assert rt.execution_mode("echo", {"text": 3}) == "exclusive"
    for name in ("truthy", "raising", "plain", "missing"):
        assert rt.execution_mode(name, {"text": "x"}) == "exclusive"


async def test_execute_tool_calls_returns_the_results_in_model_order(rt: ToolRuntime) -> None:
    """It runs a model turn through the scheduler and returns one ToolResult per call, in model order."""
    from codemode.runtime import ToolCallRequest

    calls = [ToolCallRequest("c1", "echo", '{"text": "a"}'), ToolCallRequest("c2", "echo", "{bad"),
             ToolCallRequest("c3", "echo", '{"text": "b"}')]
    results = await rt.execute_tool_calls(calls, agent=None)
    assert all(isinstance(result, ToolResult) for result in results)
    assert [result.code for result in results] == [None, "INVALID_ARGS", None]
    assert [result.value["text"] for result in (results[0], results[2])] == ["a", "b"]


@pytest.mark.parametrize(("fails", "concludes"), [(False, True), (True, False)])
async def test_conclude_turn_marks_only_successes(fails: bool, concludes: bool) -> None:
    """It flags a success whose body called conclude_turn(); a failure never concludes the turn."""
    rt = ToolRuntime()

    async def body(args: Any, ctx: ToolContext) -> Any:
        ctx.conclude_turn()
        if fails:
            raise RuntimeError("no")
        return None

    rt.register(body_tool("final", body))
    rt.register(echo_tool())
    assert (await run(rt, "final", {})).concludes_turn is concludes
    assert (await run(rt, "echo", {"text": "x"})).concludes_turn is False
