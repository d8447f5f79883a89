"""Run every benchmark against every peer in one process run and write the results table.

Usage: ``python bench/run.py [--quick] [--only PEER,...] [--no-write]``. Writes
``bench/results/latest.json`` (every sample's median, p10, p90 and count, the ratios, the target
verdicts and the machine) and ``bench/results/latest.md`` (the same as Markdown tables).

Method, the same for every peer (see bench/README.md for what each number means):

- every peer is entered first (pools, templates, warm supplies start untimed), then each workload runs
  once untimed as a warm-up whose value is checked against the workload's expected value;
- timed runs: as many as fit a per-cell time budget, between a minimum and a maximum count, spread over
  a few rounds in which every peer runs every workload in turn (all peers stay open), so drift of the
  machine hits every peer alike; the codemode peers let their warm supply refill (untimed) before each
  run, and every peer waits for the others' background work (a refill) before it is timed;
- a cell reports the median wall time of ``peer.run(workload)``: program text in, checked value out;
- compute figures are *net*: the workload's median minus the same peer's median for ``return 1``, so a
  per-run fixed cost (a process hop, a fork) does not hide or inflate the interpreter's speed; per-call
  figures are the net time of 1,000 sequential calls divided by 1,000;
- cold start runs in a fresh ``python -c`` process per sample that imports only the peer, starts it,
  runs ``return 1`` and exits; the time to its first output line and to its exit are reported (a
  bare ``python -c`` is measured alongside as the floor).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import importlib.metadata
import json
import math
import os
import platform
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parents[1]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

import anyio  # noqa: E402

from bench.peers import Peer, PeerFailure, all_peers  # noqa: E402
from bench.workloads import COMPUTE, WORKLOADS, Workload, by_name  # noqa: E402

RESULTS = _ROOT / "bench" / "results"
_COLD_PEERS = ("cpython-exec", "restrictedpython", "smolagents", "monty-sync", "monty-async",
               "codemode-sandbox", "codemode-run_code")


class Settings:
    """Repetition budget: ``quick`` trades precision for a run of about a minute."""

    def __init__(self, quick: bool) -> None:
        self.quick = quick
        self.cell_budget = 0.4 if quick else 1.5
        self.min_runs = 2 if quick else 5
        self.max_runs = 25 if quick else 200
        self.slow_min_runs = 1 if quick else 2  # a cell whose single run exceeds 1 s
        self.rounds = 2 if quick else 5  # timed runs of every cell are spread over these rounds
        self.cold_runs = 2 if quick else 5
        self.spawn_runs = 5 if quick else 20


def _summary(samples: list[float]) -> dict[str, Any]:
    ordered = sorted(samples)

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    return {"median_s": statistics.median(ordered), "p10_s": at(0.1), "p90_s": at(0.9), "n": len(ordered)}


async def _timed_run(peer: Peer, workload: Workload) -> tuple[float, Any]:
    prepare = getattr(peer, "prepare", None)
    if prepare is not None:
        await prepare()
    start = time.perf_counter()
    with anyio.fail_after(120):
        value = await peer.run(workload)
    return time.perf_counter() - start, value


async def _first_run(peer: Peer, workload: Workload, settings: Settings) -> tuple[dict[str, Any] | None, int,
                                                                                   list[float]]:
    """The untimed warm-up of one cell: ``(verdict, runs still to do, samples so far)``.

    The verdict is ``None`` when the cell is measured, else its ``na``/``failed`` entry.
    """
    reason = peer.unsupported(workload)
    if reason is not None:
        return {"na": reason}, 0, []
    try:
        first, value = await _timed_run(peer, workload)
    except (PeerFailure, Exception) as exc:
        return {"failed": f"{type(exc).__name__}: {exc}"[:500]}, 0, []
    if value != workload.expected:
        return {"failed": f"wrong value {value!r:.200}"}, 0, []
    if first > 1.0:  # a slow cell (a tree-walking interpreter): the warm-up is a fair sample
        return None, settings.slow_min_runs - 1, [first]
    runs = int(settings.cell_budget / max(first, 1e-6))
    return None, max(settings.min_runs, min(settings.max_runs, runs)), []


async def _quiesce(peers: list[Peer]) -> None:
    """Let every peer finish its background work (a codemode refill) before another peer is timed."""
    for peer in peers:
        quiesce = getattr(peer, "quiesce", None)
        if quiesce is not None:
            await quiesce()


async def measure_peers(settings: Settings, only: set[str] | None) -> dict[str, dict[str, Any]]:
    """Every workload on every peer: ``{peer: {workload: cell}}``.

    Every peer is open for the whole measurement, and each cell's timed runs are spread over
    ``settings.rounds`` rounds in which every peer runs every workload in turn: a machine that drifts
    (load from elsewhere, a vCPU that gets slower) then shifts every peer alike, so ratios between peers
    measured in the same run stay meaningful.
    """
    table: dict[str, dict[str, Any]] = {}
    async with contextlib.AsyncExitStack() as stack:
        opened: list[Peer] = []
        for peer in all_peers():
            if only and peer.name not in only:
                continue
            try:
                await stack.enter_async_context(peer)
            except Exception as exc:
                table[peer.name] = {"error": f"{type(exc).__name__}: {exc}"[:500]}
                continue
            opened.append(peer)
            table[peer.name] = {}
        left: dict[tuple[str, str], int] = {}
        samples: dict[tuple[str, str], list[float]] = {}
        for workload in WORKLOADS:
            for peer in opened:
                await _quiesce(opened)
                verdict, runs, first = await _first_run(peer, workload, settings)
                if verdict is not None:
                    table[peer.name][workload.name] = verdict
                else:
                    left[peer.name, workload.name], samples[peer.name, workload.name] = runs, first
        for round_number in range(settings.rounds):
            print(f"-- round {round_number + 1} of {settings.rounds}", file=sys.stderr, flush=True)
            for workload in WORKLOADS:
                for peer in opened:
                    key = (peer.name, workload.name)
                    if key not in left:
                        continue
                    share = math.ceil(left[key] / (settings.rounds - round_number))
                    left[key] -= share
                    await _quiesce(opened)
                    for _ in range(share):
                        try:
                            elapsed, value = await _timed_run(peer, workload)
                        except (PeerFailure, Exception) as exc:
                            table[peer.name][workload.name] = {"failed": f"{type(exc).__name__}: {exc}"[:500]}
                            del left[key]
                            break
                        if value != workload.expected:
                            table[peer.name][workload.name] = {"failed": f"wrong value {value!r:.200}"}
                            del left[key]
                            break
                        samples[key].append(elapsed)
        for (peer_name, workload_name), cell_samples in samples.items():
            if workload_name not in table[peer_name] and cell_samples:
                table[peer_name][workload_name] = _summary(cell_samples)
    for peer_name, row in table.items():
        for workload in WORKLOADS:
            if workload.name in row:
                print(f"{peer_name:18} {workload.name:17} {_cell_text(row[workload.name])}", file=sys.stderr,
                      flush=True)
    return table


# --- cold start -----------------------------------------------------------------------------------

#: One self-contained ``python -c`` program per peer: import only what the peer needs, start it, run
#: ``return 1``, print the value (the parent times that line), shut down. No benchmark code is imported,
#: so a light peer is not charged for the harness.
_COLD_PROGRAMS: dict[str, str] = {
    "cpython-exec": r"""
import asyncio
namespace = {}
exec(compile("async def program(tools):\n    return 1\n", "<program>", "exec"), namespace)
print("first result", asyncio.run(namespace["program"](None)), flush=True)
""",
    "restrictedpython": r"""
from RestrictedPython import compile_restricted, safe_globals
namespace = dict(safe_globals)
exec(compile_restricted("def program(tools):\n    return 1\n", "<program>", "exec"), namespace)
print("first result", namespace["program"](None), flush=True)
""",
    "smolagents": r"""
from smolagents.local_python_executor import LocalPythonExecutor
executor = LocalPythonExecutor(additional_authorized_imports=[])
executor.send_tools({})
print("first result", executor("def program():\n    return 1\nprogram()\n").output, flush=True)
""",
    "monty-sync": r"""
import pydantic_monty
with pydantic_monty.Monty() as pool, pool.checkout() as session:
    print("first result", session.feed_run("def program():\n    return 1\nprogram()\n"), flush=True)
""",
    "monty-async": r"""
import asyncio, pydantic_monty
async def main():
    async with pydantic_monty.AsyncMonty() as pool, pool.checkout() as session:
        value = await session.feed_run("async def program():\n    return 1\nawait program()\n")
        print("first result", value, flush=True)
asyncio.run(main())
""",
    "codemode-sandbox": r"""
import anyio
from codemode.sandbox import Sandbox
async def no_tools(name, args):
    return None
async def main():
    async with Sandbox() as sandbox:
        result = await sandbox.run("return 1", tool_names=(), call_tool=no_tools)
        print("first result", result.value, flush=True)
anyio.run(main)
""",
    "codemode-run_code": r"""
import anyio
from codemode.runtime import Agent, ToolRuntime
from codemode.tools.run_code import PythonCodeRuntime
async def main():
    async with PythonCodeRuntime() as code_runtime, ToolRuntime("code", code_runtime=code_runtime) as rt:
        result = await rt.execute("run_code", {"code": "return 1", "description": "cold"}, agent=Agent("a"))
        print("first result", result.value["result"], flush=True)
anyio.run(main)
""",
}


def _time_cold(command: list[str]) -> tuple[float, float]:
    """Seconds from spawning ``command`` to its first output line, and to its exit."""
    start = time.perf_counter()
    process = subprocess.Popen(command, cwd=_ROOT, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    line = process.stdout.readline()
    first = time.perf_counter() - start
    process.stdout.read()
    if process.wait(timeout=60) != 0 or line.strip() != "first result 1":
        raise subprocess.CalledProcessError(process.returncode, command)
    return first, time.perf_counter() - start


def measure_cold(settings: Settings, only: set[str] | None) -> dict[str, Any]:
    """Fresh-process cold starts (to the first result, and to the process exit), and the spawn floor."""
    command = [sys.executable, "-c", "print('first result', 1)"]
    floor = [_time_cold(command) for _ in range(settings.spawn_runs)]
    found: dict[str, Any] = {"python -c": {**_summary([f for f, _ in floor]),
                                           "exit": _summary([e for _, e in floor])}}
    for name in _COLD_PEERS:
        if only and name not in only:
            continue
        print(f"-- cold {name}", file=sys.stderr, flush=True)
        try:
            samples = [_time_cold([sys.executable, "-c", _COLD_PROGRAMS[name]])
                       for _ in range(settings.cold_runs)]
        except subprocess.CalledProcessError as exc:
            found[name] = {"failed": str(exc)}
            continue
        found[name] = {**_summary([f for f, _ in samples]), "exit": _summary([e for _, e in samples])}
    return found


_ECHO_CHILD = """
import os, socket, sys
sock = socket.socket(fileno=int(sys.argv[1]))
while True:
    data = sock.recv(4096)
    if not data:
        break
    sock.sendall(data)
"""


def measure_ping_pong(round_trips: int) -> dict[str, Any]:
    """The floor of any cross-process host call here: a blocking echo over a Unix socketpair."""
    parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    process = subprocess.Popen([sys.executable, "-c", _ECHO_CHILD, str(child.fileno())],
                               pass_fds=(child.fileno(),))
    child.close()
    message = b'{"type":"call","id":1,"name":"add","args":{"a":1,"b":2}}'
    try:
        parent.sendall(message)
        parent.recv(4096)
        samples = []
        for _ in range(round_trips):
            start = time.perf_counter()
            parent.sendall(message)
            parent.recv(4096)
            samples.append(time.perf_counter() - start)
    finally:
        parent.close()
        process.wait(timeout=10)
    return _summary(samples)


_ASYNC_ECHO_CHILD = """
import asyncio, socket, sys
async def main():
    sock = socket.socket(fileno=int(sys.argv[1]))
    sock.setblocking(False)
    loop = asyncio.get_running_loop()
    while data := await loop.sock_recv(sock, 4096):
        sock.send(data)
asyncio.run(main())
"""


async def _async_ping_pong(round_trips: int) -> dict[str, Any]:
    parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    process = subprocess.Popen(  # noqa: ASYNC220 (started once, before the timed loop)
        [sys.executable, "-c", _ASYNC_ECHO_CHILD, str(child.fileno())], pass_fds=(child.fileno(),))
    child.close()
    parent.setblocking(False)
    loop = asyncio.get_running_loop()
    message = b'{"type":"call","id":1,"name":"add","args":{"a":1,"b":2}}'
    samples = []
    try:
        for _ in range(round_trips + 1):
            start = time.perf_counter()
            parent.send(message)
            await loop.sock_recv(parent, 4096)
            samples.append(time.perf_counter() - start)
    finally:
        parent.close()
        process.wait(timeout=10)
    return _summary(samples[1:])


def measure_async_ping_pong(round_trips: int) -> dict[str, Any]:
    """The same echo with an asyncio loop on both sides (what a host call over asyncio costs at least)."""
    return asyncio.run(_async_ping_pong(round_trips))


# --- other helpers' benchmarks ----------------------------------------------------------------------

async def measure_scheduler(quick: bool) -> dict[str, Any]:
    """The ordered lane's own overhead (bench/scheduler_overhead.py), per call."""
    try:
        from bench.scheduler_overhead import measure
    except Exception as exc:
        return {"failed": f"{type(exc).__name__}: {exc}"}
    return await measure(300 if quick else 1000, 3 if quick else 5)


# --- derived figures ------------------------------------------------------------------------------

def _median(table: dict[str, dict[str, Any]], peer: str, workload: str) -> float | None:
    cell = table.get(peer, {}).get(workload)
    return cell.get("median_s") if isinstance(cell, dict) else None


def _net(table: dict[str, dict[str, Any]], peer: str, workload: str) -> float | None:
    total, base = _median(table, peer, workload), _median(table, peer, "trivial")
    if total is None or base is None:
        return None
    return max(total - base, 1e-9)


def _best_monty(table: dict[str, dict[str, Any]], fn: Any, workload: str) -> tuple[str, float] | None:
    options = [(peer, value) for peer in ("monty-sync", "monty-async")
               if (value := fn(table, peer, workload)) is not None]
    return min(options, key=lambda item: item[1]) if options else None


def derive(table: dict[str, dict[str, Any]], warm: dict[str, Any] | None = None) -> dict[str, Any]:
    """Ratios to CPython, codemode vs Monty, per-call figures and the target verdicts."""
    peers = list(table)
    compute: dict[str, Any] = {}
    for peer in peers:
        ratios = {}
        for workload in COMPUTE:
            net, base = _net(table, peer, workload.name), _net(table, "cpython-exec", workload.name)
            if net is not None and base is not None:
                ratios[workload.name] = net / base
        geo = math.exp(statistics.fmean(math.log(r) for r in ratios.values())) if ratios else None
        compute[peer] = {"net_s": {w.name: _net(table, peer, w.name) for w in COMPUTE},
                         "ratio_to_cpython": ratios, "geomean_ratio_to_cpython": geo}
    vs_monty: dict[str, Any] = {}
    for workload in COMPUTE:
        best = _best_monty(table, _net, workload.name)
        ours = _net(table, "codemode-sandbox", workload.name)
        if best and ours:
            vs_monty[workload.name] = {"monty_peer": best[0], "monty_net_s": best[1], "codemode_net_s": ours,
                                       "codemode_over_monty": ours / best[1]}
    per_call = {peer: (net / 1000 if (net := _net(table, peer, "sequential-calls")) else None)
                for peer in peers}
    return {"compute": compute, "codemode_vs_monty_compute": vs_monty, "per_call_s": per_call,
            "targets": _targets(table, compute, vs_monty, per_call, warm)}


async def measure_warm_latency(settings: Settings) -> dict[str, Any]:
    """The latency targets' own measure: consecutive warm ``return 1`` runs of one peer at a time.

    In the interleaved table every codemode run follows the other peers' workloads, which leave the
    machine's caches full of their own code (that costs codemode's trivial run up to ~40%; see
    bench/README.md). Here each run follows the previous run of the same peer as soon as the warm supply
    has refilled (as in bench/sandbox_latency.py): the state the issues' targets name ("on a warm
    worker supply"). Both figures are reported.
    """
    from bench.peers import CodemodeRunCodePeer, CodemodeSandboxPeer

    trivial = by_name("trivial")
    runs = 40 if settings.quick else 200
    found: dict[str, Any] = {}
    for peer_type in (CodemodeSandboxPeer, CodemodeRunCodePeer):
        async with peer_type() as peer:
            samples = []
            for index in range(runs + 5):
                await peer.quiesce()  # (the warm supply is full again; as bench/sandbox_latency.py)
                start = time.perf_counter()
                with anyio.fail_after(120):
                    value = await peer.run(trivial)
                elapsed = time.perf_counter() - start
                if value != trivial.expected:
                    raise PeerFailure(f"{peer.name}: wrong value {value!r:.200}")
                if index >= 5:  # (the first runs warm the process up)
                    samples.append(elapsed)
            found[peer.name] = _summary(samples)
    return found


def _verdict(name: str, value: float | None, limit: float, unit: str, detail: str) -> dict[str, Any]:
    return {"target": name, "value": value, "limit": limit, "unit": unit, "detail": detail,
            "met": None if value is None else value <= limit}


def _targets(table: dict[str, dict[str, Any]], compute: dict[str, Any], vs_monty: dict[str, Any],
             per_call: dict[str, float | None],
             warm: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    ours = compute.get("codemode-sandbox", {})
    slowest = max((v["codemode_over_monty"] for v in vs_monty.values()), default=None)
    monty_call = min((v for p in ("monty-sync", "monty-async") if (v := per_call.get(p))), default=None)
    sandbox_call = per_call.get("codemode-sandbox")
    monty_trivial = _best_monty(table, _median, "trivial")
    trivial = _median(table, "codemode-sandbox", "trivial")
    return [
        _verdict("compute geomean vs CPython", ours.get("geomean_ratio_to_cpython"), 1.5, "x",
                 "codemode-sandbox net compute / cpython-exec, geometric mean of 5 workloads"),
        _verdict("compute vs Monty, worst workload", slowest, 1.0, "x",
                 "codemode-sandbox net / best Monty net; <= 1 means faster on every compute workload"),
        _verdict("host-call round trip vs Monty", None if not (sandbox_call and monty_call)
                 else sandbox_call / monty_call, 1.0, "x",
                 "codemode-sandbox per call / best Monty per call (1,000 sequential calls)"),
        _verdict("trivial run vs Monty warm feed", None if not (trivial and monty_trivial)
                 else trivial / monty_trivial[1], 10.0, "x",
                 "codemode-sandbox 'return 1' / best Monty warm feed of the same program"),
        _verdict("child-dispatch round trip", per_call.get("codemode-run_code"), 100e-6, "s",
                 "run_code: net time of 1,000 sequential child calls / 1,000"),
        _warm_verdict("trivial run_code end to end", table, warm, "codemode-run_code", 3e-3,
                      "rt.execute('run_code', 'return 1') on a warm supply"),
        _verdict("100 x 50 ms under gather (run_code)", _median(table, "codemode-run_code", "parallel-50ms"),
                 0.6, "s", "through the sub-lane, pool of 10: the floor is 0.5 s"),
        _warm_verdict("trivial sandbox run", table, warm, "codemode-sandbox", 2e-3,
                      "Sandbox.run('return 1') on a warm supply"),
    ]


def _warm_verdict(name: str, table: dict[str, dict[str, Any]], warm: dict[str, Any] | None, peer: str,
                  limit: float, what: str) -> dict[str, Any]:
    """A latency target, judged on the consecutive warm runs when they were measured."""
    interleaved = _median(table, peer, "trivial")
    cell = (warm or {}).get(peer)
    if not cell:
        return _verdict(name, interleaved, limit, "s", f"{what}; interleaved with the other peers")
    return _verdict(name, cell["median_s"], limit, "s",
                    f"{what}: {cell['n']} consecutive warm runs (interleaved with the other peers: "
                    f"{_ms(interleaved)})")


# --- profiles (``--profile``): the dispatch path and the worker start ------------------------------

_WORKER_START_CHILD = r'''
import cProfile, io, json, marshal, os, pstats, sys, time, asyncio
from codemode.sandbox import _isolate, _template, worker
executor = _template._prepare("codemode.sandbox.interpreter")
read_end, write_end = os.pipe()
phases = {}
start = time.perf_counter()
pid = os.fork()
if pid == 0:
    profile = cProfile.Profile()
    profile.enable()
    t = time.perf_counter()
    layers = _isolate.apply_layers(_isolate.OPTIONAL_LAYERS - _isolate.TEMPLATE_LAYERS,
                                   parent_pid=os.getppid(), template=(), host_pid=os.getpid())
    phases["apply_layers (namespaces, uid, rlimits, no-new-privs, landlock)"] = time.perf_counter() - t
    t = time.perf_counter()
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    phases["new event loop"] = time.perf_counter() - t
    t = time.perf_counter()
    _isolate.install_seccomp(worker._socket_fds(loop))
    phases["install seccomp"] = time.perf_counter() - t
    t = time.perf_counter()
    loop.run_until_complete(worker._warm_up(executor))
    phases["warm-up run (compile + run the warm-up program)"] = time.perf_counter() - t
    profile.disable()
    phases["fork to ready (child side)"] = time.perf_counter() - start
    out = io.StringIO()
    pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(15)
    os.write(write_end, json.dumps({"phases": phases, "profile": out.getvalue()}).encode())
    os._exit(0)
os.close(write_end)
chunks = []
while data := os.read(read_end, 1 << 16):
    chunks.append(data)
os.waitpid(pid, 0)
print(b"".join(chunks).decode())
'''


def profile_worker_start() -> dict[str, Any]:
    """The worker start replayed in a forked child of a fresh template-like process, under cProfile."""
    found = subprocess.run([sys.executable, "-c", _WORKER_START_CHILD], cwd=_ROOT, capture_output=True,
                           text=True, check=True, env={**os.environ, "PYTHONPATH": str(_ROOT)})
    result: dict[str, Any] = json.loads(found.stdout)
    return result


async def _spawn_cost(runs: int) -> dict[str, Any]:
    """Median ``return 1`` latency with the warm supply (warm=2) and without it (warm=0: fork per run)."""
    from codemode.sandbox import Sandbox

    async def noop(name: str, args: Any) -> Any:
        return None

    found: dict[str, Any] = {}
    for warm in (2, 0):
        async with Sandbox(warm=warm) as sandbox:
            samples = []
            for _ in range(runs):
                await sandbox.wait_warm()
                start = time.perf_counter()
                result = await sandbox.run("return 1", tool_names=(), call_tool=noop)
                samples.append(time.perf_counter() - start)
                assert result.value == 1, result
        found[f"warm={warm}"] = _summary(samples)
    return found


async def profile_dispatch() -> dict[str, str]:
    """cProfile of 1,000 sequential child dispatches through run_code: host side and worker side."""
    import cProfile
    import io
    import pstats

    from bench.peers import CodemodeRunCodePeer, CodemodeSandboxPeer
    from codemode.sandbox import Sandbox

    workload = by_name("sequential-calls")
    texts: dict[str, str] = {}
    async with CodemodeRunCodePeer() as peer:
        await peer.prepare()
        await peer.run(workload)
        await peer.prepare()
        profile = cProfile.Profile()
        profile.enable()
        await peer.run(workload)
        profile.disable()
        out = io.StringIO()
        pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(25)
        texts["host: run_code with 1,000 sequential child calls (tottime)"] = out.getvalue()
    sandbox_peer = CodemodeSandboxPeer()
    sandbox_peer.sandbox = Sandbox(executor="bench.peers")  # the profiling executor, in the worker
    async with sandbox_peer.sandbox:
        await sandbox_peer.sandbox.wait_warm()
        from bench.peers import _host_call
        from bench.workloads import TOOL_NAMES

        result = await sandbox_peer.sandbox.run(workload.body, tool_names=TOOL_NAMES, call_tool=_host_call)
        texts["worker: the same 1,000 calls, worker side (tottime)"] = "\n".join(result.logs)
    return texts


async def _profiles() -> dict[str, Any]:
    return {"dispatch": await profile_dispatch(), "spawn_cost": await _spawn_cost(30),
            "worker_start": await anyio.to_thread.run_sync(profile_worker_start)}


def _write_profiles(found: dict[str, Any]) -> str:
    lines = ["# Profiles (python bench/run.py --profile)", ""]
    spawn = found["spawn_cost"]
    lines.append("Sandbox.run('return 1') median: warm supply "
                 f"{_ms(spawn['warm=2']['median_s'])}, no warm supply (fork per run) "
                 f"{_ms(spawn['warm=0']['median_s'])}.")
    lines += ["", "## Worker start, child side (phases)", ""]
    for phase, seconds in found["worker_start"]["phases"].items():
        lines.append(f"- {phase}: {_ms(seconds)}")
    lines += ["", "```", found["worker_start"]["profile"].strip(), "```"]
    for title, text in found["dispatch"].items():
        lines += ["", f"## {title}", "", "```", text.strip(), "```"]
    return "\n".join(lines) + "\n"


# --- output ---------------------------------------------------------------------------------------

def _ms(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} us"
    return f"{seconds * 1e3:.2f} ms" if seconds < 10 else f"{seconds:.1f} s"


def _cell_text(cell: Any) -> str:
    if not isinstance(cell, dict):
        return "-"
    if "na" in cell:
        return "n/a"
    if "failed" in cell:
        return "failed"
    return _ms(cell["median_s"])


def machine() -> dict[str, Any]:
    """CPU model, cores, Python and package versions."""
    model = platform.processor() or "unknown"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            model = next(line.split(":", 1)[1].strip() for line in handle if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    versions = {}
    for package in ("codemode", "smolagents", "pydantic-monty", "RestrictedPython", "anyio"):
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = None
    return {"cpu": model, "cores": os.cpu_count(), "python": platform.python_version(),
            "implementation": platform.python_implementation(), "platform": platform.platform(),
            "packages": versions, "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def markdown(results: dict[str, Any]) -> str:
    """The results as Markdown tables."""
    table, derived, info = results["peers"], results["derived"], results["machine"]
    peers = list(table)
    lines = [f"# Benchmark results ({'quick' if results['quick'] else 'full'} run, {info['date_utc']})", "",
             f"Machine: {info['cpu']}, {info['cores']} cores, {info['implementation']} {info['python']}, "
             f"{info['platform']}. Load average (1 min) before/after the run: "
             f"{results['load_average_before'][0]:.2f} / {results['load_average_after'][0]:.2f}. Packages: "
             + ", ".join(f"{k} {v}" for k, v in info["packages"].items()) + ".", "",
             "## Median wall time per run (program text in, checked value out)", "",
             "| workload | " + " | ".join(peers) + " |", "|---" * (len(peers) + 1) + "|"]
    notes: dict[str, str] = {}
    for workload in WORKLOADS:
        cells = []
        for peer in peers:
            cell = table[peer].get(workload.name)
            text = _cell_text(cell)
            if isinstance(cell, dict) and ("na" in cell or "failed" in cell):
                key = f"{peer} / {workload.name}"
                notes[key] = cell.get("na") or cell.get("failed") or ""
            cells.append(text)
        lines.append(f"| {workload.name} | " + " | ".join(cells) + " |")
    if notes:
        lines += ["", "n/a and failures:", ""] + [f"- {key}: {reason}" for key, reason in notes.items()]
    lines += ["", "## Compute: net time (minus the peer's own `return 1`) and ratio to CPython", "",
              "| workload | " + " | ".join(peers) + " |", "|---" * (len(peers) + 1) + "|"]
    compute = derived["compute"]
    for workload in COMPUTE:
        cells = []
        for peer in peers:
            net = compute[peer]["net_s"].get(workload.name)
            ratio = compute[peer]["ratio_to_cpython"].get(workload.name)
            if net is None:
                cells.append("-")
            else:  # (no ratio when the CPython baseline was left out with --only)
                cells.append(_ms(net) if ratio is None else f"{_ms(net)} ({ratio:.2f}x)")
        lines.append(f"| {workload.name} | " + " | ".join(cells) + " |")
    lines.append("| **geomean ratio** | " + " | ".join(
        "-" if (g := compute[p]["geomean_ratio_to_cpython"]) is None else f"**{g:.2f}x**" for p in peers)
        + " |")
    lines += ["", "## Host calls", "", "| peer | per sequential call | 100 x 50 ms gather | realistic |",
              "|---|---|---|---|"]
    for peer in peers:
        lines.append(f"| {peer} | {_ms(derived['per_call_s'].get(peer))} | "
                     f"{_cell_text(table[peer].get('parallel-50ms'))} | "
                     f"{_cell_text(table[peer].get('realistic'))} |")
    ping, aping = results.get("ping_pong"), results.get("async_ping_pong")
    if ping and aping:
        lines += ["", "Floor of a cross-process round trip on this machine (echo of one call-sized frame "
                      f"over a Unix socketpair, n={ping['n']}): blocking sockets median "
                      f"{_ms(ping['median_s'])} "
                      f"(p90 {_ms(ping['p90_s'])}); asyncio on both sides median {_ms(aping['median_s'])} "
                      f"(p90 {_ms(aping['p90_s'])})."]
    cold = results.get("cold", {})
    if cold:
        lines += ["", "## Cold start (fresh process: start Python, import, start the peer, run `return 1`)",
                  "",
                  "| peer | to first result: median | p10 | p90 | to process exit: median | p90 | n |",
                  "|---|---|---|---|---|---|---|"]
        for name, cell in cold.items():
            if "median_s" in cell:
                lines.append(f"| {name} | {_ms(cell['median_s'])} | {_ms(cell['p10_s'])} | "
                             f"{_ms(cell['p90_s'])} | {_ms(cell['exit']['median_s'])} | "
                             f"{_ms(cell['exit']['p90_s'])} | {cell['n']} |")
            else:
                lines.append(f"| {name} | failed | | | | | |")
    warm = results.get("warm_latency")
    if warm:
        spawn = cold.get("python -c", {}).get("median_s")
        lines += ["", "## Warm latency (consecutive `return 1` runs of one peer, warm supply refilled)", "",
                  "| peer | median | p10 | p90 | n | median / `python -c` spawn |",
                  "|---|---|---|---|---|---|"]
        for name, cell in warm.items():
            ratio = f"{cell['median_s'] / spawn:.3f}" if spawn else "-"
            lines.append(f"| {name} | {_ms(cell['median_s'])} | {_ms(cell['p10_s'])} | "
                         f"{_ms(cell['p90_s'])} | {cell['n']} | {ratio} |")
    scheduler = results.get("scheduler")
    if isinstance(scheduler, dict) and "turn" in scheduler:
        lines += ["", "## Scheduler overhead (bench/scheduler_overhead.py, per no-op call)", "",
                  f"body {_ms(scheduler['body'])}, pipeline {_ms(scheduler['pipeline'])}, turn "
                  f"{_ms(scheduler['turn'])}, sub-lane {_ms(scheduler['sub_lane'])}; turn / pipeline "
                  f"{scheduler['turn_over_pipeline']:.2f}x (target <= 5x)."]
    lines += ["", "## Targets", "", "| target | measured | limit | met | how |", "|---|---|---|---|---|"]
    for target in derived["targets"]:
        value, limit = target["value"], target["limit"]
        shown = (lambda v: "-" if v is None else f"{v:.2f}x") if target["unit"] == "x" else _ms
        met = {True: "yes", False: "**no**", None: "-"}[target["met"]]
        lines.append(f"| {target['target']} | {shown(value)} | {shown(limit)} | {met} | {target['detail']} |")
    return "\n".join(lines) + "\n"


def _freeze_host_heap() -> None:
    """Import every peer, then move the host's objects out of the cyclic GC's reach (``gc.freeze``).

    The in-process peers run in this benchmark process, whose heap holds every peer's modules; without
    this, each garbage collection a compute workload triggers would scan all of them, which a fresh
    ``python`` process (and a sandbox worker, forked from a frozen template) never pays for.
    """
    import pydantic_monty  # noqa: F401
    import RestrictedPython  # noqa: F401
    import smolagents.local_python_executor  # noqa: F401

    gc.collect()
    gc.freeze()


async def _main(options: argparse.Namespace) -> dict[str, Any]:
    settings = Settings(options.quick)
    only = set(options.only.split(",")) if options.only else None
    started = time.perf_counter()
    _freeze_host_heap()
    load_before = os.getloadavg()
    table = await measure_peers(settings, only)
    latency_peers = {"codemode-sandbox", "codemode-run_code"}
    warm = await measure_warm_latency(settings) if not only or latency_peers & only else None
    scheduler = await measure_scheduler(options.quick) if not only else None
    results: dict[str, Any] = {"quick": options.quick, "machine": machine(), "peers": table,
                               "warm_latency": warm, "derived": derive(table, warm),
                               "scheduler": scheduler, "load_average_before": load_before}
    results["ping_pong"] = await anyio.to_thread.run_sync(measure_ping_pong, 2000)
    results["async_ping_pong"] = await anyio.to_thread.run_sync(measure_async_ping_pong, 2000)
    results["cold"] = await anyio.to_thread.run_sync(measure_cold, settings, only)
    results["load_average_after"] = os.getloadavg()
    results["seconds"] = time.perf_counter() - started
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (well under a minute)")
    parser.add_argument("--only", help="comma-separated peer names")
    parser.add_argument("--no-write", action="store_true", help="print, do not write bench/results/")
    parser.add_argument("--profile", action="store_true",
                        help="profile the dispatch path and the worker start (writes results/profile.md)")
    options = parser.parse_args()
    if options.profile:
        text = _write_profiles(anyio.run(_profiles))
        print(text)
        if not options.no_write:
            RESULTS.mkdir(parents=True, exist_ok=True)
            (RESULTS / "profile.md").write_text(text)
        return
    results = anyio.run(_main, options)
    text = markdown(results)
    print(text)
    if not options.no_write:
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / "latest.json").write_text(json.dumps(results, indent=2, default=str) + "\n")
        (RESULTS / "latest.md").write_text(text)
        print(f"wrote {RESULTS / 'latest.json'} and {RESULTS / 'latest.md'} in {results['seconds']:.0f} s",
              file=sys.stderr)


if __name__ == "__main__":
    main()
