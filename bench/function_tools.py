"""Benchmark: what ``@tool`` adds per call over a hand-written ``define_tool`` body.

Run: ``python bench/function_tools.py [--calls 2000] [--repeat 7]``. Each cell is ``rt.execute`` once per
call, sequentially (the five stages, no scheduler), best wall time of ``--repeat`` interleaved rounds,
in microseconds per call:

* ``define_tool``: an async body taking ``(args, ctx)`` and returning ``{"sum": a + b}`` (the floor);
* ``@tool async``: the same sum from ``async def add(a: int, b: int) -> int`` (argument conversion with
  pydantic, the return value dumped to JSON);
* ``@tool async model``: a pydantic model parameter and a model return value;
* ``@tool sync``: ``def add(a: int, b: int) -> int``, which runs in a worker thread
  (``anyio.to_thread.run_sync``): the thread hand-off is the price of never blocking the event loop.

Wall time, not CPU time: the sync cell's work happens partly in another thread.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from pydantic import BaseModel

from codemode.runtime import ToolOutput, ToolRuntime, define_tool, tool


class Pair(BaseModel):
    a: int
    b: int


class Total(BaseModel):
    sum: int


async def _hand_written(args: Any, ctx: Any) -> dict[str, int]:
    return {"sum": args["a"] + args["b"]}


@tool
async def add_async(a: int, b: int) -> int:
    return a + b


@tool
async def add_model(pair: Pair) -> Total:
    return Total(sum=pair.a + pair.b)


@tool
def add_sync(a: int, b: int) -> int:
    return a + b


def _runtime() -> ToolRuntime:
    rt = ToolRuntime()
    rt.register(define_tool(
        name="add_define_tool", description="add", parameters={
            "a": {"type": "integer", "required": True}, "b": {"type": "integer", "required": True}},
        output=ToolOutput(schema={"type": "object"}, render=lambda args, value: []), execute=_hand_written))
    for definition in (add_async, add_model, add_sync):
        rt.register(definition)
    return rt


async def _per_call(rt: ToolRuntime, name: str, args: dict[str, Any], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        result = await rt.execute(name, args)
        assert not result.is_error, result
    return (time.perf_counter() - start) / calls * 1e6


async def main(calls: int, repeat: int) -> dict[str, float]:
    rt = _runtime()
    cells: dict[str, tuple[str, dict[str, Any]]] = {
        "define_tool": ("add_define_tool", {"a": 1, "b": 2}),
        "@tool async": ("add_async", {"a": 1, "b": 2}),
        "@tool async model": ("add_model", {"pair": {"a": 1, "b": 2}}),
        "@tool sync": ("add_sync", {"a": 1, "b": 2}),
    }
    best: dict[str, float] = {}
    runs: dict[str, Callable[[], Awaitable[float]]] = {
        label: (lambda name=name, args=args: _per_call(rt, name, args, calls))
        for label, (name, args) in cells.items()}
    for label in runs:  # warm up (the thread pool, pydantic's validators)
        await _per_call(rt, cells[label][0], cells[label][1], 50)
    for _ in range(repeat):
        for label, run in runs.items():
            value = await run()
            best[label] = min(best.get(label, value), value)
    return {label: round(value, 1) for label, value in best.items()}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=7)
    options = parser.parse_args()
    print(json.dumps(anyio.run(main, options.calls, options.repeat), indent=2))
