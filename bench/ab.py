"""Before/after: this checkout against another one, measured alternately in the same minutes.

Usage: ``python bench/ab.py BASELINE_DIR [BASELINE_DIR ...] [--rounds 3] [--calls 1000]`` where each
``BASELINE_DIR`` is another checkout of codemode (e.g. ``git worktree add /tmp/base HEAD~3``, or ``git
archive COMMIT | tar -x -C /tmp/base``). Each round runs a fresh process in every checkout (``PYTHONPATH``
pointing at it; the order alternates between rounds), and each process measures the same cells with that
checkout's bench peers:

- ``trivial spaced``: ``return 1`` on a warm supply (the supply refilled and 10 ms of quiet before each run);
- ``back to back``: 200 ``return 1`` runs one right after the other (the next starts when the last
  returned), as runs per second and as the median run;
- ``per call``: wall and host-CPU time per sequential ``await tools.add(...)`` (``--calls`` of them in
  one program, minus the trivial run, three programs);
- ``per call under gather``: 100 ``tools.add`` calls under ``asyncio.gather``, minus the trivial run;
- ``realistic``: the benchmark's 22-call program, and the same on pydantic-monty's warm sync session
  (``monty-sync``, when installed) in the same process, with codemode's time as a percentage of it;
- ``ping-pong``: the raw round trip of one call-sized frame over a Unix socketpair to a child process
  (blocking sockets on both sides, unpinned), the floor the per-call figures are compared with.

Checkouts from before the single import name (top-level ``sandbox``, ``runtime``) work too: the measuring
code only imports ``bench.peers`` and ``bench.workloads`` from the checkout. Alternating matters: on a
shared machine two runs a few minutes apart drift by more than most changes gain (see bench/README.md).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent.parent
_BACK_TO_BACK = 200
_SPACED = 40

_GATHER = """\
import asyncio
replies = await asyncio.gather(*[tools.add(a=i, b=1) for i in range(100)])
return sum(reply["sum"] for reply in replies)
"""

_ECHO_CHILD = """
import socket, sys
sock = socket.socket(fileno=int(sys.argv[1]))
while True:
    data = sock.recv(4096)
    if not data:
        break
    sock.sendall(data)
"""


def ping_pong(round_trips: int = 2000) -> float:
    """Median seconds of one blocking echo of a call-sized frame over a socketpair (unpinned)."""
    parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    process = subprocess.Popen([sys.executable, "-c", _ECHO_CHILD, str(child.fileno())],
                               pass_fds=(child.fileno(),))
    child.close()
    message = b'\x00\x00\x00\x3a{"type":"call","id":1,"name":"add","args":{"a":1,"b":2}}'
    samples = []
    try:
        for index in range(round_trips + 50):
            start = time.perf_counter()
            parent.sendall(message)
            parent.recv(4096)
            if index >= 50:
                samples.append(time.perf_counter() - start)
    finally:
        parent.close()
        process.wait(timeout=10)
    return statistics.median(samples)


async def _timed(peer: Any, workload: Any) -> float:
    start = time.perf_counter()
    value = await peer.run(workload)
    elapsed = time.perf_counter() - start
    if value != workload.expected:
        raise SystemExit(f"{peer.name}: wrong value {value!r:.200} for {workload.name}")
    return elapsed


async def _cells(calls: int) -> dict[str, float]:
    """The cells this process can measure (its own checkout's code): microseconds, or runs per second."""
    from bench.peers import CodemodeRunCodePeer, CodemodeSandboxPeer
    from bench.workloads import by_name

    trivial = by_name("trivial")
    realistic = by_name("realistic")
    sequential = by_name("sequential-calls")
    body = sequential.body.replace("range(1000)", f"range({calls})")
    sequential = dataclasses.replace(sequential, body=body, expected=sum(i + 1 for i in range(calls)),
                                     calls=calls)
    gather = dataclasses.replace(trivial, name="gather-calls", body=_GATHER,
                                 expected=sum(i + 1 for i in range(100)))
    out: dict[str, float] = {"ping-pong (us)": ping_pong() * 1e6}
    for label, peer_type in (("sandbox", CodemodeSandboxPeer), ("run_code", CodemodeRunCodePeer)):
        async with peer_type() as peer:
            for _ in range(5):  # (warms this process up)
                await peer.prepare()
                await _timed(peer, trivial)
            walls = []
            for _ in range(_SPACED):
                await peer.prepare()
                walls.append(await _timed(peer, trivial))
            base = statistics.median(walls)
            out[f"{label} trivial spaced (us)"] = base * 1e6
            await peer.prepare()
            start = time.perf_counter()
            walls = [await _timed(peer, trivial) for _ in range(_BACK_TO_BACK)]
            out[f"{label} back to back (runs/s)"] = _BACK_TO_BACK / (time.perf_counter() - start)
            out[f"{label} back to back median (us)"] = statistics.median(walls) * 1e6
            walls, cpus = [], []
            for _ in range(3):
                await peer.prepare()
                cpu = time.process_time()
                walls.append((await _timed(peer, sequential) - base) / calls)
                cpus.append((time.process_time() - cpu) / calls)
            out[f"{label} per call (us)"] = statistics.median(walls) * 1e6
            out[f"{label} host CPU per call (us)"] = statistics.median(cpus) * 1e6
            walls = []
            for _ in range(7):
                await peer.prepare()
                walls.append((await _timed(peer, gather) - base) / 100)
            out[f"{label} per call under gather (us)"] = statistics.median(walls) * 1e6
            walls = []
            for _ in range(15):
                await peer.prepare()
                walls.append(await _timed(peer, realistic))
            out[f"{label} realistic (us)"] = statistics.median(walls) * 1e6
    for label in ("sandbox", "run_code"):
        out[f"{label} per call / ping-pong (x)"] = out[f"{label} per call (us)"] / out["ping-pong (us)"]
    monty = await _monty_realistic(realistic)
    if monty is not None:
        out["monty-sync realistic (us)"] = monty * 1e6
        for label in ("sandbox", "run_code"):
            out[f"{label} realistic / monty-sync (%)"] = out[f"{label} realistic (us)"] / (monty * 1e4)
    return out


async def _monty_realistic(realistic: Any) -> float | None:
    """Median seconds of the realistic program on pydantic-monty's warm sync session (None without it)."""
    try:
        import pydantic_monty  # noqa: F401

        from bench.peers import MontySyncPeer
    except ImportError:
        return None
    async with MontySyncPeer() as peer:
        await _timed(peer, realistic)
        return statistics.median([await _timed(peer, realistic) for _ in range(15)])


def _measure(tree: Path, calls: int) -> dict[str, float]:
    # This file measures; the packages (and bench.peers) come from ``tree``, first on the path.
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--cells", "--calls", str(calls)],
                          cwd=tree, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"measuring {tree} failed:\n{done.stderr}")
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _figure(value: float) -> str:
    return f"{value:.0f}" if abs(value) >= 20 else f"{value:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("baselines", nargs="*", type=Path, help="other checkouts of codemode")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=1000, help="sequential host calls per timed run")
    parser.add_argument("--cells", action="store_true", help=argparse.SUPPRESS)  # (one child process)
    options = parser.parse_args()
    if options.cells:
        import anyio

        print(json.dumps(anyio.run(_cells, options.calls)))
        return
    if not options.baselines or not all((b / "bench" / "peers.py").is_file() for b in options.baselines):
        parser.error("each BASELINE_DIR must be another codemode checkout (with bench/peers.py)")
    trees = [(str(b), b.resolve()) for b in options.baselines] + [("this", _HERE)]
    rows: dict[str, dict[str, list[float]]] = {}
    for number in range(1, options.rounds + 1):
        # (alternating order: whatever favours the first or last process of a round hits all alike)
        load = os.getloadavg()[0]
        for name, tree in trees if number % 2 else trees[::-1]:
            print(f"-- round {number}: {name} (load {load:.2f})", file=sys.stderr)
            for cell, value in _measure(tree, options.calls).items():
                rows.setdefault(cell, {}).setdefault(name, []).append(value)
    names = [name for name, _ in trees]
    print("| cell | " + " | ".join(f"{n} (each round)" for n in names) + " | this / "
          + " | this / ".join(n for n in names[:-1]) + " |")
    print("|---" * (2 * len(names)) + "|")
    for cell, sides in rows.items():
        this = statistics.median(sides.get("this", [float("nan")]))
        cells = [", ".join(_figure(v) for v in sides.get(n, [])) for n in names]
        ratios = [f"{this / statistics.median(sides[n]):.2f}x" if sides.get(n) else "n/a" for n in names[:-1]]
        print(f"| {cell} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
    print(f"(load average after: {os.getloadavg()[0]:.2f})")


if __name__ == "__main__":
    main()
