"""Throughput and hop cost of :class:`codemode.sandbox.ray.RaySandbox` against a local ``Sandbox``.

Usage: ``python bench/ray.py [--trivial 500] [--calls 100] [--concurrency 32] [--no-write]``.

Three set-ups, one after the other in this process: ``local`` (a ``Sandbox``), ``ray-1`` (a one-node local
Ray instance, one actor) and ``ray-2`` (a two-node ``ray.cluster_utils.Cluster`` on this machine, one actor
per node). Each runs, after a warm-up:

- ``trivial``: ``--trivial`` programs ``return 1``, at most ``--concurrency`` in flight;
- ``calls``: ``--calls`` programs of 10 sequential child calls each (a host handler doubling a number),
  at most ``--concurrency`` in flight;
- ``latency``: the median wall time of one trivial run and of one 10-call run, run one at a time; the
  difference from ``local`` is what one Ray hop adds per run, and per child call.

Every value is checked. Besides runs/s it reports the CPU each part spends per run: the driver (this
process: the host's side, where every child call is served), the actors (the relay on each node) and Ray's
own daemons (raylet, gcs_server), read from /proc. Both "nodes" of ``ray-2`` share this machine's cores, so
``ray-2`` shows the placement's cost, not a second machine's capacity; bench/README turns the per-run CPU
figures into an estimate for k machines. Writes ``bench/results/ray.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import platform
import statistics
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Final

_ROOT = Path(__file__).resolve().parents[1]
# (run as a script, this file's directory comes first on sys.path, and this file is named ray.py)
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

import anyio  # noqa: E402
import ray  # noqa: E402
from ray.cluster_utils import Cluster  # noqa: E402

from codemode.sandbox import Sandbox, SandboxLimits  # noqa: E402
from codemode.sandbox.ray import RaySandbox  # noqa: E402

__all__ = ("main",)

TRIVIAL: Final = "return 1"
CALLS: Final = "total = 0\nfor i in range(10):\n    total += (await tools.double(n=i))['n']\nreturn total"
LIMITS: Final = SandboxLimits(wall_seconds=120.0)
_TICKS: Final = os.sysconf("SC_CLK_TCK")
_DAEMONS: Final = (b"raylet", b"gcs_server")


async def double(name: str, args: Any) -> Any:
    return {"n": 2 * args["n"]}


def _cpu(pid: int, children: bool = False) -> float:
    """CPU seconds of ``pid`` (with ``children``: and of its reaped children, as a template's workers)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
        used = int(fields[11]) + int(fields[12])
        if children:
            used += int(fields[13]) + int(fields[14])
        return used / _TICKS
    except (OSError, IndexError, ValueError):
        return 0.0


def _templates(parents: list[int]) -> list[int]:
    """The sandbox templates started by these processes (each forks and reaps its workers)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                parent = int(handle.read().rsplit(b")", 1)[1].split()[1])
            with open(f"/proc/{name}/cmdline", "rb") as handle:
                command = handle.read()
        except (OSError, IndexError, ValueError):
            continue
        if parent in parents and b"codemode.sandbox._template" in command:
            found.append(int(name))
    return found


def _daemon_pids() -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/comm", "rb") as handle:
                    if handle.read().strip() in _DAEMONS:
                        found.append(int(name))
            except OSError:
                continue
    return found


class _CpuMeter:
    """CPU seconds of the driver, the actors, the templates with their workers, and Ray's daemons over
    one measured phase."""

    def __init__(self, actor_pids: list[int]) -> None:
        self._actors = actor_pids
        self._templates = _templates(actor_pids or [os.getpid()])
        self._daemons = _daemon_pids()

    def _now(self) -> tuple[float, ...]:
        return (time.process_time(), sum(map(_cpu, self._actors)),
                sum(_cpu(pid, children=True) for pid in self._templates), sum(map(_cpu, self._daemons)))

    def __enter__(self) -> _CpuMeter:
        self._start = self._now()
        return self

    def __exit__(self, *exc: object) -> None:
        used = [b - a for a, b in zip(self._start, self._now(), strict=True)]
        self.driver, self.actors, self.templates, self.daemons = used


async def _throughput(box: Sandbox, program: str, count: int, expect: int, concurrency: int,
                      actor_pids: list[int]) -> dict[str, float]:
    limiter = anyio.CapacityLimiter(concurrency)
    wrong: list[Any] = []

    async def one() -> None:
        async with limiter:
            result = await box.run(program, tool_names=("double",), call_tool=double, limits=LIMITS)
        if result.value != expect:
            wrong.append(result.error or result.value)

    with _CpuMeter(actor_pids) as meter:
        started = time.perf_counter()
        async with anyio.create_task_group() as group:
            for _ in range(count):
                group.start_soon(one)
        elapsed = time.perf_counter() - started
    if wrong:
        raise SystemExit(f"{len(wrong)} runs went wrong, first: {wrong[0]}")
    return {"runs": count, "seconds": elapsed, "runs_per_s": count / elapsed,
            "driver_cpu_ms_per_run": meter.driver * 1000 / count,
            "actor_cpu_ms_per_run": meter.actors * 1000 / count,
            "template_and_worker_cpu_ms_per_run": meter.templates * 1000 / count,
            "daemon_cpu_ms_per_run": meter.daemons * 1000 / count}


async def _once(box: Sandbox, program: str, expect: int) -> float:
    started = time.perf_counter()
    result = await box.run(program, tool_names=("double",), call_tool=double, limits=LIMITS)
    elapsed = (time.perf_counter() - started) * 1000
    if result.value != expect:
        raise SystemExit(f"a run went wrong: {result.error or result.value}")
    return elapsed


async def _latency(box: Sandbox, local: Sandbox, program: str, expect: int, runs: int) -> dict[str, float]:
    """Medians of runs one at a time on ``box``, and of its excess over ``local`` in alternating pairs (so
    the machine's drift shifts both alike)."""
    times, excess = [], []
    for _ in range(runs):
        await local.wait_warm()
        here = await _once(local, program, expect)
        await box.wait_warm()
        there = await _once(box, program, expect)
        times.append(there)
        excess.append(there - here)
    return {"median_ms": statistics.median(times), "excess_over_local_ms": statistics.median(excess)}


async def _measure(box: Sandbox, local: Sandbox, args: argparse.Namespace) -> dict[str, Any]:
    pids = [actor.pid for actor in box.actors() if actor.pid] if isinstance(box, RaySandbox) else []
    await box.wait_warm()
    for _ in range(20):  # (warm-up: lazy imports, Ray's connections, the allocators)
        await box.run(CALLS, tool_names=("double",), call_tool=double, limits=LIMITS)
    measured: dict[str, Any] = {
        "trivial": await _throughput(box, TRIVIAL, args.trivial, 1, args.concurrency, pids),
        "calls": await _throughput(box, CALLS, args.calls, 90, args.concurrency, pids),
    }
    measured["latency_trivial"] = await _latency(box, local, TRIVIAL, 1, args.latency_runs)
    measured["latency_calls"] = await _latency(box, local, CALLS, 90, args.latency_runs)
    return measured


@contextlib.asynccontextmanager
async def _setup(name: str, local: Sandbox) -> AsyncIterator[Sandbox]:
    if name == "local":
        yield local
    elif name == "ray-1":
        ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.WARNING, log_to_driver=False)
        try:
            async with RaySandbox() as remote:
                yield remote
        finally:
            ray.shutdown()
    else:
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
        try:
            cluster.add_node(num_cpus=1)
            cluster.wait_for_nodes(timeout=120)
            async with RaySandbox(address=cluster.address) as remote:
                yield remote
        finally:
            cluster.shutdown()


def _table(results: dict[str, dict[str, Any]]) -> str:
    rows = ["| set-up | trivial runs/s | 10-call runs/s | trivial run ms | 10-call run ms | driver CPU "
            "ms/run (trivial, 10-call) | actor CPU ms/run | template + workers CPU ms/run | Ray daemons "
            "CPU ms/run |",
            "|---|---|---|---|---|---|---|---|---|"]
    for name, r in results.items():
        t, c = r["trivial"], r["calls"]
        rows.append(f"| {name} | {t['runs_per_s']:.0f} | {c['runs_per_s']:.0f} | "
                    f"{r['latency_trivial']['median_ms']:.1f} | {r['latency_calls']['median_ms']:.1f} | "
                    f"{t['driver_cpu_ms_per_run']:.2f}, "
                    f"{c['driver_cpu_ms_per_run']:.2f} | {t['actor_cpu_ms_per_run']:.2f}, "
                    f"{c['actor_cpu_ms_per_run']:.2f} | {t['template_and_worker_cpu_ms_per_run']:.2f}, "
                    f"{c['template_and_worker_cpu_ms_per_run']:.2f} | {t['daemon_cpu_ms_per_run']:.2f}, "
                    f"{c['daemon_cpu_ms_per_run']:.2f} |")
    rows.append("")
    for name, r in results.items():
        if name == "local":
            continue
        per_run = r["latency_trivial"]["excess_over_local_ms"]
        per_call = (r["latency_calls"]["excess_over_local_ms"] - per_run) / 10
        rows.append(f"{name}: one Ray hop adds {per_run:.1f} ms per run and {per_call:.2f} ms per child call "
                    "(median excess over a local Sandbox, runs one at a time, alternating).")
    return "\n".join(rows)


async def _main(args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, dict[str, Any]] = {}
    async with Sandbox() as local:
        for name in args.setups.split(","):
            started = time.perf_counter()
            async with _setup(name, local) as box:
                entered = time.perf_counter() - started
                results[name] = await _measure(box, local, args)
                results[name]["start_seconds"] = entered
        print(f"{name}: done", file=sys.stderr)
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--trivial", type=int, default=500)
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--latency-runs", type=int, default=40)
    parser.add_argument("--setups", default="local,ray-1,ray-2")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    results = anyio.run(_main, args)
    table = _table(results)
    print(table)
    if not args.no_write:
        out = _ROOT / "bench" / "results" / "ray.json"
        document = {"machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                                "ray": ray.__version__, "load_average": os.getloadavg()},
                    "args": vars(args), "results": results, "table": table}
        out.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")

if __name__ == "__main__":
    main()
