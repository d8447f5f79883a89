"""Helpers shared by the reliability tests: resource accounting and event-log invariants.

``Resources.now()`` measures what a run could leak in this (host) process: open descriptors and live
descendant processes (templates, workers, anything they left behind; read from ``/proc``);
``worker_dirs(templates)`` lists the working directories those templates' workers left in the temp
dir. ``event_log_problems(log)`` checks that an agent's log is complete and ordered: every
``tool/call`` has exactly one later ``tool/result`` linked to it, results commit in call order, every
``tool/code-dispatch-start`` has exactly one later ``tool/code-dispatch``, child calls of a run are
numbered ``<root>:code:1..n`` in start order, and all of a run's child events lie between its call and
its result.
"""

from __future__ import annotations

import os
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import anyio

from codemode.runtime import Event

WORKER_DIR_PREFIX = "codemode-worker-"


def _children_by_parent() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", encoding="ascii", errors="replace") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
        children.setdefault(int(fields[1]), []).append(int(name))
    return children


def descendant_pids(root: int | None = None) -> set[int]:
    """Every process below ``root`` (default: this process), zombies included (unreaped is leaked)."""
    tree = _children_by_parent()
    found: set[int] = set()
    stack = [os.getpid() if root is None else root]
    while stack:
        for child in tree.get(stack.pop(), ()):
            if child not in found:
                found.add(child)
                stack.append(child)
    return found


def rss_bytes(pid: int | None = None) -> int:
    """Resident set size of ``pid`` (default: this process) from ``/proc/<pid>/status``."""
    with open(f"/proc/{'self' if pid is None else pid}/status", encoding="ascii") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS line")


def worker_dirs(template_pids: Iterable[int]) -> list[str]:
    """Worker directories of the given templates still in the temp dir (named after their template)."""
    prefixes = tuple(f"{WORKER_DIR_PREFIX}{pid}-" for pid in template_pids)
    names = os.listdir(tempfile.gettempdir())
    return sorted(name for name in names if prefixes and name.startswith(prefixes))


@dataclass(frozen=True)
class Resources:
    """What this process holds at one moment: descriptors and descendant processes.

    Worker directories are checked per template (:func:`worker_dirs`): other test processes on the
    machine make their own in the same temp dir.
    """

    fds: frozenset[int]
    pids: frozenset[int]

    @classmethod
    def now(cls) -> Resources:
        return cls(frozenset(int(fd) for fd in os.listdir("/proc/self/fd")), frozenset(descendant_pids()))

    def leaked_since(self, before: Resources, template_pids: Iterable[int] = ()) -> dict[str, list[Any]]:
        """What exists now that did not before (empty when nothing leaked)."""
        leaks: dict[str, list[Any]] = {
            "fds": sorted(self.fds - before.fds), "pids": sorted(self.pids - before.pids),
            "worker_dirs": worker_dirs(template_pids)}
        return {kind: items for kind, items in leaks.items() if items}


async def wait_until(predicate: Callable[[], object], seconds: float, interval: float = 0.02) -> bool:
    """Poll ``predicate`` until it is true or ``seconds`` pass; return its last truth value."""
    with anyio.move_on_after(seconds):
        while not predicate():  # noqa: ASYNC110 - polling process and log state that has no event
            await anyio.sleep(interval)
    return bool(predicate())


async def settled_leaks(before: Resources, template_pids: Iterable[int] = (),
                        seconds: float = 10.0) -> dict[str, list[Any]]:
    """Leaks (of these templates' workers too) after giving exiting processes ``seconds`` to be reaped."""
    pids = tuple(template_pids)
    await wait_until(lambda: not Resources.now().leaked_since(before, pids), seconds, 0.05)
    return Resources.now().leaked_since(before, pids)


def event_log_problems(events: Iterable[Event]) -> list[str]:
    """Every violation of the pairing and ordering rules in one agent's log (empty when sound)."""
    problems: list[str] = []
    log = list(events)
    for index, event in enumerate(log, start=1):
        if event.seq != index:
            problems.append(f"event {index} has seq {event.seq}")
    calls = {e.seq: e for e in log if e.type == "tool/call"}
    results = [e for e in log if e.type == "tool/result"]
    linked = Counter(e.data["call_seq"] for e in results)
    for seq, call in calls.items():
        if linked[seq] != 1:
            problems.append(f"tool/call {call.data['call_id']} has {linked[seq]} results")
    for result in results:
        linked_call = calls.get(result.data["call_seq"])
        if (linked_call is None or linked_call.seq > result.seq
                or linked_call.data["call_id"] != result.data["call_id"]):
            problems.append(f"tool/result {result.data['call_id']} links to no earlier matching call")
    result_order = [r.data["call_seq"] for r in results]
    if result_order != sorted(result_order):
        problems.append(f"results committed out of call order: {result_order}")
    problems += _dispatch_problems(log, calls, results)
    return problems


def _dispatch_problems(log: list[Event], calls: dict[int, Event], results: list[Event]) -> list[str]:
    problems: list[str] = []
    starts = [e for e in log if e.type == "tool/code-dispatch-start"]
    ends = [e for e in log if e.type == "tool/code-dispatch"]
    start_of = {e.data["sub_call_id"]: e for e in starts}
    if len(start_of) != len(starts):
        problems.append("a sub_call_id started twice")
    ended = Counter(e.data["sub_call_id"] for e in ends)
    for sub_id in start_of:
        if ended[sub_id] != 1:
            problems.append(f"child {sub_id} has {ended[sub_id]} ends")
    for end in ends:
        begun = start_of.get(end.data["sub_call_id"])
        if begun is None or begun.seq > end.seq:
            problems.append(f"child {end.data['sub_call_id']} ended without an earlier start")
    by_root: dict[str, list[str]] = {}
    for start in starts:
        by_root.setdefault(start.data["root_call_id"], []).append(start.data["sub_call_id"])
    window = {c.data["call_id"]: (c.seq, r.seq) for r in results if (c := calls.get(r.data["call_seq"]))}
    for root, sub_ids in by_root.items():
        expected = [f"{root}:code:{n}" for n in range(1, len(sub_ids) + 1)]
        if sub_ids != expected:
            problems.append(f"children of {root} numbered {sub_ids}, expected {expected}")
        if root in window:
            low, high = window[root]
            outside = [e.seq for e in starts + ends if e.data["root_call_id"] == root
                       and not low < e.seq < high]
            if outside:
                problems.append(f"children of {root} logged outside its call/result: {outside}")
    return problems
