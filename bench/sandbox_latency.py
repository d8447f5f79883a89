"""Benchmark: time from "run this trivial program" to its result, on a warm worker supply.

Usage: ``python bench/sandbox_latency.py [--runs 200] [--profile] [--executor MODULE]``

Reports, all measured in this same process run:

- the median (and p10/p90) latency of ``await sandbox.run("return 1", ...)`` with the warm supply
  full before each run (the target is a median <= 2 ms);
- the median time of a fresh ``python3 -c pass`` spawn, and the warm latency as a ratio to it;
- the CPU time one warm run costs the host and the worker (stable on a loaded machine, unlike wall
  time);
- the cold start: entering a new ``Sandbox`` and getting its first result;
- with ``--profile``, a cProfile of the host side of the warm runs.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import subprocess
import sys
import time

import anyio

from codemode.sandbox import Sandbox
from codemode.sandbox.lossless import JsonValue


async def _no_tools(name: str, args: JsonValue) -> JsonValue:
    raise AssertionError("the benchmark program calls no tools")


def _quantile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def spawn_baseline(count: int) -> float:
    """Median wall time of a fresh ``python3 -c pass`` (what a cold worker would cost)."""
    samples = []
    for _ in range(count):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


async def cold_start(count: int) -> float:
    samples = []
    for _ in range(count):
        start = time.perf_counter()
        async with Sandbox() as sandbox:
            result = await sandbox.run("return 1", tool_names=(), call_tool=_no_tools)
            samples.append(time.perf_counter() - start)
            assert result.value == 1, result
    return statistics.median(samples)


async def warm_runs(count: int, profile: cProfile.Profile | None,
                    executor: str) -> tuple[list[float], list[float], list[float]]:
    """Wall seconds per run, host CPU seconds per run, worker CPU seconds per run (self-reported)."""
    walls, host_cpu, worker_cpu = [], [], []
    async with Sandbox(executor=executor) as sandbox:
        for _ in range(count):
            await sandbox.wait_warm()
            if profile is not None:
                profile.enable()
            start, cpu = time.perf_counter(), time.process_time()
            result = await sandbox.run("return 1", tool_names=(), call_tool=_no_tools)
            walls.append(time.perf_counter() - start)
            host_cpu.append(time.process_time() - cpu)
            if profile is not None:
                profile.disable()
            assert result.value == 1, result
            worker_cpu.append((result.stats.cpu_ms or 0.0) / 1000.0)
    return walls, host_cpu, worker_cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--executor", default="codemode.sandbox.interpreter",
                        help="in-worker executor module (for comparisons; the default is the real one)")
    options = parser.parse_args()
    profile = cProfile.Profile() if options.profile else None

    baseline = spawn_baseline(20)
    warm, host_cpu, worker_cpu = anyio.run(warm_runs, options.runs, profile, options.executor)
    cold = anyio.run(cold_start, 5)
    median = statistics.median(warm)
    print(f"python3 -c pass spawn (median of 20): {baseline * 1000:8.2f} ms")
    print(f"warm run 'return 1' (n={len(warm)}):    median {median * 1000:.2f} ms, "
          f"p10 {_quantile(warm, 0.1) * 1000:.2f} ms, p90 {_quantile(warm, 0.9) * 1000:.2f} ms")
    print(f"warm median / spawn median:         {median / baseline:8.3f}  (target: median <= 2 ms)")
    print(f"CPU per warm run (load-independent): host {statistics.median(host_cpu) * 1000:.2f} ms, "
          f"worker {statistics.median(worker_cpu) * 1000:.2f} ms (medians)")
    print(f"cold start (enter + first result):  {cold * 1000:8.2f} ms (median of 5)")
    if profile is not None:
        pstats.Stats(profile).sort_stats("tottime").print_stats(35)


if __name__ == "__main__":
    main()
