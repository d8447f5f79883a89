"""Where a sandbox's workers come from: a supervised template, behind the one seam the pool uses.

:class:`WorkerSupply` is that seam. The pool (:mod:`codemode.sandbox.pool`) keeps the warm workers, the cap on
live workers and every run's deadline; it asks a supply for a fresh worker (``spawn``), for the live workers,
its status and, when a run gave up waiting, why it had to wait. It never sees a template. Workers on
other machines do not plug in here: a run's limits, ``/proc`` reads and kills must happen on the
worker's own machine, so :class:`~codemode.sandbox.ray.RaySandbox` relays whole runs to a local sandbox
on each node instead.

:class:`TemplateSupervisor` is the supply over a local template process (:class:`~codemode.sandbox.host.
TemplateProcess`). It keeps one template serving and replaces it when it is lost:

- a template *dies* when its control socket closes (killed, crashed, out of memory);
- a template *hangs* when a request to start a worker stays unanswered for ``hang_seconds`` (a watchdog task
  sleeps until the oldest unanswered request is that old; requests whose caller gave up still count, so a
  hang is found even if every run waiting on it ran out of time). A hung template is killed (SIGKILL to its
  process group) and then handled as dead.

Either way its workers die with it (they are killed and marked exited, so their runs end with
``worker-exit``), and a replacement is started: at once if the lost template had started a worker, else
after a backoff, under the circuit breaker that :class:`~codemode.sandbox.health.RestartPolicy` documents.
While no template serves, ``spawn`` waits for the replacement (the caller's deadline bounds the wait) or,
while the breaker is open, fails at once with :class:`BreakerOpen`.
"""

from __future__ import annotations

import collections
import dataclasses
import signal
import time
from collections.abc import Callable, Iterable
from typing import Final, Protocol

import anyio
import anyio.abc

from .errors import SandboxStartError
from .health import BreakerState, HealthEventKind, RestartPolicy
from .host import TemplateGone, TemplateProcess, WorkerHandle
from .results import ErrorKind

__all__ = (
    "BreakerOpen",
    "SupplyStatus",
    "TemplateSupervisor",
    "WorkerSupply",
    "WorkerUnavailable",
)

#: A request unanswered this long is worth naming when a run gives up waiting (not yet a hang).
_SLOW_ANSWER: Final = 0.5


class BreakerOpen(SandboxStartError):
    """No worker can be started until the restart breaker's next attempt (the message says when)."""


class WorkerUnavailable(Exception):
    """A run got no worker: its result's error ``kind`` (``worker-exit``, ``timeout`` or ``aborted``)
    and message. Internal: the pool and sessions turn it into a failed :class:`RunResult`."""

    def __init__(self, kind: ErrorKind, message: str) -> None:
        self.kind: ErrorKind = kind
        self.message = message
        super().__init__(message)


@dataclasses.dataclass(frozen=True, slots=True)
class SupplyStatus:
    """A supply's part of :class:`~codemode.sandbox.health.SandboxHealth`."""

    breaker: BreakerState
    template_pid: int | None
    restarts: int
    failures: int
    spawn_failures: int
    last_error: str | None
    retry_at: float | None


class WorkerSupply(Protocol):
    """What the pool needs from wherever workers come from."""

    @property
    def template_pid(self) -> int | None: ...

    @property
    def live_workers(self) -> list[WorkerHandle]: ...

    @property
    def live_count(self) -> int: ...

    async def start(self, task_group: anyio.abc.TaskGroup) -> None: ...

    async def spawn(self, layers: frozenset[str], *, warm: bool = True) -> WorkerHandle: ...

    async def wait_changed(self) -> None: ...

    def wait_reason(self) -> str | None: ...

    def status(self) -> SupplyStatus: ...

    async def aclose(self) -> None: ...


class TemplateSupervisor:
    """A :class:`WorkerSupply` that keeps one local template serving (see the module docstring).

    ``on_worker_exit`` hears of every worker's exit (the pool frees its slot and drops a dead warm
    worker); ``on_event(kind, message)`` of every change worth a log line.
    """

    def __init__(self, executor: str, policy: RestartPolicy, *,
                 on_worker_exit: Callable[[WorkerHandle], None],
                 on_event: Callable[[HealthEventKind, str], None],
                 template_layers: Iterable[str] | None = None,
                 required: frozenset[str] = frozenset()) -> None:
        self._executor = executor
        self._template_layers = None if template_layers is None else frozenset(template_layers)
        self._required = required
        self._policy = policy
        self._on_worker_exit = on_worker_exit
        self._on_event = on_event
        self._template: TemplateProcess | None = None
        self._task_group: anyio.abc.TaskGroup | None = None
        self._lost: list[TemplateProcess] = []
        self._lost_event = anyio.Event()
        self._changed = anyio.Event()
        self._watch_wake: anyio.Event | None = None
        self._breaker: BreakerState = "closed"
        self._recent: collections.deque[float] = collections.deque()
        self._consecutive = 0
        self._retry_at: float | None = None  # (anyio clock)
        self._open_reason = ""
        self._restarts = 0
        self._failures = 0
        self._spawn_failures = 0
        self._last_error: str | None = None
        self._closing = False

    # --- the WorkerSupply interface -----------------------------------------------------------
    @property
    def template_pid(self) -> int | None:
        """Pid of the serving template (None while it is being replaced)."""
        template = self._template
        return template.pid if template is not None else None

    @property
    def live_workers(self) -> list[WorkerHandle]:
        template = self._template
        return template.live_workers if template is not None else []

    @property
    def live_count(self) -> int:
        template = self._template
        return template.live_count if template is not None else 0

    async def start(self, task_group: anyio.abc.TaskGroup) -> None:
        """Start the first template (raising SandboxStartError if it cannot start) and the supervision."""
        self._task_group = task_group
        template = self._new_template()
        await template.start(task_group)
        self._template = template
        task_group.start_soon(self._supervise)
        task_group.start_soon(self._watch)

    async def spawn(self, layers: frozenset[str], *, warm: bool = True) -> WorkerHandle:
        """A fresh worker from the serving template, waiting for a replacement while there is none.

        ``warm``: the worker runs its warm-up program before it says ``ready`` (worth it while the
        host is idle; see :mod:`codemode.sandbox.worker`).

        Raises :class:`BreakerOpen` while the breaker is open and :class:`SandboxStartError` (saying what
        ran out) when the worker cannot be started; a template lost during the start is retried on its
        replacement. The caller bounds the wait (its deadline).
        """
        while True:
            template = self._template
            if template is None:
                if self._closing:
                    raise SandboxStartError("the sandbox is closing")
                if self._breaker == "open":
                    raise BreakerOpen(self._open_message())
                await self.wait_changed()
                continue
            try:
                return await template.spawn(layers, warm=warm)
            except TemplateGone as exc:
                if template is self._template:  # (its socket failed before its death was seen)
                    template.retire(f"stopped taking requests ({exc.message})")
            except SandboxStartError as exc:
                self._spawn_failures += 1
                self._on_event("spawn-failed", f"a sandbox worker could not be started: {exc.message}")
                raise

    async def wait_changed(self) -> None:
        """Wait until a template starts serving, the breaker opens or the supply closes."""
        await self._changed.wait()

    def wait_reason(self) -> str | None:
        """Why a caller may be waiting for a worker right now, if the supply is the reason."""
        template = self._template
        if template is None:
            if self._breaker == "open":
                return self._open_message()
            return f"the sandbox template is being replaced ({self._last_loss()})"
        oldest = template.oldest_request
        if oldest is not None:
            waited = anyio.current_time() - oldest
            if waited >= _SLOW_ANSWER:
                hang = self._policy.hang_seconds
                return (f"the sandbox template has not answered a request to start a worker for "
                        f"{waited:.1f} s; it is replaced if it stays silent for {hang:g} s")
        return None

    def status(self) -> SupplyStatus:
        retry_at = None
        if self._retry_at is not None:
            retry_at = time.time() + max(self._retry_at - anyio.current_time(), 0.0)
        return SupplyStatus(self._breaker, self.template_pid, self._restarts, self._failures,
                            self._spawn_failures, self._last_error, retry_at)

    async def aclose(self) -> None:
        """Stop supervising; close the serving template (it kills and reaps its workers)."""
        self._closing = True
        template, self._template = self._template, None
        self._wake()
        lost, self._lost = self._lost, []
        with anyio.CancelScope(shield=True):
            if template is not None:
                await template.aclose()
            for dead in lost:
                await dead.aclose()

    # --- the TemplateListener interface -----------------------------------------------------------
    def worker_exited(self, worker: WorkerHandle) -> None:
        self._on_worker_exit(worker)

    def request_sent(self, template: TemplateProcess) -> None:
        wake, self._watch_wake = self._watch_wake, None
        if wake is not None:
            wake.set()

    def template_proven(self, template: TemplateProcess) -> None:
        if template is not self._template:
            return
        self._consecutive = 0
        if self._breaker == "half-open":
            self._breaker = "closed"
            self._recent.clear()
            self._on_event("breaker-closed", f"the sandbox template (pid {template.pid}) started a worker; "
                                             "the restart breaker is closed again")

    def template_gone(self, template: TemplateProcess) -> None:
        if template is not self._template:
            return  # (one being closed, or already replaced)
        self._template = None
        self._lost.append(template)
        self._lost_event.set()
        self._wake()
        self._on_event("template-lost", f"the sandbox template (pid {template.pid}) {template.lost}; its "
                                        "workers were killed and it is being replaced")

    # --- supervision ---------------------------------------------------------------------------
    def _new_template(self) -> TemplateProcess:
        template = TemplateProcess(self._executor, self._template_layers, listener=self)
        template.required = self._required
        return template

    def _wake(self) -> None:
        changed, self._changed = self._changed, anyio.Event()
        changed.set()

    def _closed(self) -> bool:
        return self._closing  # (a method: it can change while _replace awaits)

    def _last_loss(self) -> str:
        return self._last_error or "it was lost"

    def _failed(self, cause: str) -> None:
        """Count one failure (a failed start, or a template lost before its first worker)."""
        now = anyio.current_time()
        self._failures += 1
        self._consecutive += 1
        self._last_error = cause
        self._recent.append(now)
        self._trim(now)

    def _trim(self, now: float) -> None:
        while self._recent and self._recent[0] <= now - self._policy.window_seconds:
            self._recent.popleft()

    def _open_message(self) -> str:
        left = max((self._retry_at or 0.0) - anyio.current_time(), 0.0)
        at = time.strftime("%H:%M:%S", time.gmtime(time.time() + left))
        return (f"the sandbox template could not be kept running ({self._open_reason}; last: "
                f"{self._last_error}); the restart breaker is open, so no worker can start until the next "
                f"attempt in {left:.1f} s (at {at} UTC)")

    async def _supervise(self) -> None:
        """Retire each lost template and start its replacement (never returns)."""
        while True:
            await self._lost_event.wait()
            self._lost_event = anyio.Event()
            lost, self._lost = self._lost, []
            for template in lost:
                await template.aclose(close_channels=False)  # (reaps it, removes its workers' directories)
                cause = f"the sandbox template {template.lost}{_exit_detail(template.returncode)}"
                if template.proven:
                    self._last_error = cause
                else:
                    self._failed(cause)
            if self._template is None and not self._closing:
                await self._replace()

    async def _replace(self) -> None:
        """Start templates until one serves, pausing and opening the breaker as the policy says."""
        assert self._task_group is not None
        policy = self._policy
        while not self._closing:
            self._trim(anyio.current_time())
            if self._breaker == "half-open" or len(self._recent) >= policy.max_failures:
                self._open_reason = ("the trial start after the last pause failed too"
                                     if self._breaker == "half-open" else
                                     f"{len(self._recent)} failures within {policy.window_seconds:g} s")
                self._breaker = "open"
                self._retry_at = anyio.current_time() + policy.window_seconds
                self._on_event("breaker-opened", self._open_message())
                self._wake()  # (waiting runs fail at once now)
                await anyio.sleep(policy.window_seconds)
                self._breaker, self._retry_at = "half-open", None
            else:
                pause = policy.backoff(self._consecutive)
                if pause:
                    await anyio.sleep(pause)
            template = self._new_template()
            try:
                await template.start(self._task_group)
            except SandboxStartError as exc:
                self._failed(exc.message)
                self._on_event("template-start-failed", f"{exc.message} (failure {len(self._recent)} of "
                                                        f"{policy.max_failures} within "
                                                        f"{policy.window_seconds:g} s)")
                continue
            if self._closed():
                await template.aclose()
                return
            self._template = template
            self._restarts += 1
            self._on_event("template-restarted", f"a new sandbox template (pid {template.pid}) is serving "
                                                 f"(restart {self._restarts}, after: {self._last_loss()})")
            self._wake()
            return

    async def _watch(self) -> None:
        """Kill the serving template once a request to start a worker is ``hang_seconds`` old (never
        returns). It sleeps until the oldest unanswered request would be that old, or for the next
        request while none is unanswered."""
        hang = self._policy.hang_seconds
        while True:
            template = self._template
            oldest = template.oldest_request if template is not None else None
            if template is None or oldest is None:
                wake = self._watch_wake = anyio.Event()
                await wake.wait()
                continue
            left = oldest + hang - anyio.current_time()
            if left > 0:
                await anyio.sleep(left)
                continue
            if template.answer_waiting():  # (the host's loop was blocked: let the reader catch up)
                await anyio.sleep(_SLOW_ANSWER / 10)
                continue
            template.retire(f"did not answer a request to start a worker within {hang:g} s (stopped or "
                            "hung) and was killed")


def _exit_detail(returncode: int | None) -> str:
    if returncode is None or returncode == 0:
        return ""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = str(-returncode)
        return f" (signal {name})"
    return f" (exit status {returncode})"
