"""Persistent sessions: successive programs share one worker process and its globals, like a notebook.

A session is opt-in (:meth:`codemode.sandbox.Sandbox.open_session`). Its worker is taken from the warm supply
at the first run and kept alive between runs; it is still a separate, isolated process (other runs and
other sessions have their own), and every run gets the same per-run budgets. Runs of one session are
serialised. Each run's CPU and memory budgets are hard limits, as in a one-shot worker: the host raises
the worker's hard limits to the next run's budgets (it alone may: it needs ``CAP_SYS_RESOURCE``), and the
worker lowers them to exactly those. On a host without that capability nobody can raise them: the
worker's memory hard limit stays at its first run's budget (a later run asking for more fails with
``memory-limit`` and says why), its CPU hard limit stays open (the host's CPU watch still ends each run
at its budget) and the session's runs do not list ``rlimits`` in ``stats.isolation``. When a run ends
in a way that kills the worker (timeout, CPU or memory exhaustion, protocol
violation, cancellation, a crash), the session's globals are lost with it; so they are when the worker dies
between runs (killed from outside, or with its template). The next run starts a fresh worker and says so
(``RunResult.stats.session_restarted``). A run whose worker turns out dead before the run reached it (no
output, no tool call) runs once more on a fresh worker, also reported as a restart.

A run's wall-clock budget covers its wait for the session (another run of it in progress) and for a worker.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Awaitable, Callable, Sequence
from types import TracebackType

import anyio

from ._isolate import can_grant_limits, grant_run_limits
from ._run import CallTool, CancelLike, CpuWatch, OnLog, execute_run
from ._supply import WorkerUnavailable
from .errors import SessionClosedError
from .host import WorkerHandle
from .limits import SandboxLimits
from .results import ErrorKind, RunError, RunResult, RunStats

__all__ = ("Acquire", "SandboxSession", "died_unseen", "failed_result")

#: The pool's worker source: ``acquire(limits, deadline, fresh, cancel)`` (see ``Sandbox._acquire``).
Acquire = Callable[[SandboxLimits, float, bool, "CancelLike | None"], Awaitable[WorkerHandle]]


class SandboxSession:
    """One persistent worker and its globals; use with ``async with`` and pass to ``Sandbox.run``."""

    def __init__(self, acquire: Acquire, limits: SandboxLimits,
                 on_close: Callable[[SandboxSession], None], cpu_watch: CpuWatch | None = None) -> None:
        self._acquire = acquire
        self._cpu_watch = cpu_watch
        self.limits = limits
        self._on_close = on_close
        self._worker: WorkerHandle | None = None
        #: A worker whose channel lost its framing (see prewake): killed before the next run.
        self._discarded: WorkerHandle | None = None
        self._had_worker = False
        self._lock = anyio.Lock()
        self.closed = False
        self.restarts = 0

    async def __aenter__(self) -> SandboxSession:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.aclose()

    @property
    def worker_pid(self) -> int | None:
        """Pid of the session's current worker, if it has one alive."""
        worker = self._worker
        return worker.pid if worker is not None and worker.alive else None

    def prewake(self) -> None:
        """Wake the session's worker ahead of its next run, as :meth:`codemode.sandbox.Sandbox.prewake` does.

        Never blocks; does nothing while a run is in flight or before the first run. Should the
        frame go out only in part (never seen: the channel is empty between runs), the worker is
        given up and the next run starts a fresh one (``session_restarted``).
        """
        worker = self._worker
        if worker is None or not worker.alive or self._lock.locked():
            return
        if not worker.wake():
            self._worker, self._discarded = None, worker

    async def aclose(self) -> None:
        """Kill and reap the session's worker; later runs with this session raise SessionClosedError."""
        self.closed = True
        self._on_close(self)
        worker, self._worker = self._worker, None
        discarded, self._discarded = self._discarded, None
        with anyio.CancelScope(shield=True):
            for handle in (worker, discarded):
                if handle is not None:
                    await handle.kill_and_reap()

    async def run(self, program: str, *, tool_names: Sequence[str], call_tool: CallTool,
                  limits: SandboxLimits | None, cancel: CancelLike | None, on_log: OnLog | None,
                  started: float | None = None) -> RunResult:
        """Run one program in the session's worker (called by ``Sandbox.run(..., session=...)``)."""
        begun = time.perf_counter() if started is None else started
        run_limits = limits or self.limits
        deadline = anyio.current_time() + run_limits.wall_seconds
        if self._lock.locked():  # (another run of this session is in flight: wait within the budget)
            with anyio.CancelScope(deadline=deadline) as scope:
                await self._lock.acquire()
            if scope.cancelled_caught:  # (a cancelled acquire does not take the lock)
                return failed_result("timeout", f"the run's wall-clock budget of {run_limits.wall_seconds:g} "
                                                "s (wall_seconds) ran out while it waited for the session's "
                                                "previous run; the program did not run", begun)
        else:
            await self._lock.acquire()
        try:
            return await self._run_locked(program, tool_names, call_tool, run_limits, cancel, on_log, begun,
                                          deadline)
        finally:
            self._lock.release()

    async def _run_locked(self, program: str, tool_names: Sequence[str], call_tool: CallTool,
                          limits: SandboxLimits, cancel: CancelLike | None, on_log: OnLog | None,
                          begun: float, deadline: float) -> RunResult:
        if self.closed:
            raise SessionClosedError("this session was closed; open a new one")
        restarted = False
        discarded, self._discarded = self._discarded, None
        if discarded is not None:
            with anyio.CancelScope(shield=True):
                await discarded.kill_and_reap()
        for attempt in (1, 2):
            worker = self._worker
            if worker is not None and not (worker.alive and worker.channel_open()):
                self._worker = None  # died since its last run (killed, or with its template)
                with anyio.CancelScope(shield=True):
                    await worker.kill_and_reap()
            if self._worker is None:
                restarted = restarted or self._had_worker
                try:
                    self._worker = await self._acquire(limits, deadline, attempt == 2, cancel)
                except WorkerUnavailable as exc:
                    return failed_result(exc.kind, exc.message, begun)
                self._had_worker = True
            granted = "uid" in self._worker.layers and can_grant_limits()
            if granted:  # (the worker is unprivileged: only the host can raise its hard limits)
                used = self._worker.cpu_now()
                if used is not None:
                    grant_run_limits(self._worker.pid, used, limits.cpu_seconds, limits.memory_bytes)
            result = await execute_run(self._worker, program=program, tool_names=tool_names,
                                       call_tool=call_tool, limits=limits, cancel=cancel, on_log=on_log,
                                       persist=True, started=begun, session_restarted=restarted,
                                       cpu_watch=self._cpu_watch, deadline=deadline)
            if attempt == 2 or not died_unseen(result, cancel):
                break
            restarted = True  # (the worker died before the run reached it: its globals are gone too)
        self.restarts += int(restarted)
        if granted or "rlimits" not in result.stats.isolation:
            return result
        isolation = tuple(layer for layer in result.stats.isolation if layer != "rlimits")
        return dataclasses.replace(result, stats=dataclasses.replace(result.stats, isolation=isolation))


def died_unseen(result: RunResult, cancel: CancelLike | None) -> bool:
    """The worker died before leaving any trace of the run (no output, no tool call).

    A warm worker can die unnoticed before the run reaches it; nothing observable happened, so the run
    may go once more to a fresh worker. A program that really kills its worker fails the same way twice.
    """
    error = result.error
    return (error is not None and error.kind == "worker-exit" and not result.logs
            and result.stats.tool_calls == 0 and not (cancel is not None and cancel.cancelled))


def failed_result(kind: ErrorKind, message: str, started: float) -> RunResult:
    """A run that failed before it had a worker."""
    stats = RunStats(wall_ms=(time.perf_counter() - started) * 1000.0, cpu_ms=None, tool_calls=0,
                     isolation=())
    return RunResult(value=None, has_value=False, logs=(), error=RunError(kind, message), stats=stats)
