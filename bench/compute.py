"""Compute inside the sandbox's interpreter vs plain CPython on the same code.

Usage: ``python bench/compute.py [--runs N]``. Every workload is a program body (the compute workloads
of :mod:`bench.workloads` plus two attribute/method-heavy ones and two that call module members in a
loop, ``random-sort`` and ``math-loop``). Each runs

* under plain CPython ``exec`` as module code (the final ``return X`` becomes ``result = X``), so its
  top-level names are module globals, exactly as they are in the sandbox; and
* as the same generated ``async def`` the sandbox runs (top-level names declared ``global``) but
  compiled by plain ``compile()`` without the policy: this isolates what the guards themselves cost;
* under the sandbox's executor in-process (:func:`codemode.sandbox.interpreter.run_program` on one event loop;
  compiled once, outside the timing, which is reported separately).

Runs of the three sides are interleaved so that machine noise hits them alike. It reports the medians,
the ratios to both baselines and the geometric means of the ratios. Both sides are checked to
compute the same value. This measures the language layer only; process isolation is measured by
``bench/sandbox_latency.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parents[1]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

import ast  # noqa: E402

from bench.workloads import COMPUTE  # noqa: E402
from codemode.sandbox.compiler import _TopLevelNames  # noqa: E402
from codemode.sandbox.interpreter import compile_program, run_program  # noqa: E402

_ATTRIBUTES = """\
class Point:
    def __init__(self, x, y):
        self.x = x
        self.y = y
    def norm2(self):
        return self.x * self.x + self.y * self.y
points = [Point(i, i % 17) for i in range(20000)]
total = 0
for p in points:
    total += p.norm2() + p.x - p.y
return total
"""

_METHODS = """\
rows = []
for i in range(20000):
    rows.append({"id": i, "name": "item" + str(i), "tags": ["a", "b"][: i % 3]})
names = [r["name"].upper() for r in rows if len(r["tags"]) > 1]
grouped = {}
for r in rows:
    grouped.setdefault(len(r["tags"]), []).append(r["id"])
return [len(names), sorted(grouped), sum(len(v) for v in grouped.values())]
"""

# (module members in a loop: each iteration reads a facade member, as programs do)
_RANDOM_SORT = """\
import random
random.seed(7)
xs = [random.random() for i in range(30000)]
ys = sorted(xs)
return [len(ys), ys == sorted(xs), ys[0] <= ys[-1]]
"""

_MATH_LOOP = """\
import math
total = 0.0
for i in range(1, 40000):
    total += math.sqrt(i) * math.sin(i) + math.floor(math.log(i))
return round(total, 6)
"""

WORKLOADS: tuple[tuple[str, str], ...] = (
    *((w.name, w.body) for w in COMPUTE),
    ("attributes", _ATTRIBUTES),
    ("methods", _METHODS),
    ("random-sort", _RANDOM_SORT),
    ("math-loop", _MATH_LOOP),
)


def _as_module(body: str) -> str:
    lines = body.rstrip("\n").split("\n")
    last = lines[-1]
    assert last.startswith("return "), "a workload ends with 'return X'"
    return "\n".join([*lines[:-1], "result = " + last[len("return "):]]) + "\n"


async def _no_tool(name: str, args: Any) -> Any:
    raise RuntimeError("no tools in compute workloads")


def _as_wrapped(body: str) -> str:
    collector = _TopLevelNames()
    for stmt in ast.parse(body).body:
        collector.visit(stmt)
    head = f"    global {', '.join(collector.names)}\n" if collector.names else ""
    return "async def program():\n" + head + "".join(f"    {line}\n" for line in body.splitlines())


async def _run_wrapped(code: Any) -> Any:
    namespace: dict[str, Any] = {}
    exec(code, namespace)
    return await namespace["program"]()


async def _measure(body: str, runs: int) -> tuple[list[float], list[float], list[float], Any, Any, float]:
    """Interleave the three sides so that machine noise hits them alike."""
    plain_code = compile(_as_module(body), "<plain>", "exec")
    wrapped_code = compile(_as_wrapped(body), "<wrapped>", "exec")
    compile_samples: list[float] = []
    for _ in range(5):
        start = time.perf_counter()
        compiled = compile_program(body)
        compile_samples.append(time.perf_counter() - start)
    compile_s = statistics.median(compile_samples)
    plain_samples: list[float] = []
    wrapped_samples: list[float] = []
    sandbox_samples: list[float] = []
    plain_value: Any = None
    sandbox_value: Any = None
    for _ in range(runs):
        namespace: dict[str, Any] = {}
        start = time.perf_counter()
        exec(plain_code, namespace)
        plain_samples.append(time.perf_counter() - start)
        plain_value = namespace["result"]
        start = time.perf_counter()
        await _run_wrapped(wrapped_code)
        wrapped_samples.append(time.perf_counter() - start)
        start = time.perf_counter()
        outcome = await run_program(compiled, tool_names=(), call_tool=_no_tool, log=_ignore)
        sandbox_samples.append(time.perf_counter() - start)
        if outcome.error_kind is not None:
            raise RuntimeError(f"workload failed in the sandbox: {outcome.error_message}")
        sandbox_value = outcome.value
    return plain_samples, wrapped_samples, sandbox_samples, plain_value, sandbox_value, compile_s


def _ignore(text: str) -> None:
    return None


def _normalise(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_normalise(v) for v in value]
    if isinstance(value, list):
        return [_normalise(v) for v in value]
    return value


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:8.2f} ms"


def main(argv: list[str] | None = None, *, out: Callable[[str], None] = print) -> float:
    """Run every workload and print the table; returns the geometric-mean ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=21, help="timed runs per workload and side")
    args = parser.parse_args(argv)
    ratios: list[float] = []
    guard_ratios: list[float] = []
    out(f"{'workload':<12} {'plain exec':>12} {'same wrapper':>13} {'sandbox':>12} {'vs exec':>8} "
        f"{'vs wrapper':>10} {'compile':>10}")
    for name, body in WORKLOADS:
        plain_samples, wrapped_samples, sandbox_samples, plain_value, sandbox_value, compile_s = asyncio.run(
            _measure(body, args.runs))
        if _normalise(plain_value) != _normalise(sandbox_value):
            raise RuntimeError(f"{name}: the sandbox computed {sandbox_value!r}, CPython {plain_value!r}")
        plain = statistics.median(plain_samples)
        wrapped = statistics.median(wrapped_samples)
        sandboxed = statistics.median(sandbox_samples)
        ratios.append(sandboxed / plain)
        guard_ratios.append(sandboxed / wrapped)
        out(f"{name:<12} {_ms(plain):>12} {_ms(wrapped):>13} {_ms(sandboxed):>12} {ratios[-1]:>7.2f}x "
            f"{guard_ratios[-1]:>9.2f}x {_ms(compile_s):>10}")
    geomean = _geomean(ratios)
    out(f"geometric-mean slowdown vs plain exec: {geomean:.2f}x; vs the same wrapper without the policy: "
        f"{_geomean(guard_ratios):.2f}x ({len(ratios)} workloads, medians of {args.runs} runs; "
        "target <= 1.2x)")
    return geomean


def _geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


if __name__ == "__main__":
    main()
