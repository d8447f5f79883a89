"""The node side of RaySandbox without Ray: ``NodeSandbox``'s relay protocol driven directly, in process.

The actor class imports nothing from Ray, so its events, replies, abandonments, cancellations (also one
that overtakes its run) and its forgetting of runs the host gave up on are checked here at local speed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from codemode.sandbox import RunResult, SandboxLimits
from codemode.sandbox._ray_node import Event, NodeSandbox

pytestmark = pytest.mark.anyio

LIMITS = SandboxLimits(wall_seconds=20.0).as_dict()


@pytest.fixture(scope="module")
async def node() -> AsyncIterator[NodeSandbox]:
    actor = NodeSandbox({"warm": 1, "max_workers": 4})
    info = await actor.start()
    assert type(info["pid"]) is int
    try:
        yield actor
    finally:
        await actor.stop()


async def _until_done(node: NodeSandbox, run_id: str, events: list[Event],
                      answer: Any = None) -> tuple[RunResult, list[Event]]:
    """Serve the run's calls with ``answer(name, args)`` until its result; returns it and every event."""
    seen: list[Event] = []
    while True:
        replies = []
        for event in events:
            seen.append(event)
            if event[0] == "done":
                return event[1], seen
            if event[0] == "call" and answer is not None:
                replies.append((event[1], True, answer(event[2], event[3]), ""))
        events = await node.exchange(run_id, replies, 5.0)


async def test_a_run_relays_its_logs_and_calls_in_order(node: NodeSandbox) -> None:
    """It sends each log and call as an event, takes replies and ends with the run's result."""
    program = "print('a')\nx = await tools.twice({'n': 4})\nprint('b')\nreturn x"
    with anyio.fail_after(30):
        first = await node.run("r1", program, ["twice"], LIMITS, None, 5.0)
        result, seen = await _until_done(node, "r1", first, lambda name, args: {"n": args["n"] * 2})
    assert result.value == {"n": 8} and result.logs == ("a", "b")
    assert [event[0] for event in seen] == ["log", "call", "log", "done"]
    assert seen[1][2:] == ("twice", {"n": 4})
    assert await node.exchange("r1", [], 0.0) == [("gone",)]  # (a finished run is forgotten)


async def test_a_failed_reply_is_the_programs_tool_call_error(node: NodeSandbox) -> None:
    """It raises the host's failure (message and code) in the program as ToolCallError."""
    program = "try:\n    await tools.t({})\nexcept ToolCallError as err:\n    return [err.code, str(err)]"
    with anyio.fail_after(30):
        events = await node.run("r2", program, ["t"], LIMITS, None, 5.0)
        while not any(event[0] == "call" for event in events):
            events = await node.exchange("r2", [], 5.0)
        call_id = next(event[1] for event in events if event[0] == "call")
        events = await node.exchange("r2", [(call_id, False, "no", "DENIED")], 5.0)
        result, _ = await _until_done(node, "r2", events)
    assert result.value == ["DENIED", "no"]


async def test_an_abandoned_call_is_reported(node: NodeSandbox) -> None:
    """It tells the host when the program stops waiting for a call."""
    program = ("import asyncio\ntry:\n    await asyncio.wait_for(tools.slow({}), 0.2)\n"
               "except asyncio.TimeoutError:\n    return 'gave up'")
    with anyio.fail_after(30):
        events = await node.run("r3", program, ["slow"], LIMITS, None, 5.0)
        result, seen = await _until_done(node, "r3", events)
    assert result.value == "gave up"
    assert [event[0] for event in seen] == ["call", "abandon", "done"]


async def test_a_cancellation_that_overtakes_its_run_still_aborts_it(node: NodeSandbox) -> None:
    """It keeps a cancellation for a run it has not seen yet, and a run the host gave up on is dropped."""
    with anyio.fail_after(30):
        await node.cancel("r4", True)
        events = await node.run("r4", "await tools.slow({})", ["slow"], LIMITS, None, 5.0)
    assert events[-1][0] == "done" and events[-1][1].error.kind == "aborted"
    assert await node.exchange("r4", [], 0.0) == [("gone",)]


async def test_a_cancelled_run_in_flight_ends_aborted(node: NodeSandbox) -> None:
    """It kills the worker of a run cancelled while it waits for a call, and reports ``aborted``."""
    with anyio.fail_after(30):
        events = await node.run("r5", "print('x')\nawait tools.slow({})", ["slow"], LIMITS, None, 5.0)
        while not any(event[0] == "call" for event in events):
            events += await node.exchange("r5", [], 5.0)
        await node.cancel("r5")
        result, _ = await _until_done(node, "r5", await node.exchange("r5", [], 5.0))
    assert result.error is not None and result.error.kind == "aborted" and result.logs == ("x",)
