"""Before/after: this checkout against another one, measured alternately in the same minutes.

Usage: ``python bench/ab.py BASELINE_DIR [--rounds 3] [--calls 300]`` where ``BASELINE_DIR`` is another
checkout of codemode (e.g. ``git worktree add /tmp/base HEAD~3``). Each round runs a fresh process in each
checkout (``PYTHONPATH`` pointing at it; the order alternates between rounds), and each measures the
same cells with the bench peers: trivial ``Sandbox.run`` and ``run_code`` latency, and the wall and
host-CPU time per sequential host call through both. Alternating matters: on a shared machine two runs a
few minutes apart drift by more than most changes gain (see bench/README.md).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

_HERE = Path(__file__).resolve().parent.parent


async def _cells(calls: int) -> dict[str, float]:
    """Medians, in microseconds, of the cells this process can measure (its own checkout's code)."""
    from bench.peers import CodemodeRunCodePeer, CodemodeSandboxPeer
    from bench.workloads import by_name

    trivial = by_name("trivial")
    sequential = by_name("sequential-calls")
    body = sequential.body.replace("range(1000)", f"range({calls})")
    sequential = dataclasses.replace(sequential, body=body, expected=sum(i + 1 for i in range(calls)),
                                     calls=calls)
    out: dict[str, float] = {}
    for label, peer_type in (("sandbox", CodemodeSandboxPeer), ("run_code", CodemodeRunCodePeer)):
        async with peer_type() as peer:
            walls = []
            for _ in range(40):
                await peer.prepare()
                start = time.perf_counter()
                await peer.run(trivial)
                walls.append(time.perf_counter() - start)
            out[f"{label} trivial (us)"] = statistics.median(walls) * 1e6
            walls, cpus = [], []
            for _ in range(3):
                await peer.prepare()
                start, cpu = time.perf_counter(), time.process_time()
                await peer.run(sequential)
                walls.append((time.perf_counter() - start) / calls)
                cpus.append((time.process_time() - cpu) / calls)
            out[f"{label} per call (us)"] = statistics.median(walls) * 1e6
            out[f"{label} host CPU per call (us)"] = statistics.median(cpus) * 1e6
    return out


def _measure(tree: Path, calls: int) -> dict[str, float]:
    # This file measures; the packages (and bench.peers) come from ``tree``, first on the path.
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--cells", "--calls", str(calls)],
                          cwd=tree, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"measuring {tree} failed:\n{done.stderr}")
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("baseline", nargs="?", type=Path, help="another checkout of codemode")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=300, help="sequential host calls per timed run")
    parser.add_argument("--cells", action="store_true", help=argparse.SUPPRESS)  # (one child process)
    options = parser.parse_args()
    if options.cells:
        import anyio

        print(json.dumps(anyio.run(_cells, options.calls)))
        return
    if options.baseline is None or not (options.baseline / "bench" / "peers.py").is_file():
        parser.error("BASELINE_DIR must be another codemode checkout (with bench/peers.py)")
    rows: dict[str, dict[str, list[float]]] = {}
    trees = [("baseline", options.baseline.resolve()), ("this", _HERE)]
    for number in range(1, options.rounds + 1):
        # (ABBA order: whatever favours the first or second process of a round hits both alike)
        for name, tree in trees if number % 2 else trees[::-1]:
            print(f"-- round {number}: {name}", file=sys.stderr)
            for cell, value in _measure(tree, options.calls).items():
                rows.setdefault(cell, {}).setdefault(name, []).append(value)
    print("| cell | baseline (each round) | this checkout (each round) | median this / baseline |")
    print("|---|---|---|---|")
    for cell, sides in rows.items():
        base, this = sides.get("baseline", []), sides.get("this", [])
        ratio = statistics.median(this) / statistics.median(base) if base and this else float("nan")
        print(f"| {cell} | {', '.join(f'{v:.0f}' for v in base)} | {', '.join(f'{v:.0f}' for v in this)} "
              f"| {ratio:.2f}x |")


if __name__ == "__main__":
    main()
