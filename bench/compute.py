"""Compute inside the sandbox's interpreter vs plain CPython on the same code (issue 3: <= 1.5x).

Usage: ``python bench/compute.py [--runs N]``. Every workload is a program body (the compute workloads
of :mod:`bench.workloads` plus two attribute/method-heavy ones). Each runs

* under plain CPython ``exec`` as module code (the final ``return X`` becomes ``result = X``), so its
  top-level names are module globals, exactly as they are in the sandbox; and
* under the sandbox's executor in-process (:func:`sandbox.interpreter.run_program` on one event loop;
  compiled once, outside the timing, which is reported separately).

It reports the median of each, the ratio and the geometric mean of the ratios. Both sides are checked to
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

from bench.workloads import COMPUTE  # noqa: E402
from sandbox.interpreter import compile_program, run_program  # noqa: E402

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

WORKLOADS: tuple[tuple[str, str], ...] = (
    *((w.name, w.body) for w in COMPUTE),
    ("attributes", _ATTRIBUTES),
    ("methods", _METHODS),
)


def _as_module(body: str) -> str:
    lines = body.rstrip("\n").split("\n")
    last = lines[-1]
    assert last.startswith("return "), "a workload ends with 'return X'"
    return "\n".join([*lines[:-1], "result = " + last[len("return "):]]) + "\n"


async def _no_tool(name: str, args: Any) -> Any:
    raise RuntimeError("no tools in compute workloads")


async def _measure(body: str, runs: int) -> tuple[list[float], list[float], Any, Any, float]:
    """Interleave plain and sandboxed runs so that machine noise hits both sides alike."""
    plain_code = compile(_as_module(body), "<plain>", "exec")
    start = time.perf_counter()
    compiled = compile_program(body)
    compile_s = time.perf_counter() - start
    plain_samples: list[float] = []
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
        outcome = await run_program(compiled, tool_names=(), call_tool=_no_tool, log=_ignore)
        sandbox_samples.append(time.perf_counter() - start)
        if outcome.error_kind is not None:
            raise RuntimeError(f"workload failed in the sandbox: {outcome.error_message}")
        sandbox_value = outcome.value
    return plain_samples, sandbox_samples, plain_value, sandbox_value, compile_s


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
    out(f"{'workload':<12} {'plain exec':>12} {'sandbox':>12} {'ratio':>7} {'compile':>10}")
    for name, body in WORKLOADS:
        plain_samples, sandbox_samples, plain_value, sandbox_value, compile_s = asyncio.run(
            _measure(body, args.runs))
        if _normalise(plain_value) != _normalise(sandbox_value):
            raise RuntimeError(f"{name}: the sandbox computed {sandbox_value!r}, CPython {plain_value!r}")
        plain = statistics.median(plain_samples)
        sandboxed = statistics.median(sandbox_samples)
        ratio = sandboxed / plain
        ratios.append(ratio)
        out(f"{name:<12} {_ms(plain):>12} {_ms(sandboxed):>12} {ratio:>6.2f}x {_ms(compile_s):>10}")
    geomean = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
    out(f"geometric-mean slowdown: {geomean:.2f}x over {len(ratios)} workloads "
        f"(target <= 1.5x; medians of {args.runs} runs each)")
    return geomean


if __name__ == "__main__":
    main()
