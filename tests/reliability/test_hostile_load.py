"""Hostile load: 20 agents run ordinary programs while 5 hostile ones attack beside them.

The same runtime first serves the 20 ordinary agents alone (the unloaded baseline), then again while
five hostile agents loop their attacks until the ordinary agents are done: a catastrophic regular
expression, descriptor exhaustion (paths 19,000 levels deep, deep and wide trees listed), a log flood, a
memory bomb (in the worker, and 8 MiB tool arguments on the host) and lone surrogates on every way out
of a program. Every ordinary run must be exactly right, the loaded p99 latency within 3x of the
unloaded one, every attack refused with its own error, and after the runtime closes no descriptor,
process or worker directory may be left.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from codemode.runtime import Agent, ToolRuntime
from codemode.runtime.scheduler import ToolCallRequest
from codemode.sandbox import SandboxLimits
from codemode.tools.demo import demo_tools
from codemode.tools.run_code import PythonCodeRuntime
from codemode.tools.workspace import WorkspaceLimits, workspace_tools
from tests.reliability._support import Resources, settled_leaks

pytestmark = pytest.mark.anyio

AGENTS = 20
TURNS = 5
#: The acceptance bar: loaded p99 over unloaded p99.
MAX_RATIO = 3.0
_LIMITS = SandboxLimits(wall_seconds=8.0, cpu_seconds=4.0)

_ORDINARY = """
import asyncio
first = await tools.add(a={agent}, b={turn})
echoed, three = await asyncio.gather(tools.echo(text="agent-{agent}"), tools.add(a=1, b=2))
found = await tools.grep(pattern="needle", dir="notes")
print("turn", {turn})
return {{"agent": {agent}, "turn": {turn}, "sum": first["sum"], "echo": echoed["text"],
        "three": three["sum"], "found": len(found["matches"])}}
"""

#: Each hostile agent cycles through its programs; each entry is (program, check of the outcome).
_HOSTILE: dict[str, list[tuple[str, Callable[[Any], bool]]]] = {
    "catastrophic-regex": [
        ('await tools.write_text(path="evil.txt", text="a" * 29 + "!\\n")\n'
         'return await tools.grep(pattern="(a+)+$", dir="evil.txt")',
         lambda r: not r.is_error and r.value["result"]["matches"] == []),
        ('return await tools.grep(pattern="(\\\\w+\\\\s?){200}$")',
         lambda r: not r.is_error and r.value["result"]["matches"] == []),
    ],
    "descriptor-exhaustion": [
        ('return await tools.write_text(path="d/" * 19000 + "f.txt", text="x")',
         lambda r: r.is_error and "max_path_chars" in r.error.message),
        ('p = "/".join(["deep"] * 31) + "/f.txt"\nawait tools.write_text(path=p, text="x")\n'
         'return len((await tools.list_files())["files"])',
         lambda r: not r.is_error),
        ('for i in range(40):\n    await tools.write_text(path=f"wide/{i}/f.txt", text="x")\n'
         'return len((await tools.list_files(dir="wide"))["files"])',
         lambda r: not r.is_error and r.value["result"] == 40),
    ],
    "log-flood": [
        ('for _ in range(60):\n    print("y" * 100_000)',
         lambda r: not r.is_error and "truncated" in r.value["logs"][-1]),
    ],
    "memory-bomb": [
        ("blocks = [bytearray(1 << 20) for _ in range(2000)]",
         lambda r: r.is_error and "memory-limit" in r.error.message),
        ('return await tools.echo(text="m" * (8 << 20))',
         lambda r: r.is_error and "output-limit" in r.error.message),
    ],
    "lone-surrogates": [
        ('return "\\ud800"', lambda r: r.is_error and "lone surrogate" in r.error.message),
        ("print(chr(0xdc80))", lambda r: r.is_error and "UnicodeEncodeError" in r.error.message),
        ("await tools.echo(text=chr(0xd800))", lambda r: r.is_error and "lone surrogate" in r.error.message),
        ("raise ValueError(chr(0xdfff))", lambda r: r.is_error and "\\udfff" in r.error.message),
    ],
}


def _expected(agent: int, turn: int) -> dict[str, Any]:
    return {"logs": [f"turn {turn}"], "result": {"agent": agent, "turn": turn, "sum": agent + turn,
                                                  "echo": f"agent-{agent}", "three": 3, "found": 3}}


async def _call(rt: ToolRuntime, agent: Agent, call_id: str, code: str) -> Any:
    request = ToolCallRequest(call_id, "run_code", json.dumps({"code": code, "description": "load"}))
    (result,) = await rt.execute_tool_calls([request], agent=agent)
    return result


async def _ordinary(rt: ToolRuntime, phase: str, index: int, latencies: list[float],
                    failures: list[str]) -> None:
    agent = Agent(f"{phase}-{index}")
    for turn in range(TURNS):
        started = time.perf_counter()
        result = await _call(rt, agent, f"{phase}-{index}-{turn}", _ORDINARY.format(agent=index, turn=turn))
        latencies.append(time.perf_counter() - started)
        if result.is_error or result.value != _expected(index, turn):
            failures.append(f"{phase} agent {index} turn {turn}: {result.error or result.value}")


async def _hostile(rt: ToolRuntime, name: str, stop: anyio.Event, counts: dict[str, int],
                   failures: list[str]) -> None:
    agent = Agent(f"hostile-{name}")
    programs = _HOSTILE[name]
    turn = 0
    while not stop.is_set():
        program, check = programs[turn % len(programs)]
        result = await _call(rt, agent, f"{name}-{turn}", program)
        if not check(result):
            failures.append(f"{name} #{turn}: unexpected {result.error or result.value}")
        counts[name] = counts.get(name, 0) + 1
        turn += 1
        await anyio.sleep(0.01)


def _p99(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=100, method="inclusive")[98]


async def test_ordinary_agents_are_unharmed_by_hostile_ones(tmp_path: Path) -> None:
    """20 ordinary agents: all right, loaded p99 within 3x of unloaded, attacks refused, nothing leaked."""
    notes = tmp_path / "notes"
    notes.mkdir()
    for index in range(3):
        (notes / f"n{index}.txt").write_text(f"a needle in note {index}\n")
    before = Resources.now()
    unloaded: list[float] = []
    loaded: list[float] = []
    failures: list[str] = []
    counts: dict[str, int] = {}
    with anyio.fail_after(55):
        async with PythonCodeRuntime(limits=_LIMITS) as code_runtime, \
                ToolRuntime("code", code_runtime=code_runtime) as rt:
            for definition in [*demo_tools(), *workspace_tools(tmp_path, limits=WorkspaceLimits(
                    max_workspace_bytes=32 << 20, max_grep_seconds=2.0))]:
                rt.register(definition)
            template = code_runtime.sandbox.template_pid
            assert template is not None
            await _call(rt, Agent("warm-up"), "warm-up", "return 1")
            async with anyio.create_task_group() as group:
                for index in range(AGENTS):
                    group.start_soon(_ordinary, rt, "unloaded", index, unloaded, failures)
            stop = anyio.Event()
            async with anyio.create_task_group() as hostile:
                for name in _HOSTILE:
                    hostile.start_soon(_hostile, rt, name, stop, counts, failures)
                async with anyio.create_task_group() as group:
                    for index in range(AGENTS):
                        group.start_soon(_ordinary, rt, "loaded", index, loaded, failures)
                stop.set()
        leaks = await settled_leaks(before, [template])
    ratio = _p99(loaded) / _p99(unloaded)
    print(f"\nhostile load: {len(loaded)} ordinary runs beside {sum(counts.values())} hostile ones "
          f"({counts}); p99 unloaded {_p99(unloaded) * 1000:.0f} ms, loaded {_p99(loaded) * 1000:.0f} ms "
          f"(x{ratio:.2f}); median {statistics.median(unloaded) * 1000:.0f} -> "
          f"{statistics.median(loaded) * 1000:.0f} ms")
    assert failures == []
    assert len(unloaded) == len(loaded) == AGENTS * TURNS
    assert all(counts.get(name, 0) >= 1 for name in _HOSTILE), counts
    assert ratio <= MAX_RATIO, f"loaded p99 is {ratio:.2f}x the unloaded p99"
    assert leaks == {}
