"""Soak: many sequential ``run_code`` runs on one runtime, watching memory (issue 7).

Usage: ``python bench/reliability.py --soak 10000 [--every 1000] [--json]``.

Each run is a real ``run_code`` call (fresh worker from the warm supply, two child calls through the
pipeline, a printed line and a returned value, checked exactly) from a fresh agent, so nothing is
meant to accumulate. The report gives the resident set size (RSS, from ``/proc``) of the host process
and of the sandbox's template process at the start (after a warm-up of ``--warmup`` runs, which pays
for lazy imports and allocator pools), every ``--every`` runs, and at the end, plus run latency
percentiles per block. The stated bound, checked at the end (exit status 1 when exceeded): host RSS
grows by at most ``HOST_BOUND_BYTES`` and template RSS by at most ``TEMPLATE_BOUND_BYTES`` from the
post-warm-up sample to the end, whatever the number of runs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Final

_ROOT = Path(__file__).resolve().parents[1]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

import anyio  # noqa: E402

from codemode.runtime import Agent, ToolRuntime  # noqa: E402
from codemode.tools.demo import demo_tools  # noqa: E402
from codemode.tools.run_code import PythonCodeRuntime  # noqa: E402

__all__ = ("HOST_BOUND_BYTES", "TEMPLATE_BOUND_BYTES", "rss_bytes", "soak")

#: Allowed host RSS growth from the post-warm-up sample to the end of a soak.
HOST_BOUND_BYTES: Final = 16 * 1024 * 1024
#: Allowed template RSS growth (the template only forks; it should not grow at all).
TEMPLATE_BOUND_BYTES: Final = 2 * 1024 * 1024

PROGRAM: Final = """
first = await tools.add(a={n}, b=1)
echoed = await tools.echo(text="run {n}")
print(echoed["text"])
return first["sum"]
"""


def rss_bytes(pid: int | str = "self") -> int:
    """Resident set size of ``pid`` (default: this process), from ``/proc/<pid>/status``."""
    with open(f"/proc/{pid}/status", encoding="ascii") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS line for pid {pid}")


async def _one(rt: ToolRuntime, n: int) -> float:
    start = time.perf_counter()
    result = await rt.execute("run_code", {"code": PROGRAM.format(n=n), "description": "soak run"},
                              agent=Agent(f"soak-{n}"), call_id=f"soak-{n}")
    elapsed = time.perf_counter() - start
    if result.is_error or result.value != {"logs": [f"run {n}"], "result": n + 1}:
        raise AssertionError(f"run {n} went wrong: {result.error or result.value}")
    return elapsed


async def soak(runs: int, *, every: int = 1000, warmup: int = 100,
               report: Any = None) -> dict[str, Any]:
    """Run ``runs`` sequential checked runs; return the RSS samples and latency per block.

    ``report(sample)`` (optional) is called with each sample as it is taken.
    """
    samples: list[dict[str, Any]] = []
    async with PythonCodeRuntime() as code_runtime, ToolRuntime("code", code_runtime=code_runtime) as rt:
        for definition in demo_tools():
            rt.register(definition)
        template = code_runtime.sandbox.template_pid
        assert template is not None

        def sample(done: int, latencies: list[float]) -> None:
            entry: dict[str, Any] = {"runs": done, "host_rss": rss_bytes(),
                                     "template_rss": rss_bytes(template)}
            if latencies:
                ordered = sorted(latencies)
                entry["median_ms"] = statistics.median(ordered) * 1000
                entry["p99_ms"] = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))] * 1000
            samples.append(entry)
            if report is not None:
                report(entry)

        sample(0, [])
        for n in range(warmup):
            await _one(rt, -1 - n)
        sample(0, [])  # the baseline the bound is measured from
        block: list[float] = []
        for n in range(1, runs + 1):
            block.append(await _one(rt, n))
            if n % every == 0 or n == runs:
                sample(n, block)
                block = []
    base, end = samples[1], samples[-1]
    host_growth = end["host_rss"] - base["host_rss"]
    template_growth = end["template_rss"] - base["template_rss"]
    return {"runs": runs, "warmup": warmup, "samples": samples, "host_growth": host_growth,
            "template_growth": template_growth,
            "within_bound": host_growth <= HOST_BOUND_BYTES and template_growth <= TEMPLATE_BOUND_BYTES,
            "host_bound": HOST_BOUND_BYTES, "template_bound": TEMPLATE_BOUND_BYTES}


def _mib(value: int) -> str:
    return f"{value / (1024 * 1024):7.2f} MiB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--soak", type=int, default=10000, help="number of sequential runs")
    parser.add_argument("--every", type=int, default=1000, help="sample RSS every N runs")
    parser.add_argument("--warmup", type=int, default=100, help="runs before the baseline sample")
    parser.add_argument("--json", action="store_true", help="print one JSON object at the end")
    options = parser.parse_args()

    def show(entry: dict[str, Any]) -> None:
        latency = (f"  run median {entry['median_ms']:.2f} ms, p99 {entry['p99_ms']:.2f} ms"
                   if "median_ms" in entry else "")
        print(f"after {entry['runs']:6d} runs: host RSS {_mib(entry['host_rss'])}, template RSS "
              f"{_mib(entry['template_rss'])}{latency}", file=sys.stderr, flush=True)

    started = time.perf_counter()
    found = anyio.run(lambda: soak(options.soak, every=options.every, warmup=options.warmup, report=show))
    found["seconds"] = time.perf_counter() - started
    if options.json:
        print(json.dumps(found))
    print(f"{found['runs']} runs in {found['seconds']:.0f} s; growth since the post-warm-up sample: host "
          f"{_mib(found['host_growth'])} (bound {_mib(HOST_BOUND_BYTES)}), template "
          f"{_mib(found['template_growth'])} (bound {_mib(TEMPLATE_BOUND_BYTES)}): "
          f"{'within the bound' if found['within_bound'] else 'OVER THE BOUND'}", file=sys.stderr)
    sys.exit(0 if found["within_bound"] else 1)


if __name__ == "__main__":
    main()
