"""The public host-side object: :class:`Sandbox`, an async context manager owning a warm worker supply.

Entering a sandbox starts one template process (:mod:`codemode.sandbox._template`) and keeps ``warm`` workers
forked and ready ahead of demand, so a run never waits for a fork or for the isolation set-up. Each
one-shot run takes a fresh worker, which exits after its ``done`` frame; nothing survives from one run
to the next. Runs are concurrency-safe: every run has its own worker. A persistent session
(:meth:`Sandbox.open_session`) keeps one worker and its globals between runs.

At most ``max_workers`` workers live at once (warm, running, in a session or exiting); a run that needs a
new worker beyond that waits for one to exit. Every wait for a worker - for a free slot, a fork, or a
template being replaced - counts against the run's own wall-clock budget, and a run whose budget runs out
while it waits fails with kind ``timeout`` and a message saying what it waited for.

Workers come from a :class:`~codemode.sandbox._supply.WorkerSupply`: a supervised template that is replaced
when it dies or hangs (see :mod:`codemode.sandbox.health` for the restart policy and its breaker).
:meth:`Sandbox.health` reports restarts, failures and the supply level; :meth:`Sandbox.on_health` observers
hear of each change.

Leaving the sandbox closes its sessions, kills every worker (the template reaps them and removes their
working directories) and reaps the template.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from types import TracebackType
from typing import Final, Literal

import anyio
import anyio.abc

from ._isolate import BASE_LAYERS, OPTIONAL_LAYERS, SHARED_LAYERS
from ._run import CallTool, CancelLike, CpuWatch, OnLog, execute_run
from ._supply import BreakerOpen, TemplateSupervisor, WorkerSupply, WorkerUnavailable
from .calls import CooperativeCallTool
from .errors import SandboxClosedError, SandboxStartError, SandboxUsageError
from .health import HealthEvent, HealthEventKind, RestartPolicy, SandboxHealth
from .host import DEFAULT_EXECUTOR, WorkerHandle
from .limits import DEFAULT_LIMITS, SandboxLimits
from .lossless import lone_surrogate
from .results import RunResult
from .session import SandboxSession, died_unseen, failed_result

__all__ = ("DEFAULT_MAX_WORKERS", "HealthObserver", "Sandbox")

#: Live workers per sandbox unless told otherwise: bounds the workers' memory at 16 x ``memory_bytes``
#: (4 GiB at the default budget) while leaving room for runs that mostly wait on their tools.
DEFAULT_MAX_WORKERS: Final = 16

HealthObserver = Callable[[HealthEvent], object]

_RESPAWN_PAUSE: Final = 0.05
_RESPAWN_MAX_PAUSE: Final = 1.0
_RETIRE_GRACE: Final = 0.25
_REFILL_SETTLE: Final = 0.01


class Sandbox:
    """Runs programs in isolated, resource-limited worker processes.

    ``limits`` are the default budgets of every run (a run may pass its own). ``warm`` workers are kept
    forked and ready; at most ``max_workers`` live at once (callers beyond wait, within their wall-clock
    budget). ``executor`` names the module the workers run programs with (it must define
    ``compile_program`` and ``run_program``; the default is :mod:`codemode.sandbox.interpreter`). ``layers``
    restricts the optional isolation layers to attempt (default: all of them, see
    :data:`~codemode.sandbox.ISOLATION_LAYERS`); the layers actually active are reported per run
    (``RunResult.stats.isolation``). ``require`` names layers every worker must have, or ``"all"`` for
    every layer attempted: the sandbox then fails closed, with :class:`SandboxIsolationError` naming
    what is missing, when it starts (its first worker is checked before ``async with`` enters) and,
    should a later worker come up without one, in the run that needed it (kind ``worker-exit``).
    ``restart_policy`` says how a template that died or hung is replaced
    (:class:`~codemode.sandbox.RestartPolicy`).
    """

    def __init__(self, limits: SandboxLimits | None = None, *, warm: int = 2,
                 max_workers: int = DEFAULT_MAX_WORKERS, executor: str = DEFAULT_EXECUTOR,
                 layers: Iterable[str] | None = None,
                 require: Iterable[str] | Literal["all"] | None = None,
                 restart_policy: RestartPolicy | None = None) -> None:
        if limits is not None and not isinstance(limits, SandboxLimits):
            raise SandboxUsageError("limits must be a SandboxLimits value")
        if type(warm) is not int or warm < 0:
            raise SandboxUsageError("warm must be a non-negative int")
        if type(max_workers) is not int or max_workers < 1:
            raise SandboxUsageError("max_workers must be an int >= 1")
        if warm > max_workers:
            raise SandboxUsageError(f"warm ({warm}) must not exceed max_workers ({max_workers})")
        if restart_policy is not None and not isinstance(restart_policy, RestartPolicy):
            raise SandboxUsageError("restart_policy must be a RestartPolicy value")
        chosen = OPTIONAL_LAYERS if layers is None else frozenset(layers)
        if unknown := sorted(chosen - OPTIONAL_LAYERS):
            raise SandboxUsageError(f"unknown isolation layers {unknown}; known: {sorted(OPTIONAL_LAYERS)}")
        self.limits = limits or DEFAULT_LIMITS
        self._warm = warm
        self._max_workers = max_workers
        self._layers = chosen
        self._required = _required_layers(require, chosen)
        self._supply: WorkerSupply = TemplateSupervisor(
            executor, restart_policy or RestartPolicy(), on_worker_exit=self._worker_exited,
            on_event=self._emit, template_layers=_template_layers(chosen), required=self._required)
        self._ready: list[WorkerHandle] = []
        #: Workers the refill is starting (each in a task of its own).
        self._starting = 0
        self._refill_failure: SandboxStartError | None = None
        self._refilled = False
        #: Workers being started (by the refill or by runs): counted against max_workers.
        self._reserved = 0
        #: Runs waiting for a worker (the refill leaves new workers to them).
        self._waiting = 0
        self._need = anyio.Event()
        self._supplied = anyio.Event()
        #: Set when a worker exits, gets ready or fails to start; made anew only while someone waits.
        self._changed = anyio.Event()
        self._blocked = 0
        self._observers: list[HealthObserver] = []
        self._active = 0
        self._quiet_since = time.monotonic()
        #: The run in flight started right after the last one ended (see :meth:`_refill`).
        self._streaming = False
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
            await self._supply.start(self._task_group)
        except BaseException:
            self._task_group.cancel_scope.cancel()
            await stack.aclose()
            raise
        if self._required:  # fail closed now, not at the first run
            try:
                self._ready.append(await self._supply.spawn(self._layers))
            except BaseException:
                with anyio.CancelScope(shield=True):
                    await self._supply.aclose()
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
            ready, self._ready = self._ready, []
            for worker in ready:
                await worker.kill()
            for worker in self._supply.live_workers:
                await worker.kill()
            await self._supply.aclose()
        assert self._task_group is not None
        self._task_group.cancel_scope.cancel()
        await self._stack.aclose()

    @property
    def template_pid(self) -> int | None:
        """Pid of the serving template (None before the sandbox is entered and while it is replaced)."""
        return self._supply.template_pid

    @property
    def live_worker_pids(self) -> list[int]:
        """Pids of workers not yet reaped (warm, running or in a session)."""
        return [worker.pid for worker in self._supply.live_workers]

    # --- health ------------------------------------------------------------------------------
    def health(self) -> SandboxHealth:
        """A snapshot of the supply: breaker, restarts, failures, warm and live workers, waiting runs."""
        status = self._supply.status()
        return SandboxHealth(
            breaker=status.breaker, template_pid=status.template_pid, template_restarts=status.restarts,
            template_failures=status.failures, spawn_failures=status.spawn_failures, warm=len(self._ready),
            warm_target=self._warm, live_workers=self._supply.live_count, max_workers=self._max_workers,
            waiting=self._waiting, last_error=status.last_error, retry_at=status.retry_at)

    def on_health(self, observer: HealthObserver) -> Callable[[], None]:
        """Call ``observer(event)`` for each :class:`~codemode.sandbox.HealthEvent`; returns its disposer.

        Observers are called synchronously from the sandbox's own tasks: they must not block (append to
        a log, print a line). One that raises is ignored.
        """
        if not callable(observer):
            raise SandboxUsageError("observer must be callable")
        self._observers.append(observer)

        def dispose() -> None:
            with contextlib.suppress(ValueError):
                self._observers.remove(observer)

        return dispose

    def _emit(self, kind: HealthEventKind, message: str) -> None:
        if not self._observers:
            return
        event = HealthEvent(kind, message, self.health())
        for observer in list(self._observers):
            with contextlib.suppress(Exception):  # an observer failing must not stop the supervision
                observer(event)

    # --- the warm supply ---------------------------------------------------------------------
    def _live(self) -> int:
        return self._supply.live_count + self._reserved

    def _notify(self) -> None:
        """Wake whoever waits for a slot or a ready worker (cheap when nobody does)."""
        if self._blocked:
            changed, self._changed = self._changed, anyio.Event()
            changed.set()

    async def _wait_change(self) -> None:
        self._blocked += 1
        try:
            await self._changed.wait()
        finally:
            self._blocked -= 1

    def _worker_exited(self, worker: WorkerHandle) -> None:
        """A worker was reaped (or died with its template): free its slot, drop it if it was warm."""
        if worker in self._ready:  # died while warm: replace it now rather than at the next run
            self._ready.remove(worker)
            worker.close_channel()
            self._need.set()
        self._notify()

    async def _refill(self) -> None:
        """Keep ``warm`` workers ready: replace a taken worker at once when none is left, else once the
        host is quiet.

        Forking and isolating a worker costs a few milliseconds of CPU; doing it while a run is in
        flight would steal that CPU from the run. So while a worker is still at hand, replacements wait
        until no run has been in flight for :data:`_REFILL_SETTLE` (whoever awaited the last run gets
        to use its result first: the template's fork would otherwise preempt it). Once the supply is
        empty, or while runs come back to back (each starts within :data:`_REFILL_SETTLE` of the last
        one's end, so the host is never quiet that long), the next run would wait for a fork anyway:
        replacements then start at once and in parallel (a run finds a worker forked during the run
        before), and a run that has to wait takes a worker the refill is already starting rather than
        forking one more. A worker started while the host is busy (or between runs that come back to
        back) skips its warm-up run (see :mod:`codemode.sandbox.worker`): it gets ready sooner, and its
        first run pays for the pages the warm-up would have copied. The refill never takes the workers
        over ``max_workers``; failed starts are retried after a growing pause.
        """
        failures = 0
        while self._open:
            need = self._need
            failure, self._refill_failure = self._refill_failure, None
            if failure is not None:
                if isinstance(failure, BreakerOpen):
                    await self._supply.wait_changed()  # (the breaker's next attempt)
                else:
                    failures += 1
                    await anyio.sleep(min(_RESPAWN_PAUSE * 2 ** (failures - 1), _RESPAWN_MAX_PAUSE))
                continue
            if self._refilled:
                self._refilled, failures = False, 0
            if len(self._ready) + self._starting >= self._warm:
                await self._next_need(need)
                continue
            if self._ready and not self._back_to_back():
                settle = self._quiet_since + _REFILL_SETTLE - time.monotonic()
                if self._active or settle > 0:
                    await self._next_need(need, None if self._active else settle)
                    continue
            if self._live() >= self._max_workers:
                await self._wait_change()
                continue
            self._starting += 1
            self._reserved += 1
            assert self._task_group is not None
            self._task_group.start_soon(self._refill_one,
                                        not (self._active or self._waiting or self._back_to_back()))

    def _back_to_back(self) -> bool:
        """Runs are coming back to back: the one in flight (or the last, if it ended less than
        :data:`_REFILL_SETTLE` ago) started right after the one before it ended."""
        return self._streaming and (self._active > 0
                                    or time.monotonic() - self._quiet_since < _REFILL_SETTLE)

    async def _next_need(self, need: anyio.Event, within: float | None = None) -> None:
        """Wait until ``need`` is set (a run started or ended, a worker was taken or died), at most
        ``within`` seconds."""
        with anyio.move_on_after(within):
            await need.wait()
        if self._need is need and need.is_set():
            self._need = anyio.Event()

    async def _refill_one(self, warm: bool) -> None:
        """Start one worker for the warm supply (counted in ``_starting`` and ``_reserved`` already).

        The worker joins the supply before it stops counting as starting, so a run that waits for it
        never sees neither (and forks one more).
        """
        worker: WorkerHandle | None = None
        try:
            worker = await self._supply.spawn(self._layers, warm=warm)
        except SandboxStartError as exc:
            self._refill_failure = exc
        finally:
            if worker is not None and self._open:
                self._refilled = True
                self._ready.append(worker)
                self._supplied.set()
                self._supplied = anyio.Event()
            self._starting -= 1
            self._reserved -= 1
            self._need.set()
            self._notify()
        if worker is not None and not self._open:
            await worker.kill()
            worker.close_channel()

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

    async def _acquire(self, limits: SandboxLimits, deadline: float, fresh: bool = False,
                       cancel: CancelLike | None = None) -> WorkerHandle:
        """A worker for one run: a warm one, else a fresh one within ``deadline`` (anyio clock).

        ``fresh`` skips the warm ones (a retry after a warm worker died unseen). Raises
        :class:`WorkerUnavailable` when no worker can be had: ``worker-exit`` (it could not be started:
        the message says why), ``timeout`` (the deadline passed while waiting) or ``aborted``.
        """
        if not self._open:
            raise SandboxClosedError("the sandbox is closed; use it inside 'async with Sandbox()'")
        self._need.set()
        if not fresh:
            while self._ready:
                worker = self._ready.pop(0)
                if worker.alive and worker.channel_open():
                    return worker
                await worker.kill()  # died while warm (the template may not have reported it yet)
                worker.close_channel()
        self._waiting += 1
        try:
            got = await _within(deadline, cancel, self._wait_for_worker, fresh)
            if got is not None:
                return got
            if cancel is not None and cancel.cancelled:
                raise WorkerUnavailable("aborted", "the run was cancelled while it waited for a worker")
            raise WorkerUnavailable("timeout", self._waited_too_long(limits))
        finally:
            self._waiting -= 1
            self._need.set()

    async def _wait_for_worker(self, fresh: bool) -> WorkerHandle:
        while True:
            if not self._open:
                raise SandboxClosedError("the sandbox was closed while a run waited for a worker")
            if self._ready and not fresh:
                worker = self._ready.pop(0)
                if worker.alive and worker.channel_open():
                    return worker
                await worker.kill()
                worker.close_channel()
                continue
            # (a worker the refill is starting goes to a waiting run: only runs beyond those fork)
            if (fresh or self._starting < self._waiting) and self._live() < self._max_workers:
                self._reserved += 1
                try:
                    return await self._supply.spawn(self._layers, warm=False)
                except SandboxStartError as exc:
                    raise WorkerUnavailable("worker-exit", f"no worker could be started: {exc.message}") \
                        from None
                finally:
                    self._reserved -= 1
                    self._notify()
            await self._wait_change()

    def _waited_too_long(self, limits: SandboxLimits) -> str:
        reason = self._supply.wait_reason()
        if reason is None and self._live() >= self._max_workers:
            reason = (f"all {self._max_workers} workers the sandbox may run at once were busy (max_workers; "
                      "persistent sessions keep theirs)")
        return (f"the run's wall-clock budget of {limits.wall_seconds:g} s (wall_seconds) ran out while it "
                f"waited for a worker ({reason or 'no worker was started in time'}); the program did not run")

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
        the caller kills and reaps the worker, then propagates. The wall-clock budget starts now and
        covers any wait for a worker; a run that got none fails with ``worker-exit`` (none could be
        started: the message says why), ``timeout`` (the budget ran out while it waited) or ``aborted``.
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
            return failed_result("aborted", "the run was cancelled before it started", started)
        run_limits = limits or self.limits
        self._active += 1
        if self._active == 1:  # (runs coming back to back: the host was quiet only for a moment)
            self._streaming = time.monotonic() - self._quiet_since < _REFILL_SETTLE
        try:
            if session is not None:
                return await session.run(program, tool_names=names, call_tool=call_tool, limits=limits,
                                         cancel=cancel, on_log=on_log, started=started)
            # The wall-clock budget covers the wait for a worker too.
            deadline = anyio.current_time() + run_limits.wall_seconds
            for attempt in (1, 2):
                try:
                    # A warm worker that died unseen may not be alone (a mass kill, the OOM killer, its
                    # template's death): the second attempt goes to a worker forked after that was seen.
                    worker = await self._acquire(run_limits, deadline, attempt == 2, cancel)
                except WorkerUnavailable as exc:
                    return failed_result(exc.kind, exc.message, started)
                result = await execute_run(worker, program=program, tool_names=names, call_tool=call_tool,
                                           limits=run_limits, cancel=cancel, on_log=on_log,
                                           persist=False, started=started, retire=self._retire,
                                           cpu_watch=self._cpu_watch, deadline=deadline)
                if attempt == 2 or not died_unseen(result, cancel):
                    break
            return result
        finally:
            self._active -= 1
            if not self._active:
                self._quiet_since = time.monotonic()
                self._need.set()


def _template_layers(chosen: frozenset[str]) -> frozenset[str]:
    """What the template sets up: its own layers, and the shared network namespace only for workers
    that will keep it (under seccomp)."""
    layers = chosen & SHARED_LAYERS
    return layers if "seccomp" in chosen else layers - {"netns"}


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
    if any(lone_surrogate(name) >= 0 for name in names):
        raise SandboxUsageError("tool_names must be Unicode text: a name holds a lone surrogate")
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


async def _within(deadline: float, cancel: CancelLike | None,
                  wait: Callable[[bool], Awaitable[WorkerHandle]], fresh: bool) -> WorkerHandle | None:
    """``await wait(fresh)``, or None once ``deadline`` passes or ``cancel`` fires (observed by a callback
    if it offers ``on_cancel``, else by a watcher task): for the rare wait for a worker, so its cost is no
    concern."""
    with anyio.CancelScope(deadline=deadline) as scope:
        if cancel is None:
            return await wait(fresh)
        if cancel.cancelled:
            return None
        subscribe = getattr(cancel, "on_cancel", None)
        disposer: object = None
        subscribed = False
        if callable(subscribe):
            with contextlib.suppress(Exception):  # (a broken subscription: the watcher task instead)
                disposer, subscribed = subscribe(lambda reason=None: scope.cancel()), True
        if subscribed:
            try:
                return await wait(fresh)
            finally:
                if callable(disposer):
                    disposer()
        async with anyio.create_task_group() as group:
            async def watch() -> None:
                await cancel.wait()
                scope.cancel()

            group.start_soon(watch)
            try:
                return await wait(fresh)
            finally:
                group.cancel_scope.cancel()
    return None
