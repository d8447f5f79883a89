"""The timeout policy: own deadline vs caller cancellation, stall protection, child calls."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
import pytest

from codemode.runtime._runtime import ToolRuntime
from codemode.runtime.cancel import CancelSource
from codemode.runtime.definitions import ToolOutput, define_tool
from codemode.runtime.scheduler import open_sub_lane
from codemode.runtime.scope import Agent
from codemode.tools.timeout_policy import TOOL_STALLED_EVENT, install_timeout_policy
from tests.runtime.helpers import outer_call

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _slow(name: str, *, timeout_ms: float | None, finished: list[str] | None = None,
          started: list[Any] | None = None) -> Any:
    """Sleeps ``ms``; with ``ignore`` it shields the sleep (ignores cancellation) and then succeeds."""

    async def execute(args: Any, ctx: Any) -> Any:
        if started is not None:
            started.append(ctx)
        seconds = args.get("ms", 0) / 1000
        if args.get("ignore"):
            with anyio.CancelScope(shield=True):
                await anyio.sleep(seconds)
        else:
            await anyio.sleep(seconds)
        if finished is not None:
            finished.append(ctx.call_id)
        return {"slept": args.get("ms", 0)}

    return define_tool(name=name, description=f"{name} test tool",
                       parameters={"ms": {"type": "integer"}, "ignore": {"type": "boolean"}},
                       output=ToolOutput(schema={"type": "object"},
                                         render=lambda a, v: [{"type": "text", "text": "slept"}]),
                       execute=execute, timeout_ms=timeout_ms, is_concurrency_safe=lambda args: True)


async def _until(predicate: Callable[[], bool]) -> None:
    """Poll a condition (every caller bounds it with ``fail_after``)."""
    while not predicate():  # noqa: ASYNC110 - polling test state that has no event
        await anyio.sleep(0.001)


@pytest.fixture
def finished() -> list[str]:
    return []


@pytest.fixture
async def rt(finished: list[str]) -> AsyncIterator[ToolRuntime]:
    async with ToolRuntime() as runtime:
        runtime.register(_slow("budgeted", timeout_ms=30, finished=finished))
        runtime.register(_slow("unbudgeted", timeout_ms=None, finished=finished))
        yield runtime


async def _execute_then_cancel(runtime: ToolRuntime, args: dict[str, Any],
                               when: Callable[[], Awaitable[Any]]) -> Any:
    """Call the ``budgeted`` tool under a caller signal and cancel that signal once ``when()`` returns."""
    source = CancelSource()
    box: list[Any] = []
    async with anyio.create_task_group() as group:
        async def run() -> None:
            box.append(await runtime.execute("budgeted", args, cancel=source.signal))

        group.start_soon(run)
        await when()
        source.cancel("user stop")
    return box[0]


async def test_own_deadline_first_gives_tool_timeout(rt: ToolRuntime) -> None:
    """It replaces the outcome with TOOL_TIMEOUT when its deadline fires first, and stops the body."""
    install_timeout_policy(rt)
    with anyio.fail_after(5):
        start = anyio.current_time()
        result = await rt.execute("budgeted", {"ms": 3000})
        elapsed = anyio.current_time() - start
    assert result.code == "TOOL_TIMEOUT"
    assert result.error is not None and result.error.message == "tool call timed out after 30ms"
    assert result.text == "Error: tool call timed out after 30ms"
    assert elapsed < 1


async def test_timeout_wins_over_a_success_that_ignored_the_deadline(rt: ToolRuntime,
                                                                     finished: list[str]) -> None:
    """It reports TOOL_TIMEOUT even when the body finished successfully after the deadline."""
    install_timeout_policy(rt, grace_ms=2000)
    with anyio.fail_after(5):
        result = await rt.execute("budgeted", {"ms": 80, "ignore": True}, call_id="late")
    assert result.code == "TOOL_TIMEOUT"
    assert finished == ["late"]


async def test_caller_first_stays_aborted() -> None:
    """It keeps the pipeline's ABORTED when the caller cancelled before the deadline."""
    async with ToolRuntime() as runtime:
        runtime.register(_slow("budgeted", timeout_ms=200))
        install_timeout_policy(runtime)
        with anyio.fail_after(5):
            result = await _execute_then_cancel(runtime, {"ms": 3000}, lambda: anyio.sleep(0.02))
            await anyio.sleep(0.25)  # past the deadline: the outcome must not change
    assert result.code == "ABORTED"


async def test_caller_first_stays_aborted_even_if_the_deadline_passes_before_the_body_ends() -> None:
    """It keeps ABORTED when the caller cancelled first and the deadline passed while the body finished."""
    started: list[Any] = []
    async with ToolRuntime() as runtime:
        runtime.register(_slow("budgeted", timeout_ms=150, started=started))
        install_timeout_policy(runtime, grace_ms=5000)
        with anyio.fail_after(5):
            # cancelled well before the 150 ms deadline
            result = await _execute_then_cancel(runtime, {"ms": 400, "ignore": True},
                                                lambda: _until(lambda: bool(started)))
    assert result.code == "ABORTED"


async def test_timer_first_then_caller_keeps_tool_timeout() -> None:
    """It keeps TOOL_TIMEOUT when its deadline fired first and the caller cancelled afterwards."""
    started: list[Any] = []
    runtime = ToolRuntime()
    runtime.register(_slow("budgeted", timeout_ms=30, started=started))
    install_timeout_policy(runtime, grace_ms=5000)
    with anyio.fail_after(5):
        # cancelled once the deadline fired, while the body is still shielded
        result = await _execute_then_cancel(
            runtime, {"ms": 300, "ignore": True},
            lambda: _until(lambda: bool(started) and started[0].cancel.cancelled))
    assert result.code == "TOOL_TIMEOUT"


async def test_tools_without_a_budget_pass_through(rt: ToolRuntime) -> None:
    """It leaves calls of tools without timeout_ms untouched."""
    install_timeout_policy(rt)
    with anyio.fail_after(5):
        result = await rt.execute("unbudgeted", {"ms": 60})
        within = await rt.execute("budgeted", {"ms": 1})
    assert result.value == {"slept": 60}
    assert within.value == {"slept": 1}


async def test_a_stalled_body_is_reported_and_adopted(rt: ToolRuntime, finished: list[str],
                                                      caplog: pytest.LogCaptureFixture) -> None:
    """It settles a body that ignores cancellation past the grace period as TOOL_STALLED, without it."""
    agent = Agent("a")
    async with ToolRuntime() as runtime:
        runtime.register(_slow("budgeted", timeout_ms=20, finished=finished))
        policy = install_timeout_policy(runtime, grace_ms=40)
        with anyio.fail_after(5), caplog.at_level(logging.WARNING, logger="codemode.tools.timeout_policy"):
            start = anyio.current_time()
            result = await runtime.execute("budgeted", {"ms": 1500, "ignore": True}, agent=agent,
                                           call_id="stuck")
            elapsed = anyio.current_time() - start
        assert result.code == "TOOL_STALLED"
        assert result.error is not None
        assert "timed out after 20ms" in result.error.message and "40ms" in result.error.message
        assert elapsed < 1.2  # 20 ms budget + 40 ms grace, far below the 1.5 s body
        assert [call.call_id for call in policy.stalled] == ["stuck"]
        assert finished == []  # still running, owned by the runtime
        events = agent.events.of_type(TOOL_STALLED_EVENT)
        assert len(events) == 1
        assert events[0].data["call_id"] == "stuck" and events[0].data["adopted"] is True
        assert "ignored cancellation" in caplog.text
    assert finished == ["stuck"]  # the runtime awaited the body before it closed
    assert policy.stalled == ()


async def test_without_an_entered_runtime_the_stall_is_reported_but_awaited(finished: list[str]) -> None:
    """It still reports the stall when no task can adopt the body, then waits for the body."""
    agent = Agent("a")
    runtime = ToolRuntime()
    runtime.register(_slow("budgeted", timeout_ms=20, finished=finished))
    install_timeout_policy(runtime, grace_ms=30)
    with anyio.fail_after(5):
        result = await runtime.execute("budgeted", {"ms": 150, "ignore": True}, agent=agent, call_id="slow")
    assert result.code == "TOOL_TIMEOUT"
    assert finished == ["slow"]
    events = agent.events.of_type(TOOL_STALLED_EVENT)
    assert len(events) == 1 and events[0].data["adopted"] is False


async def test_an_upstream_cancel_that_is_ignored_also_stalls(finished: list[str]) -> None:
    """It settles a caller-cancelled call whose body ignores cancellation as TOOL_STALLED."""
    async with ToolRuntime() as runtime:
        runtime.register(_slow("budgeted", timeout_ms=5000, finished=finished))
        install_timeout_policy(runtime, grace_ms=30)
        with anyio.fail_after(5):
            result = await _execute_then_cancel(runtime, {"ms": 800, "ignore": True},
                                                lambda: anyio.sleep(0.02))
        assert result.code == "TOOL_STALLED"
        assert "was cancelled" in result.error.message
    assert len(finished) == 1


async def test_child_calls_time_out_too(rt: ToolRuntime) -> None:
    """It applies to run_code child calls, dispatched through the sub-lane with a parent token."""
    install_timeout_policy(rt)
    agent = Agent("a")
    outer = outer_call(rt, agent)
    with anyio.fail_after(5):
        async with open_sub_lane(rt, outer_call=outer) as lane:
            child = await lane.submit("budgeted", {"ms": 3000})
        direct = await rt.execute("budgeted", {"ms": 3000}, parent=outer.token, call_id="run-1:code:9")
    assert child.code == "TOOL_TIMEOUT"
    assert direct.code == "TOOL_TIMEOUT"
    settled = agent.events.of_type("tool/code-dispatch")
    assert settled[0].data["is_error"] is True
    assert settled[0].data["content"] == [{"type": "text", "text": "Error: tool call timed out after 30ms"}]


async def test_uninstalling_restores_untimed_behaviour(rt: ToolRuntime) -> None:
    """It stops enforcing budgets once the returned policy is called (idempotently)."""
    policy = install_timeout_policy(rt)
    policy()
    policy()
    with anyio.fail_after(5):
        result = await rt.execute("budgeted", {"ms": 60})
    assert result.value == {"slept": 60}


@pytest.mark.parametrize("grace", [0, -1, float("inf"), float("nan"), True, "5"])
async def test_grace_must_be_positive_and_finite(rt: ToolRuntime, grace: Any) -> None:
    """It refuses a grace period that is not a positive finite number."""
    with pytest.raises(ValueError, match="grace_ms must be a positive finite number"):
        install_timeout_policy(rt, grace_ms=grace)


async def test_a_run_code_program_sees_child_timeouts_and_stalls(finished: list[str]) -> None:
    """It times out and stall-settles child calls of a real run_code program, which keeps running."""
    from codemode.tools.run_code import PythonCodeRuntime

    agent = Agent("coder")
    async with PythonCodeRuntime() as code_runtime, \
            ToolRuntime("code", code_runtime=code_runtime) as runtime:
        runtime.register(_slow("budgeted", timeout_ms=30, finished=finished))
        install_timeout_policy(runtime, grace_ms=50)
        program = (
            "out = []\n"
            "for args in ({'ms': 3000}, {'ms': 800, 'ignore': True}, {'ms': 1}):\n"
            "    try:\n"
            "        await tools.budgeted(args)\n"
            "        out.append('ok')\n"
            "    except ToolCallError as error:\n"
            "        out.append(error.code)\n"
            "return out\n")
        with anyio.fail_after(20):
            result = await runtime.execute("run_code", {"code": program, "description": "probe budgets"},
                                           agent=agent, call_id="run")
        assert result.value["result"] == ["TOOL_TIMEOUT", "TOOL_STALLED", "ok"]
        stalled = agent.events.of_type(TOOL_STALLED_EVENT)
        assert [e.data["call_id"] for e in stalled] == ["run:code:2"]
    assert "run:code:2" in finished  # the runtime awaited the stalled body before closing


async def test_an_adopted_body_torn_down_with_the_runtime_reads_as_aborted() -> None:
    """It reports ABORTED, not a crash, when the runtime's task group is torn down under the body."""
    started: list[Any] = []
    box: list[Any] = []
    with anyio.fail_after(5):
        async with anyio.create_task_group() as outer:
            with pytest.raises((RuntimeError, ExceptionGroup)):
                async with ToolRuntime() as runtime:
                    runtime.register(_slow("budgeted", timeout_ms=5000, started=started))
                    install_timeout_policy(runtime)

                    async def call() -> None:
                        box.append(await runtime.execute("budgeted", {"ms": 3000}))

                    outer.start_soon(call)
                    await _until(lambda: bool(started))
                    raise RuntimeError("the host failed")
    assert box[0].code == "ABORTED"
    assert box[0].error.message == "tool call aborted: the runtime closed while it was running"


async def test_an_unenforced_timeout_is_reported_once_per_tool(caplog: pytest.LogCaptureFixture) -> None:
    """A tool with ``timeout_ms`` run by a runtime without the timeout policy logs one warning naming
    the fix; with the policy installed nothing is logged, and after it is uninstalled the warning comes."""
    bare = ToolRuntime()
    bare.register(_slow("slow", timeout_ms=1000))
    bare.register(_slow("plain", timeout_ms=None))
    with caplog.at_level(logging.WARNING, logger="runtime"):
        for _ in range(3):
            assert not (await bare.execute("slow", {})).is_error
        await bare.execute("plain", {})
    warnings = [record.getMessage() for record in caplog.records]
    assert len(warnings) == 1 and 'tool "slow" declares timeout_ms=1000' in warnings[0]
    assert "install_timeout_policy" in warnings[0]
    caplog.clear()
    enforced = ToolRuntime()
    enforced.register(_slow("slow", timeout_ms=1000))
    uninstall = install_timeout_policy(enforced)
    with caplog.at_level(logging.WARNING, logger="runtime"):
        await enforced.execute("slow", {})
        assert caplog.records == []
        uninstall()
        await enforced.execute("slow", {})
    assert len(caplog.records) == 1
