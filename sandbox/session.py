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
violation, cancellation, a crash), the session's globals are lost with it; the next run starts a fresh
worker and says so (``RunResult.stats.session_restarted``).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Awaitable, Callable, Sequence
from types import TracebackType

import anyio

from ._isolate import can_grant_limits, grant_run_limits
from ._run import CallTool, CancelLike, CpuWatch, OnLog, execute_run
from .errors import SandboxStartError, SessionClosedError
from .host import WorkerHandle
from .limits import SandboxLimits
from .results import RunError, RunResult, RunStats

__all__ = ("SandboxSession",)


class SandboxSession:
    """One persistent worker and its globals; use with ``async with`` and pass to ``Sandbox.run``."""

    def __init__(self, acquire: Callable[[], Awaitable[WorkerHandle]], limits: SandboxLimits,
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
        async with self._lock:
            if self.closed:
                raise SessionClosedError("this session was closed; open a new one")
            restarted = False
            discarded, self._discarded = self._discarded, None
            if discarded is not None:
                with anyio.CancelScope(shield=True):
                    await discarded.kill_and_reap()
            if self._worker is None or not self._worker.alive:
                restarted = self._had_worker
                try:
                    self._worker = await self._acquire()
                except SandboxStartError as exc:
                    return _start_failed(exc, begun)
                self._had_worker = True
                self.restarts += int(restarted)
            run_limits = limits or self.limits
            granted = "uid" in self._worker.layers and can_grant_limits()
            if granted:  # (the worker is unprivileged: only the host can raise its hard limits)
                used = self._worker.cpu_now()
                if used is not None:
                    grant_run_limits(self._worker.pid, used, run_limits.cpu_seconds,
                                     run_limits.memory_bytes)
            result = await execute_run(self._worker, program=program, tool_names=tool_names,
                                       call_tool=call_tool, limits=run_limits, cancel=cancel,
                                       on_log=on_log, persist=True, started=begun,
                                       session_restarted=restarted, cpu_watch=self._cpu_watch)
        if granted or "rlimits" not in result.stats.isolation:
            return result
        isolation = tuple(layer for layer in result.stats.isolation if layer != "rlimits")
        return dataclasses.replace(result, stats=dataclasses.replace(result.stats, isolation=isolation))


def _start_failed(exc: SandboxStartError, started: float) -> RunResult:
    stats = RunStats(wall_ms=(time.perf_counter() - started) * 1000.0, cpu_ms=None, tool_calls=0,
                     isolation=())
    return RunResult(value=None, has_value=False, logs=(),
                     error=RunError("worker-exit", f"no worker could be started: {exc.message}"), stats=stats)
