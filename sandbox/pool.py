"""The public host-side object: :class:`Sandbox`, an async context manager owning a warm worker supply.

Entering a sandbox starts one template process (:mod:`codemode.sandbox._template`) and keeps ``warm`` workers
forked and ready ahead of demand, so a run never waits for a fork or for the isolation set-up. Each
one-shot run takes a fresh worker, which exits after its ``done`` frame; nothing survives from one run
to the next. Runs are concurrency-safe: every run has its own worker. A persistent session
(:meth:`Sandbox.open_session`) keeps one worker and its globals between runs.

Leaving the sandbox closes its sessions, kills every worker (the template reaps them and removes their
working directories) and reaps the template.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterable, Sequence
from types import TracebackType
from typing import Final, Literal

import anyio
import anyio.abc

from ._isolate import BASE_LAYERS, OPTIONAL_LAYERS, TEMPLATE_LAYERS
from ._run import CallTool, CancelLike, CpuWatch, OnLog, execute_run
from .calls import CooperativeCallTool
from .errors import SandboxClosedError, SandboxStartError, SandboxUsageError
from .host import DEFAULT_EXECUTOR, TemplateProcess, WorkerHandle
from .limits import DEFAULT_LIMITS, SandboxLimits
from .results import ErrorKind, RunError, RunResult, RunStats
from .session import SandboxSession

__all__ = ("Sandbox",)

_RESPAWN_PAUSE: Final = 0.05
_RETIRE_GRACE: Final = 0.25
_REFILL_SETTLE: Final = 0.01


class Sandbox:
    """Runs programs in isolated, resource-limited worker processes.

    ``limits`` are the default budgets of every run (a run may pass its own). ``warm`` workers are kept
    forked and ready. ``executor`` names the module the workers run programs with (it must define
    ``compile_program`` and ``run_program``; the default is :mod:`codemode.sandbox.interpreter`). ``layers``
    restricts the optional isolation layers to attempt (default: all of them, see
    :data:`~codemode.sandbox.ISOLATION_LAYERS`); the layers actually active are reported per run
    (``RunResult.stats.isolation``). ``require`` names layers every worker must have, or ``"all"`` for
    every layer attempted: the sandbox then fails closed, with :class:`SandboxIsolationError` naming
    what is missing, when it starts (its first worker is checked before ``async with`` enters) and,
    should a later worker come up without one, in the run that needed it (kind ``worker-exit``).
    """

    def __init__(self, limits: SandboxLimits | None = None, *, warm: int = 2,
                 executor: str = DEFAULT_EXECUTOR, layers: Iterable[str] | None = None,
                 require: Iterable[str] | Literal["all"] | None = None) -> None:
        if limits is not None and not isinstance(limits, SandboxLimits):
            raise SandboxUsageError("limits must be a SandboxLimits value")
        if type(warm) is not int or warm < 0:
            raise SandboxUsageError("warm must be a non-negative int")
        chosen = OPTIONAL_LAYERS if layers is None else frozenset(layers)
        if unknown := sorted(chosen - OPTIONAL_LAYERS):
            raise SandboxUsageError(f"unknown isolation layers {unknown}; known: {sorted(OPTIONAL_LAYERS)}")
        self.limits = limits or DEFAULT_LIMITS
        self._warm = warm
        self._layers = chosen
        self._template = TemplateProcess(executor, chosen & TEMPLATE_LAYERS)
        self._template.required = _required_layers(require, chosen)
        self._ready: list[WorkerHandle] = []
        self._starting = 0
        self._need = anyio.Event()
        self._supplied = anyio.Event()
        self._active = 0
        #: Set when the last run in flight ends; made by the refill only when it has to wait for that.
        self._quiet: anyio.Event | None = None
        self._quiet_since = time.monotonic()
        self._sessions: set[SandboxSession] = set()
        self._cpu_watch = CpuWatch()
        self._stack: contextlib.AsyncExitStack | None = None
        self._task_group: anyio.abc.TaskGroup | None = None
        self._open = False

    # --- lifecycle ---------------------------------------------------------------------------
    async def __aenter__(self) -> Sandbox:
        if self._stack is not None:
            raise SandboxUsageError("a Sandbox can be entered only once")
        stack = contextlib.AsyncExitStack()
        self._stack = stack
        self._task_group = await stack.enter_async_context(anyio.create_task_group())
        try:
            await self._template.start(self._task_group)
        except BaseException:
            self._task_group.cancel_scope.cancel()
            await stack.aclose()
            raise
        if self._template.required:  # fail closed now, not at the first run
            try:
                self._ready.append(await self._template.spawn(self._layers))
            except BaseException:
                with anyio.CancelScope(shield=True):
                    await self._template.aclose()
                self._task_group.cancel_scope.cancel()
                await stack.aclose()
                raise
        self._open = True
        self._retired_in, self._retired_out = anyio.create_memory_object_stream[WorkerHandle](1024)
        self._task_group.start_soon(self._refill)
        self._task_group.start_soon(self._reap_retired)
        self._task_group.start_soon(self._cpu_watch.serve)
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close sessions, kill every worker, reap the template (idempotent)."""
        if self._stack is None or not self._open:
            return
        self._open = False
        self._retired_in.close()
        with anyio.CancelScope(shield=True):
            for session in list(self._sessions):
                await session.aclose()
            for worker in self._ready:
                await worker.kill()
            self._ready.clear()
            for worker in self._template.live_workers:
                await worker.kill()
            await self._template.aclose()
        assert self._task_group is not None
        self._task_group.cancel_scope.cancel()
        await self._stack.aclose()

    @property
    def template_pid(self) -> int | None:
        """Pid of the template process (None before the sandbox is entered)."""
        return self._template.pid

    @property
    def live_worker_pids(self) -> list[int]:
        """Pids of workers not yet reaped (warm, running or in a session)."""
        return [worker.pid for worker in self._template.live_workers]

    # --- the warm supply ---------------------------------------------------------------------
    async def _refill(self) -> None:
        """Keep ``warm`` workers ready; fork replacements while no run is in flight.

        Forking and isolating a worker costs a few milliseconds of CPU; doing it while a run is in
        flight would steal that CPU from the run. So replacements wait until no run has been in flight
        for :data:`_REFILL_SETTLE` (whoever awaited the last run gets to use its result first: the
        template's fork would otherwise preempt it), unless the supply is empty (then the next run
        would have to wait for a fork anyway).
        """
        while self._open:
            while self._open and len(self._ready) + self._starting < self._warm:
                if self._ready:
                    if self._active:
                        if self._quiet is None:
                            self._quiet = anyio.Event()
                        await self._quiet.wait()
                        continue
                    settle = self._quiet_since + _REFILL_SETTLE - time.monotonic()
                    if settle > 0:
                        await anyio.sleep(settle)
                        continue
                self._starting += 1
                try:
                    worker = await self._template.spawn(self._layers)
                except SandboxStartError:
                    if not self._template.running:
                        return  # runs will report that no worker could be started
                    await anyio.sleep(_RESPAWN_PAUSE)
                    continue
                finally:
                    self._starting -= 1
                self._ready.append(worker)
                self._supplied.set()
                self._supplied = anyio.Event()
            await self._need.wait()
            self._need = anyio.Event()

    def _retire(self, worker: WorkerHandle) -> bool:
        """Hand a worker that sent ``done`` to the reaper; False if the reaper cannot take it."""
        try:
            self._retired_in.send_nowait(worker)
        except (anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError):
            return False
        return True

    async def _reap_retired(self) -> None:
        """Kill retired workers that have not exited by themselves after a short grace period."""
        async with self._retired_out:
            async for worker in self._retired_out:
                with anyio.move_on_after(_RETIRE_GRACE):
                    await worker.exited.wait()
                await worker.kill()
                worker.close_channel()

    async def wait_warm(self) -> None:
        """Wait until the warm supply is full (benchmarks use this to measure warm runs)."""
        while self._open and len(self._ready) < self._warm:
            await self._supplied.wait()

    def prewake(self) -> None:
        """Tell the warm worker the next run will take that a run is coming (cheap; never blocks).

        A worker that has slept for a while sits on an idle CPU, and waking that CPU costs a few
        hundred microseconds on a virtual machine. Called a little ahead of :meth:`run` (say, while the
        caller still checks the call), the wake-up overlaps the caller's own work.
        """
        if not self._ready:
            return
        worker = self._ready[0]
        if not worker.wake():  # (framing lost: the worker is given up)
            self._ready.remove(worker)
            self._need.set()
            if not self._retire(worker):
                worker.close_channel()

    async def _acquire(self) -> WorkerHandle:
        if not self._open:
            raise SandboxClosedError("the sandbox is closed; use it inside 'async with Sandbox()'")
        self._need.set()
        while self._ready:
            worker = self._ready.pop(0)
            if worker.alive and _channel_open(worker):
                return worker
            await worker.kill()  # died while warm (the template may not have reported it yet)
            worker.close_channel()
        return await self._template.spawn(self._layers)

    # --- runs ------------------------------------------------------------------------------
    def open_session(self, limits: SandboxLimits | None = None) -> SandboxSession:
        """A persistent session: successive runs share one worker and its globals (``async with``)."""
        if not self._open:
            raise SandboxClosedError("the sandbox is closed; open sessions inside 'async with Sandbox()'")
        if limits is not None and not isinstance(limits, SandboxLimits):
            raise SandboxUsageError("limits must be a SandboxLimits value")
        session = SandboxSession(self._acquire, limits or self.limits, self._sessions.discard,
                                 self._cpu_watch)
        self._sessions.add(session)
        return session

    async def run(self, program: str, *, tool_names: Sequence[str], call_tool: CallTool,
                  limits: SandboxLimits | None = None, cancel: CancelLike | None = None,
                  on_log: OnLog | None = None, session: SandboxSession | None = None) -> RunResult:
        """Run one program in a fresh worker (or in ``session``'s worker) and return its result.

        Never raises for what the program does; raises :class:`SandboxUsageError` for bad arguments
        and :class:`SandboxClosedError` outside the ``async with`` block. An anyio cancellation of
        the caller kills and reaps the worker, then propagates.
        """
        started = time.perf_counter()
        names = _check_arguments(program, tool_names, call_tool, limits, cancel, on_log)
        if session is not None and not isinstance(session, SandboxSession):
            raise SandboxUsageError("session must come from Sandbox.open_session()")
        if not self._open:
            raise SandboxClosedError("the sandbox is closed; use it inside 'async with Sandbox()'")
        if session is not None and session not in self._sessions and not session.closed:
            raise SandboxUsageError("session belongs to another sandbox")
        if cancel is not None and cancel.cancelled:
            return _failed("aborted", "the run was cancelled before it started", started)
        self._active += 1
        try:
            if session is not None:
                return await session.run(program, tool_names=names, call_tool=call_tool, limits=limits,
                                         cancel=cancel, on_log=on_log, started=started)
            for attempt in (1, 2):
                try:
                    # A warm worker that died unseen may not be alone (a mass kill, the OOM killer):
                    # the second attempt goes to a worker forked after the death was seen.
                    worker = await (self._acquire() if attempt == 1 else self._template.spawn(self._layers))
                except SandboxStartError as exc:
                    return _failed("worker-exit", f"no worker could be started: {exc.message}", started)
                result = await execute_run(worker, program=program, tool_names=names, call_tool=call_tool,
                                           limits=limits or self.limits, cancel=cancel, on_log=on_log,
                                           persist=False, started=started, retire=self._retire,
                                           cpu_watch=self._cpu_watch)
                if attempt == 2 or not _died_unseen(result, cancel):
                    break
            return result
        finally:
            self._active -= 1
            if not self._active:
                self._quiet_since = time.monotonic()
                quiet, self._quiet = self._quiet, None
                if quiet is not None:
                    quiet.set()


def _required_layers(require: object, attempted: frozenset[str]) -> frozenset[str]:
    if require is None:
        return frozenset()
    possible = BASE_LAYERS | attempted
    if require == "all":
        return possible
    if isinstance(require, str) or not isinstance(require, Iterable):
        raise SandboxUsageError('require must be "all" or an iterable of isolation layer names')
    required = frozenset(require)
    if unknown := sorted(required - BASE_LAYERS - OPTIONAL_LAYERS):
        raise SandboxUsageError(f"unknown isolation layers {unknown} in require")
    if off := sorted(required - possible):
        raise SandboxUsageError(f"require names layers that layers= switches off: {off}")
    return required


def _check_arguments(program: object, tool_names: object, call_tool: object, limits: object,
                     cancel: object, on_log: object) -> tuple[str, ...]:
    if type(program) is not str:
        raise SandboxUsageError("program must be a str")
    if isinstance(tool_names, str) or not isinstance(tool_names, Iterable):
        raise SandboxUsageError("tool_names must be a sequence of str")
    names = tuple(tool_names)
    if any(type(name) is not str for name in names):
        raise SandboxUsageError("tool_names must contain only str")
    if not (callable(call_tool) or (isinstance(call_tool, CooperativeCallTool)
                                    and callable(call_tool.handler))):
        raise SandboxUsageError("call_tool must be an async callable (name, args) -> value "
                                "or a CooperativeCallTool")
    if limits is not None and not isinstance(limits, SandboxLimits):
        raise SandboxUsageError("limits must be a SandboxLimits value")
    if cancel is not None and not (hasattr(cancel, "cancelled") and callable(getattr(cancel, "wait", None))):
        raise SandboxUsageError("cancel must have a 'cancelled' attribute and an async 'wait()'")
    if on_log is not None and not callable(on_log):
        raise SandboxUsageError("on_log must be callable")
    return names


def _failed(kind: ErrorKind, message: str, started: float) -> RunResult:
    stats = RunStats(wall_ms=(time.perf_counter() - started) * 1000.0, cpu_ms=None, tool_calls=0,
                     isolation=())
    return RunResult(value=None, has_value=False, logs=(), error=RunError(kind, message), stats=stats)


def _channel_open(worker: WorkerHandle) -> bool:
    """False when the worker's end of the channel is closed (it died, even if not yet reaped)."""
    try:
        data = worker.channel.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
    except BlockingIOError:
        return True
    except OSError:
        return False
    return bool(data)


def _died_unseen(result: RunResult, cancel: CancelLike | None) -> bool:
    """The worker died before leaving any trace of the run (no output, no tool call).

    A warm worker can die unnoticed before the run reaches it; nothing observable happened, so the run
    may go once more to a fresh worker. A program that really kills its worker fails the same way twice.
    """
    error = result.error
    return (error is not None and error.kind == "worker-exit" and not result.logs
            and result.stats.tool_calls == 0 and not (cancel is not None and cancel.cancelled))
