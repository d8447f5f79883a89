"""The ordered lane: the one scheduling core behind model turns and ``run_code`` child calls.

A lane receives *jobs* in submission order and drives each through three stages:

* ``start`` (ordered): the job's ordered preamble, e.g. the ``tool/call`` event and the pipeline's prepare
  stage. Starts happen strictly in submission order, one at a time, awaited by the lane's driver.
* ``run`` (overlapping): the job's dispatch stage (around-execute wrappers and the tool body). Only this
  stage overlaps between jobs, in a rolling pool of at most ``max_parallel`` running bodies.
* ``commit`` (ordered): post-execute, finish, events and result delivery, strictly in submission order
  over the contiguous prefix of settled jobs, even when bodies finish out of order.

Right before a job starts, the lane asks for its :class:`Footprint` (re-classification: the answer may
differ from what it would have been at submission). An exclusive footprint is a barrier: it starts only
when every earlier job has committed and nothing else starts until it has committed. Other footprints
start while the pool has room and they do not conflict with a started, uncommitted job (resource claims:
a write conflicts with any read or write of the same resource).

Commits always come before starts: nothing starts while a commit is in progress, so a slow post-execute
of job *k* delays the start of later jobs, exactly as in the reference schedulers. The job at the head of
the lane is committed by the worker that ran it (saving the hand-back to the driver); every other commit
is the driver's.

Stopping: when the lane's cancellation signal fires, :meth:`OrderedLane.close` is called, or a job's stage
raises, the lane stops starting. Started jobs are still driven to their commit (their bodies see the
cancellation through their own signals); afterwards every job that never started is *abandoned* in
submission order (for a model turn that records a synthetic call/result pair; for ``run_code`` it rejects
the waiting program call). A stage that raises is an internal failure: the lane waits for running bodies
and re-raises the first failure without committing or abandoning anything more.

The lane owns no threads and no fire-and-forget tasks: ``run`` stages execute in a small pool of worker
tasks (at most ``max_parallel``, spawned on demand and reused, since spawning a task per call would
dominate the cost of cheap calls) inside a task group that lives in :meth:`OrderedLane.drive`, which
returns only after every worker has finished.
"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass
from typing import Protocol

import anyio
import anyio.abc

from ._oneshot import OneShot

__all__ = (
    "EXCLUSIVE",
    "NOTHING",
    "PARALLEL",
    "CancelLike",
    "Footprint",
    "LaneJob",
    "OrderedLane",
)

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Footprint:
    """What a started job may touch until it commits; the lane overlaps only non-conflicting footprints.

    ``exclusive`` conflicts with everything. Otherwise ``reads`` is a set of resource keys or ``None``
    for "may read anything" (a concurrency-safe tool that declares no claims), and ``writes`` a set of
    resource keys. Two footprints conflict when either writes something the other reads or writes.
    """

    exclusive: bool = False
    reads: frozenset[str] | None = frozenset()
    writes: frozenset[str] = frozenset()

    def conflicts_with(self, other: Footprint) -> bool:
        """Whether the two jobs must not overlap."""
        if self.exclusive or other.exclusive:
            return True
        return _writes_hit(self.writes, other) or _writes_hit(other.writes, self)


def _writes_hit(writes: frozenset[str], other: Footprint) -> bool:
    if not writes:
        return False
    if other.reads is None:
        return True
    return not writes.isdisjoint(other.reads) or not writes.isdisjoint(other.writes)


#: A barrier: runs alone, after everything before it committed.
EXCLUSIVE = Footprint(exclusive=True)
#: A concurrency-safe call without claims: overlaps with anything that writes nothing.
PARALLEL = Footprint(reads=None)
#: A job that touches nothing (e.g. a call already settled before dispatch).
NOTHING = Footprint()


class CancelLike(Protocol):
    """The part of a cancellation signal the lane needs (``codemode.runtime.CancelSignal`` satisfies it)."""

    @property
    def cancelled(self) -> bool: ...

    @property
    def reason(self) -> str | None: ...


class LaneJob(Protocol):
    """One unit of work in a lane. The lane calls each method at most once, except ``footprint``."""

    def footprint(self) -> Footprint:
        """Classify the job now; called right before a possible start (possibly more than once)."""
        ...

    async def start(self) -> bool:
        """Run the ordered preamble; return True when ``run`` must follow, False when already settled."""
        ...

    async def run(self) -> None:
        """Run the overlapping stage (dispatch)."""
        ...

    async def commit(self) -> None:
        """Run the ordered epilogue (post-execute, finish, events, delivery)."""
        ...

    async def abandon(self, reason: str) -> None:
        """The job was never started and never will be; ``reason`` says why the lane stopped."""
        ...


@dataclass(slots=True, eq=False)
class _Slot:
    job: LaneJob
    footprint: Footprint
    running: bool
    inline: bool = False  # run by its submitter (run_inline): the driver never commits it


class OrderedLane:
    """Start in order, overlap only ``run``, commit in order; see the module docstring for the contract.

    ``max_parallel`` bounds the number of jobs in their ``run`` stage at once (1 = fully serial).
    ``cancel`` is the caller's signal: once it reads cancelled the lane stops starting.
    """

    def __init__(self, *, max_parallel: int, cancel: CancelLike | None = None) -> None:
        if type(max_parallel) is not int or max_parallel < 1:
            raise ValueError(f"max_parallel must be a positive integer, got {max_parallel!r}")
        self._max_parallel = max_parallel
        self._cancel = cancel
        self._pending: deque[LaneJob] = deque()
        self._started: deque[_Slot] = deque()
        self._running = 0
        self._exclusive_active = False
        self._closed_reason: str | None = None
        self._failure: BaseException | None = None
        self._wake = OneShot()
        self._peak_running = 0
        self._ready: deque[_Slot] = deque()  # started jobs waiting for a worker
        self._idle: list[OneShot] = []  # one wake-up per idle worker
        self._workers = 0
        self._draining = False
        self._writers = 0  # started, uncommitted jobs whose footprint writes something
        self._committing = False  # a commit is in progress (by the driver or by a worker)
        self._starting = False  # an inline job is in its start stage (starts are one at a time)

    @property
    def peak_running(self) -> int:
        """The largest number of jobs seen in their ``run`` stage at the same time."""
        return self._peak_running

    @property
    def stop_reason(self) -> str | None:
        """Why the lane stopped starting (``None`` while it still starts jobs)."""
        if self._closed_reason is not None:
            return self._closed_reason
        if self._cancel is not None and self._cancel.cancelled:
            return self._cancel.reason or "cancelled"
        return None

    def submit(self, job: LaneJob) -> None:
        """Queue ``job`` behind every job submitted before it."""
        self._pending.append(job)
        self.notify()

    @property
    def failure(self) -> BaseException | None:
        """The internal failure that stopped the lane, if any (``drive`` re-raises it)."""
        return self._failure

    def idle(self) -> bool:
        """Nothing is pending, started or committing, and the lane still starts jobs."""
        return (not self._pending and not self._started and not self._committing
                and self._failure is None and not self._draining and self.stop_reason is None)

    async def run_inline(self, job: LaneJob) -> None:
        """Drive ``job`` through start, run and commit in the calling task; only while :meth:`idle`.

        The job takes its place at the head of the lane like any started job: later submissions
        queue behind it, the driver may start non-conflicting ones while its body runs, and they
        commit after it. The caller must shield this call (its stages see the job's own signal, not
        the caller's cancellation). An internal failure of a stage stops the lane (see
        :attr:`failure`) and is not raised here.
        """
        if not self.idle():
            raise RuntimeError("run_inline needs an idle lane")
        footprint = _classify(job)
        slot = _Slot(job, footprint, running=True, inline=True)
        self._started.append(slot)
        self._exclusive_active = footprint.exclusive
        if footprint.writes:
            self._writers += 1
        self._running += 1
        self._peak_running = max(self._peak_running, self._running)
        try:
            self._starting = True
            try:
                needs_run = await job.start()
            finally:
                self._starting = False
                self.notify()
            if needs_run:
                await job.run()
        except Exception as exc:  # an internal failure of a stage
            self._fail(exc)
            return
        finally:
            slot.running = False
            self._running -= 1
        await self._commit_head()
        self.notify()

    def close(self, reason: str) -> None:
        """Stop starting jobs; started jobs still commit, the rest are abandoned with ``reason``."""
        if self._closed_reason is None:
            self._closed_reason = reason
        self.notify()

    def notify(self) -> None:
        """Wake the driver (after a submission, a settle, a cancellation or a close)."""
        self._wake.set()

    async def drive(self, *, until_idle: bool) -> None:
        """Run the lane until it has nothing left to do.

        With ``until_idle`` the driver returns as soon as no job is pending or uncommitted (a model
        turn: every job was submitted beforehand). Without it the driver keeps waiting for submissions
        until :meth:`close` is called (a ``run_code`` run), then drains and abandons.
        """
        async with anyio.create_task_group() as group:
            try:
                await self._loop(group, until_idle=until_idle)
            finally:
                self._draining = True
                self._wake_workers(everyone=True)
        if self._failure is not None:
            raise self._failure
        reason = self.stop_reason or "lane closed"
        while self._pending:
            await self._pending.popleft().abandon(reason)

    async def _loop(self, group: anyio.abc.TaskGroup, *, until_idle: bool) -> None:
        while True:
            if self._failure is not None:
                if self._running == 0:
                    return
            elif (self._started and not self._started[0].running and not self._committing
                  and not self._started[0].inline):
                await self._commit_head()
                continue
            elif self._pending and self.stop_reason is None and await self._try_start(group):
                continue
            elif not self._started and (
                self.stop_reason is not None or (until_idle and not self._pending)
            ):
                return
            await self._wake.wait()
            self._wake = OneShot()

    async def _try_start(self, group: anyio.abc.TaskGroup) -> bool:
        if (self._committing or self._starting or self._exclusive_active
                or self._running >= self._max_parallel):
            return False  # (a commit in progress: commits come before starts; starts are one by one)
        job = self._pending[0]
        footprint = _classify(job)
        if footprint.exclusive:
            if self._started:
                return False
        elif (footprint.writes or self._writers) and any(
                footprint.conflicts_with(slot.footprint) for slot in self._started):
            return False  # (with no writer on either side nothing can conflict: the common fast path)
        self._pending.popleft()
        slot = _Slot(job, footprint, running=False)
        self._started.append(slot)
        self._exclusive_active = footprint.exclusive
        if footprint.writes:
            self._writers += 1
        try:
            needs_run = await job.start()
        except Exception as exc:  # an internal failure of an ordered stage
            self._fail(exc)
            return True
        if needs_run:
            slot.running = True
            self._running += 1
            self._peak_running = max(self._peak_running, self._running)
            self._ready.append(slot)
            if self._idle:
                self._wake_workers(everyone=False)
            else:
                self._workers += 1
                group.start_soon(self._worker)
        return True

    def _wake_workers(self, *, everyone: bool) -> None:
        while self._idle:
            self._idle.pop().set()
            if not everyone:
                return

    async def _worker(self) -> None:
        """Run queued ``run`` stages one after another; park when there is none; exit when draining."""
        try:
            while True:
                while self._ready:
                    await self._run(self._ready.popleft())
                if self._draining:
                    return
                parked = OneShot()
                self._idle.append(parked)
                await parked.wait()
        finally:
            self._workers -= 1

    async def _run(self, slot: _Slot) -> None:
        try:
            await slot.job.run()
        except Exception as exc:
            self._fail(exc)
        except BaseException:
            slot.running = False
            self._running -= 1
            self.notify()
            raise
        slot.running = False
        self._running -= 1
        # The head of the lane commits right here, in its worker: handing it back to the driver would
        # cost two more task switches per call (most of a cheap call's time). Later heads, and heads
        # that settle while a commit is in progress, are the driver's.
        if self._failure is None and not self._committing and self._started and self._started[0] is slot:
            await self._commit_head()
        self.notify()

    async def _commit_head(self) -> None:
        slot = self._started[0]
        self._committing = True
        try:
            await slot.job.commit()
        except Exception as exc:
            self._fail(exc)
            return
        finally:
            self._committing = False
        self._started.popleft()
        if slot.footprint.exclusive:
            self._exclusive_active = False
        if slot.footprint.writes:
            self._writers -= 1

    def _fail(self, exc: Exception) -> None:
        if self._failure is None:
            _log.error("ordered lane stage failed: %r", exc)
            self._failure = exc
        self.notify()


def _classify(job: LaneJob) -> Footprint:
    try:
        footprint = job.footprint()
    except Exception as exc:  # a broken classifier must not break the lane: fall back to a barrier
        _log.warning("lane job classification failed, running it exclusively: %r", exc)
        return EXCLUSIVE
    return footprint if isinstance(footprint, Footprint) else EXCLUSIVE
