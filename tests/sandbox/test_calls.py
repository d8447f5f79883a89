"""Cooperative call handlers: never cancelled by the sandbox, told by a CallAbandonment instead."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator

import anyio
import pytest

from codemode.sandbox import (
    CallAbandonment,
    CooperativeCallTool,
    RunResult,
    Sandbox,
    SandboxLimits,
    SandboxUsageError,
    ToolCallFailure,
)
from codemode.sandbox.lossless import JsonValue
from tests.sandbox._support import STANDIN, pid_alive

pytestmark = pytest.mark.anyio

LIMITS = SandboxLimits(wall_seconds=5.0, cpu_seconds=3.0)


@pytest.fixture(scope="module")
async def sandbox() -> AsyncIterator[Sandbox]:
    async with Sandbox(warm=1) as box:
        yield box


# --- the abandonment itself ------------------------------------------------------------------


def test_an_abandonment_is_unshielded_unless_its_maker_says_so() -> None:
    """``shielded`` is a promise of whoever makes the abandonment; by default nobody promises it."""
    assert CallAbandonment().shielded is False
    assert CallAbandonment(shielded=True).shielded is True


def test_an_abandonment_fires_once_with_its_first_reason() -> None:
    """Callbacks run once with the first reason; a late subscriber is called at once."""
    abandonment = CallAbandonment()
    seen: list[str] = []
    abandonment.on_abandon(seen.append)
    assert not abandonment.abandoned and abandonment.reason is None
    abandonment.abandon("first")
    abandonment.abandon("second")
    late: list[str] = []
    abandonment.on_abandon(late.append)
    assert (abandonment.abandoned, abandonment.reason, seen, late) == (True, "first", ["first"], ["first"])


def test_an_abandonment_survives_a_failing_callback_and_honours_disposers() -> None:
    """A raising callback does not stop the others; a disposed one is not called."""
    abandonment = CallAbandonment()
    seen: list[str] = []

    def broken(reason: str) -> None:
        raise RuntimeError("observer bug")

    abandonment.on_abandon(broken)
    dispose = abandonment.on_abandon(lambda reason: seen.append("disposed"))
    abandonment.on_abandon(seen.append)
    dispose()
    dispose()  # (idempotent)
    abandonment.abandon("gone")
    assert seen == ["gone"]


# --- serving calls cooperatively -------------------------------------------------------------


async def _until_abandoned(abandonment: CallAbandonment, reasons: list[str] | None = None) -> None:
    """Wait (bounded) until the call is abandoned, recording why."""
    gone = anyio.Event()

    def told(reason: str) -> None:
        if reasons is not None:
            reasons.append(reason)
        gone.set()

    abandonment.on_abandon(told)
    with anyio.fail_after(10):
        await gone.wait()


async def _serve(box: Sandbox, program: str, names: tuple[str, ...], handler: object,
                 limits: SandboxLimits = LIMITS) -> RunResult:
    with anyio.fail_after(15):
        return await box.run(program, tool_names=names, call_tool=CooperativeCallTool(handler),  # type: ignore[arg-type]
                             limits=limits)


async def test_a_cooperative_handler_serves_values_and_failures(sandbox: Sandbox) -> None:
    """Values come back as with a plain handler; ToolCallFailure keeps its code; no abandonment fires.

    The handler runs shielded, and its abandonment says so (a sub-lane then skips a shield of its own).
    """
    seen: list[bool] = []

    async def handler(name: str, args: JsonValue, abandonment: CallAbandonment) -> JsonValue:
        assert abandonment.shielded and anyio.current_effective_deadline() == math.inf
        seen.append(abandonment.abandoned)
        if name == "fail":
            raise ToolCallFailure("refused on purpose", "E_PURPOSE")
        return {"echo": args}

    program = ("a = await tools.echo(x=1)\n"
               "try:\n    await tools.fail()\nexcept ToolCallError as err:\n    b = err.code\n"
               "return [a, b]")
    result = await _serve(sandbox, program, ("echo", "fail"), handler)
    assert result.error is None, result.error
    assert result.value == [{"echo": {"x": 1}}, "E_PURPOSE"] and seen == [False, False]


async def test_a_call_the_program_gives_up_is_abandoned_not_cancelled(sandbox: Sandbox) -> None:
    """``wait_for`` giving up fires the abandonment; the handler finishes on its own; the run goes on."""
    reasons: list[str] = []
    finished: list[str] = []

    async def handler(name: str, args: JsonValue, abandonment: CallAbandonment) -> JsonValue:
        if name == "slow":
            await _until_abandoned(abandonment, reasons)
            await anyio.sleep(0.05)  # not cancelled: it may still clean up
            finished.append("slow")
            return "too late"
        return "fast"

    program = ("import asyncio\n"
               "try:\n    await asyncio.wait_for(tools.slow(), timeout=0.1)\n"
               "except asyncio.TimeoutError:\n    pass\n"
               "return await tools.fast()")
    result = await _serve(sandbox, program, ("slow", "fast"), handler)
    assert result.error is None, result.error
    assert result.value == "fast"
    assert reasons == ["the program stopped waiting for the call"] and finished == ["slow"]


async def test_calls_in_flight_when_the_run_ends_are_abandoned_and_awaited(sandbox: Sandbox) -> None:
    """A program that returns while a call runs: the call is told, and the run waits for it to settle."""
    reasons: list[str] = []
    settled: list[bool] = []

    async def handler(name: str, args: JsonValue, abandonment: CallAbandonment) -> JsonValue:
        if name == "fast":
            return "first"
        await _until_abandoned(abandonment, reasons)
        settled.append(True)
        return None

    program = ("import asyncio\n"
               "for next_done in asyncio.as_completed([tools.hang(), tools.fast()]):\n"
               "    return await next_done")
    result = await _serve(sandbox, program, ("hang", "fast"), handler)
    assert result.error is None, result.error
    # (the worker cancels the leftover call as the program ends, or the run's end abandons it)
    assert result.value == "first" and settled == [True]
    assert reasons in (["the run is over"], ["the program stopped waiting for the call"])


async def test_at_the_deadline_the_worker_dies_before_a_cooperative_call_settles() -> None:
    """The wall clock kills the worker first, then abandons the call, then waits for it."""
    pids: list[int] = []
    alive_when_told: list[bool] = []

    async def handler(name: str, args: JsonValue, abandonment: CallAbandonment) -> JsonValue:
        assert isinstance(args, dict)
        pids.append(int(args["pid"]))
        await _until_abandoned(abandonment)
        for _ in range(150):  # (the template kills the group asynchronously)
            if not pid_alive(pids[0]):
                break
            await anyio.sleep(0.02)
        alive_when_told.append(pid_alive(pids[0]))
        return None

    program = "from codemode.sandbox.worker import host_pid\nawait tools.hold(pid=host_pid())\nreturn 'never'"
    limits = SandboxLimits(wall_seconds=1.0, cpu_seconds=3.0)
    async with Sandbox(executor=STANDIN, warm=1) as standin:  # (plain CPython: it may import os)
        result = await _serve(standin, program, ("hold",), handler, limits)
    assert result.error is not None and result.error.kind == "timeout"
    assert alive_when_told == [False]


async def test_a_cooperative_tool_needs_a_callable_handler(sandbox: Sandbox) -> None:
    """It refuses a wrapper around something that cannot be called."""
    with pytest.raises(SandboxUsageError, match="CooperativeCallTool"):
        await sandbox.run("return 1", tool_names=(), call_tool=CooperativeCallTool(42))  # type: ignore[arg-type]
