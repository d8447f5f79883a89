"""Benchmark: what the ordered lane costs per call, for a batch of no-op concurrency-safe tool calls.

Run: ``python bench/scheduler_overhead.py [--calls 1000] [--repeat 7]``. Every number comes from the same
process and the same run: CPU time, best of ``--repeat`` interleaved rounds:

* ``body``: awaiting the tool body directly, once per call (the floor: no pipeline, no scheduling);
* ``pipeline``: ``rt.execute`` once per call, sequentially (the five stages, no scheduler);
* ``turn``: one ``execute_tool_calls`` batch of all calls (the lane: classification, ordered starts and
  commits, the rolling pool of ``max_parallel_tool_calls`` workers) for an agent, so including the
  ``tool/call``/``tool/result`` events appended to its log;
* ``turn_no_log``: the same batch without an agent (scheduling only, no event log);
* ``sub-lane``: the same calls submitted concurrently through one ``open_sub_lane``, one task per
  program call as the sandbox host does;
* ``spawn``: spawning those per-call tasks around a no-op (the program side's cost, not the lane's),
  subtracted in ``sub-lane (own)``.

Reported ratios: ``turn / pipeline`` is the scheduler's own overhead on top of the pipeline it drives
(target <= 5x); ``turn / body`` is the whole cost relative to calling the bodies directly.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio

from codemode.runtime._runtime import ToolRuntime
from codemode.runtime.definitions import ToolOutput, define_tool
from codemode.runtime.scheduler import ToolCallRequest, execute_tool_calls, open_sub_lane
from codemode.runtime.scope import Agent


async def _noop(args: Any, ctx: Any) -> dict[str, Any]:
    return {}


def _definition() -> Any:
    return define_tool(name="noop", description="does nothing", parameters={},
                       output=ToolOutput(schema={"type": "object"}, render=lambda a, v: []),
                       execute=_noop, is_concurrency_safe=lambda args: True)


@dataclass(frozen=True)
class _Outer:
    call_id: str
    root_call_id: str
    agent: Any
    token: Any


async def _best(repeat: int, runs: dict[str, Callable[[], Awaitable[None]]]) -> dict[str, float]:
    """Best CPU time of each run, interleaved so that load from other processes hits all of them alike.

    CPU time of this (single-threaded, event-loop) process is the work done; wall time on a shared
    machine also counts time spent waiting for a CPU.
    """
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(repeat):
        for name, run in runs.items():
            start = time.process_time()
            await run()
            best[name] = min(best[name], time.process_time() - start)
    return best


async def measure(calls: int, repeat: int) -> dict[str, float]:
    """Per-call seconds of each way of running ``calls`` no-op calls, plus the ratios."""
    async with ToolRuntime() as rt:
        rt.register(_definition())
        requests = [ToolCallRequest(f"c{i}", "noop", "{}") for i in range(calls)]

        async def body() -> None:
            for _ in range(calls):
                await _noop({}, None)

        async def pipeline() -> None:
            for i in range(calls):
                await rt.execute("noop", {}, call_id=f"p{i}")

        async def turn() -> None:
            results = await execute_tool_calls(rt, requests, agent=Agent("bench"))
            assert not any(r.is_error for r in results)

        async def turn_no_log() -> None:
            results = await execute_tool_calls(rt, requests)
            assert not any(r.is_error for r in results)

        async def sub_lane() -> None:
            outer = rt.stages.create("run_code", {}, call_id="run")
            async with open_sub_lane(rt, outer_call=_Outer("run", "run", None, outer.token)) as lane, \
                    anyio.create_task_group() as group:
                for _ in range(calls):
                    group.start_soon(lane.submit, "noop", {})

        async def _nothing(name: str, args: Any) -> None:
            return None

        async def spawn() -> None:
            async with anyio.create_task_group() as group:
                for _ in range(calls):
                    group.start_soon(_nothing, "noop", {})

        await turn()  # warm up
        best = await _best(repeat, {"body": body, "pipeline": pipeline, "turn": turn,
                                    "turn_no_log": turn_no_log, "sub_lane": sub_lane, "spawn": spawn})
        seconds = {name: value / calls for name, value in best.items()}
    seconds["turn_over_pipeline"] = seconds["turn"] / seconds["pipeline"]
    seconds["turn_no_log_over_pipeline"] = seconds["turn_no_log"] / seconds["pipeline"]
    seconds["sub_lane_own"] = seconds["sub_lane"] - seconds["spawn"]
    seconds["sub_lane_own_over_pipeline"] = seconds["sub_lane_own"] / seconds["pipeline"]
    seconds["turn_over_body"] = seconds["turn"] / seconds["body"]
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    options = parser.parse_args()
    found = anyio.run(measure, options.calls, options.repeat)
    if options.json:
        print(json.dumps(found))
        return
    for name in ("body", "pipeline", "turn", "turn_no_log", "sub_lane", "spawn", "sub_lane_own"):
        print(f"{name:>12}: {found[name] * 1e6:9.2f} us/call")
    print(f"turn / pipeline     = {found['turn_over_pipeline']:.2f}x (target <= 5x)")
    print(f"turn (no log) / pipeline = {found['turn_no_log_over_pipeline']:.2f}x")
    print(f"sub-lane (own) / pipeline = {found['sub_lane_own_over_pipeline']:.2f}x")
    print(f"turn / body         = {found['turn_over_body']:.1f}x")


if __name__ == "__main__":
    main()
