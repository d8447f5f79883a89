"""Every budget in pairs: a program that trips it and one that stays within, under the real sandbox.

The host survives each and reports the failure kind with a message naming the budget.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from codemode.sandbox import Sandbox, SandboxLimits
from codemode.sandbox.lossless import JsonValue
from codemode.sandbox.protocol import LOG_TRUNCATION_MARKER
from tests.sandbox._support import Cancel, run

pytestmark = pytest.mark.anyio

#: A generous wall clock so that CPU and memory budgets trip first even on a loaded machine.
CPU = SandboxLimits(wall_seconds=15.0, cpu_seconds=0.5)
WALL = SandboxLimits(wall_seconds=1.0, cpu_seconds=5.0)
MEMORY = SandboxLimits(wall_seconds=15.0, cpu_seconds=5.0, memory_bytes=192 * 1024 * 1024)
LOGS = SandboxLimits(wall_seconds=15.0, cpu_seconds=5.0, log_bytes=1000)
RESULT = SandboxLimits(wall_seconds=15.0, cpu_seconds=5.0, result_bytes=10_000)
CALLS = SandboxLimits(wall_seconds=15.0, cpu_seconds=5.0, max_tool_calls=5)

NEST = "v = 1\nfor i in range({n}):\n    v = [v]\nreturn v"


@pytest.fixture(scope="module")
async def sandbox() -> AsyncIterator[Sandbox]:
    async with Sandbox(warm=2) as box:
        yield box


TRIPS = [
    ("wall-sleep", "import asyncio\nawait asyncio.sleep(30)", WALL, "timeout", "1 s (wall_seconds)"),
    ("cpu-loop", "while True:\n    pass", CPU, "cpu-limit", "0.5 s (cpu_seconds)"),
    ("cpu-in-builtin", "return sum(range(10**12))", CPU, "cpu-limit", "cpu_seconds"),
    ("huge-power", "return 10**10**8", CPU, "cpu-limit", "cpu_seconds"),
    ("catastrophic-regex", "import re\nreturn bool(re.match('(a+)+$', 'a' * 40 + 'b'))", CPU, "cpu-limit",
     "cpu_seconds"),
    ("huge-string", "x = 'a' * 10**11", MEMORY, "memory-limit", "MemoryError"),
    ("memory-growth", "x = []\nwhile True:\n    x.append('a' * 10**6)", MEMORY, "memory-limit",
     "MemoryError"),
    ("huge-result", "return 'x' * 20_000", RESULT, "output-limit", "10000 bytes (result_bytes)"),
    ("deep-result", NEST.format(n=1000), RESULT, "invalid-output", "deeper than"),
    ("lossy-result", "return {'x': float('nan')}", RESULT, "invalid-output", "not lossless JSON"),
    ("too-many-calls", "for i in range(6):\n    await tools.echo({'i': i})", CALLS, "call-limit",
     "more than 5 tool calls"),
    ("deep-recursion", "def f(n):\n    return f(n + 1)\nf(0)", CPU, "exception", "RecursionError"),
]

WITHIN = [
    ("wall-sleep", "import asyncio\nawait asyncio.sleep(0.05)\nreturn 1", WALL, 1),
    ("cpu-loop", "x = 0\nfor i in range(10_000):\n    x += i\nreturn x", CPU, 49_995_000),
    ("cpu-in-builtin", "return sum(range(10**5))", CPU, 4_999_950_000),
    ("huge-power", "return len(str(10**1000))", CPU, 1001),
    ("catastrophic-regex", "import re\nreturn bool(re.match('(a+)+$', 'a' * 12 + 'b'))", CPU, False),
    ("huge-string", "return len('a' * 10**6)", MEMORY, 10**6),
    ("memory-growth", "x = []\nfor i in range(20):\n    x.append('a' * 10**6)\nreturn len(x)", MEMORY, 20),
    ("huge-result", "return 'x' * 9_000", RESULT, "x" * 9_000),
    ("deep-result", NEST.format(n=3), RESULT, [[[1]]]),
    ("too-many-calls", "for i in range(5):\n    await tools.echo({'i': i})\nreturn 5", CALLS, 5),
    ("deep-recursion", "def f(n):\n    return n if n == 0 else f(n - 1)\nreturn f(100)", CPU, 0),
]


@pytest.mark.parametrize(("program", "limits", "kind", "needle"), [t[1:] for t in TRIPS],
                         ids=[t[0] for t in TRIPS])
async def test_a_program_over_a_budget_trips_it(sandbox: Sandbox, program: str, limits: SandboxLimits,
                                                kind: str, needle: str) -> None:
    """It ends the run with the budget's failure kind and a message naming the budget."""
    with anyio.fail_after(30):
        result = await run(sandbox, program, limits=limits)
    assert result.error is not None, result
    assert result.error.kind == kind, result.error
    assert needle in result.error.message
    assert not result.has_value and result.value is None


@pytest.mark.parametrize(("program", "limits", "expected"), [w[1:] for w in WITHIN],
                         ids=[w[0] for w in WITHIN])
async def test_a_program_within_a_budget_completes(sandbox: Sandbox, program: str, limits: SandboxLimits,
                                                   expected: Any) -> None:
    """It completes the same kind of work when it fits the budget."""
    with anyio.fail_after(30):
        result = await run(sandbox, program, limits=limits)
    assert result.error is None, result.error
    assert result.value == expected


async def test_a_log_flood_is_cut_at_the_budget_with_one_marker(sandbox: Sandbox) -> None:
    """It keeps logs up to the budget, then exactly one truncation marker, and the run completes."""
    with anyio.fail_after(30):
        result = await run(sandbox, "for i in range(100_000):\n    print('line', i)\nreturn 'done'",
                           limits=LOGS)
    assert result.ok and result.value == "done"
    marker = LOG_TRUNCATION_MARKER.format(limit=1000)
    assert result.logs[-1] == marker and result.logs.count(marker) == 1
    assert sum(len(entry.encode()) for entry in result.logs[:-1]) <= 1000
    assert result.logs[0] == "line 0"


async def test_logs_within_the_budget_have_no_marker(sandbox: Sandbox) -> None:
    """It keeps every entry and adds no marker when the logs fit."""
    with anyio.fail_after(30):
        result = await run(sandbox, "for i in range(10):\n    print('line', i)", limits=LOGS)
    assert result.ok and result.logs == tuple(f"line {i}" for i in range(10))


async def test_output_before_a_kill_is_kept(sandbox: Sandbox) -> None:
    """It keeps the logs that arrived before the worker was killed for its CPU budget."""
    with anyio.fail_after(30):
        result = await run(sandbox, "print('first')\nprint('second')\nwhile True:\n    pass", limits=CPU)
    assert result.error is not None and result.error.kind == "cpu-limit"
    assert result.logs == ("first", "second")


async def test_a_program_that_ignores_cancellation_is_killed(sandbox: Sandbox) -> None:
    """It aborts a program that swallows every exception in a loop, by killing its worker."""
    cancel = Cancel()

    async def trigger(name: str, args: JsonValue) -> JsonValue:
        cancel.event.set()
        return None

    program = """
import asyncio
await tools.echo({})
while True:
    try:
        await asyncio.sleep(0.01)
    except BaseException:
        pass
"""
    with anyio.fail_after(30):
        result = await run(sandbox, program, call_tool=trigger, cancel=cancel)
    assert result.error is not None and result.error.kind == "aborted"


async def test_arguments_over_the_frame_budget_fail_inside_the_program(sandbox: Sandbox) -> None:
    """It refuses to send a call whose arguments exceed the frame budget; the program can catch it."""
    limits = SandboxLimits(wall_seconds=15.0, cpu_seconds=5.0, frame_bytes=8192, result_bytes=1000)
    program = """
try:
    await tools.echo({'blob': 'x' * 20000})
except Exception as exc:
    return str(exc)
"""
    with anyio.fail_after(30):
        result = await run(sandbox, program, limits=limits)
    assert result.ok and isinstance(result.value, str) and "frame_bytes" in result.value
    assert result.stats.tool_calls == 0


async def test_the_host_survives_every_trip_and_still_runs(sandbox: Sandbox) -> None:
    """It keeps serving runs after all the trips above."""
    with anyio.fail_after(30):
        result = await run(sandbox, "return 'alive'")
    assert result.value == "alive"
