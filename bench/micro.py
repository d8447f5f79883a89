"""Per-operation cost of the language layer's hooks: the sandbox against plain CPython, same code.

Usage: ``python bench/micro.py [--runs N] [--loops N]``. Each case is one statement (``math.pi``,
``type(x)``, ``gen.send``, ``p.x = 1`` ...) repeated ten times in the body of a loop inside a function,
run

* under plain CPython ``exec`` (module code, the same text with the final ``return`` as an assignment);
* under the sandbox's executor in-process (:func:`codemode.sandbox.interpreter.run_program`, compiled
  once outside the timing).

With ``--gross`` the statement appears once per iteration and nothing is subtracted (what ``timeit``
reports, the loop's own cost included). Otherwise each side also runs the same loop with ``pass`` for
the statement, and the reported cost is the net
time per statement (loop and call overhead subtracted), in nanoseconds. Runs of the two sides are
interleaved so that machine noise hits them alike; each figure is the fastest of ``--runs`` runs (on a
shared machine the minimum of a nanosecond-scale loop is far steadier than its median). The ratio
column is the
sandbox's net cost over CPython's. The ``real module`` rows give the target of a facade access: the
same member read on the real module under plain CPython.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parents[1]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from bench.compute import _as_module, _ignore, _no_tool  # noqa: E402
from codemode.sandbox.interpreter import compile_program, run_program  # noqa: E402

_UNROLL = 10
_unroll = _UNROLL

#: (name, setup at the top of the function, the statement measured, top-level imports)
CASES: tuple[tuple[str, str, str, str], ...] = (
    ("facade attribute", "", "math.pi", "import math"),
    ("facade call", "", "math.sqrt(2.0)", "import math"),
    ("random.random()", "", "random.random()", "import random"),
    ("type(x)", "x = 1", "type(x)", ""),
    ("type(C) (a class)", "C = int", "type(C)", ""),
    ("guarded .send", "gen = numbers()\nnext(gen)", "gen.send", ""),
    ("guarded .format", "f = Fmt()", "f.format", ""),
    ("guarded .get_value", "f = Fmt()", "f.get_value", ""),
    ("store p.x = 1", "p = Fmt()", "p.x = 1", ""),
    ("store ps[0].x = 1", "ps = [Fmt()]", "ps[0].x = 1", ""),
    ("store d[k] = 1", "d = {}", "d['k'] = 1", ""),
)

_HELPERS = """\
def numbers():
    while True:
        yield 1
class Fmt:
    def format(self):
        return 1
    def get_value(self):
        return 1
"""


def _body(setup: str, statement: str, imports: str, loops: int) -> str:
    inner = textwrap.indent(setup, "    ") + "\n" if setup else ""
    repeated = "".join(f"        {statement}\n" for _ in range(_unroll))
    return (f"{imports}\n{_HELPERS}def work(n):\n{inner}    for i in range(n):\n{repeated}"
            f"    return 0\nreturn work({loops})\n")


async def _sandbox_seconds(compiled: Any) -> float:
    start = time.perf_counter()
    outcome = await run_program(compiled, tool_names=(), call_tool=_no_tool, log=_ignore)
    elapsed = time.perf_counter() - start
    if outcome.error_kind is not None:
        raise RuntimeError(f"micro case failed in the sandbox: {outcome.error_message}")
    return elapsed


def _plain_seconds(code: Any) -> float:
    namespace: dict[str, Any] = {}
    start = time.perf_counter()
    exec(code, namespace)
    return time.perf_counter() - start


async def _case(setup: str, statement: str, imports: str, runs: int, loops: int,
                gross: bool = False) -> tuple[float, float]:
    """Net nanoseconds per statement (gross: per loop iteration, nothing subtracted): (CPython, sandbox)."""
    texts = [_body(setup, statement, imports, loops), _body(setup, "pass", imports, loops)]
    plain = [compile(_as_module(text), "<plain>", "exec") for text in texts]
    sandboxed = [compile_program(text) for text in texts]
    samples: list[list[float]] = [[], [], [], []]
    for _ in range(runs):
        samples[0].append(_plain_seconds(plain[0]))
        samples[1].append(_plain_seconds(plain[1]))
        samples[2].append(await _sandbox_seconds(sandboxed[0]))
        samples[3].append(await _sandbox_seconds(sandboxed[1]))
    per = 1e9 / (loops * _unroll)
    best = [min(s) for s in samples]
    if gross:
        return best[0] * per, best[2] * per
    return (best[0] - best[1]) * per, (best[2] - best[3]) * per


def main(argv: list[str] | None = None, *, out: Callable[[str], None] = print) -> dict[str, float]:
    """Run every case and print the table; returns the sandbox/CPython ratio per case."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=15, help="timed runs per case and side")
    parser.add_argument("--loops", type=int, default=20000, help="loop iterations per run")
    parser.add_argument("--gross", action="store_true",
                        help="one statement per iteration, the loop's own cost included (timeit-style)")
    args = parser.parse_args(argv)
    global _unroll
    _unroll = 1 if args.gross else _UNROLL
    ratios: dict[str, float] = {}
    out(f"{'case':<22} {'CPython':>10} {'sandbox':>10} {'ratio':>7}")
    for name, setup, statement, imports in CASES:
        plain, sandboxed = asyncio.run(_case(setup, statement, imports, args.runs, args.loops, args.gross))
        ratios[name] = sandboxed / plain if plain > 0 else float("inf")
        out(f"{name:<22} {plain:>8.1f}ns {sandboxed:>8.1f}ns {ratios[name]:>6.2f}x")
    what = "gross ns per loop iteration" if args.gross else "net ns per statement: loop overhead subtracted"
    out(f"({what}; fastest of {args.runs} runs of {args.loops} x {_unroll}; 'facade' rows compare with the "
        "real module under CPython)")
    return ratios


if __name__ == "__main__":
    main()
