"""What compiling a program costs: the sandbox's restricted compile per KB, CPython's own, and a cache hit.

Usage: ``python bench/compile_cost.py [--repeat 30]``. Programs of about 0.7, 2.7, 11 and 43 KB are built
from the benchmark's realistic program (its body repeated, each copy's ``return`` turned into an
assignment); each is compiled ``--repeat`` times with ``compile_program(..., cache=False)`` (the
policy's transformer and CPython's compile: what a worker pays for a program it has not compiled
before), with plain ``compile`` of the same text as an ``async def`` (no policy), and as a cache hit.
Medians; the per-KB figure is the restricted compile's median divided by the program's size.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[1]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from bench.workloads import by_name  # noqa: E402
from codemode.sandbox.compiler import compile_program  # noqa: E402


def _program(copies: int) -> str:
    body = by_name("realistic").body
    parts = [body.replace("return {", f"summary_{index} = {{") for index in range(copies)]
    return "\n".join(parts) + "\nreturn summary_0\n"


def _median_seconds(action: Callable[[], object], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def _measure(source: str, repeat: int) -> tuple[float, float, float, float]:
    """Median seconds of a restricted compile, a plain compile and a cache hit; the size in KB."""
    wrapped = "async def program():\n" + "\n".join("    " + line for line in source.splitlines())
    restricted = _median_seconds(lambda: compile_program(source, module_scope=False, cache=False), repeat)
    plain = _median_seconds(lambda: compile(wrapped, "<program>", "exec", dont_inherit=True), repeat)
    compile_program(source, module_scope=False)
    hit = _median_seconds(lambda: compile_program(source, module_scope=False), repeat)
    return restricted, plain, hit, len(source.encode()) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=30)
    options = parser.parse_args()
    warnings.simplefilter("ignore")  # (as in a worker: the compiler then skips saving the filters)
    print("| program | size | restricted compile | per KB | plain CPython compile | cache hit |")
    print("|---|---|---|---|---|---|")
    for copies in (1, 4, 16, 64):
        restricted, plain, hit, size = _measure(_program(copies), options.repeat)
        print(f"| realistic x{copies} | {size:.1f} KB | {restricted * 1e3:.2f} ms | "
              f"{restricted * 1e3 / size:.2f} ms | {plain * 1e3:.2f} ms | {hit * 1e6:.1f} us |")


if __name__ == "__main__":
    main()
