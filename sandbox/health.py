"""The health of a sandbox's worker supply: its restart policy, a snapshot of its state, and its events.

A :class:`~codemode.sandbox.Sandbox` supervises its template process (the one that forks every worker). A
template that dies, or stops answering requests to start a worker, is replaced; :class:`RestartPolicy` says
how hard to try. Its circuit breaker has three states:

- ``closed``: normal service. A template that had started at least one worker and then dies or hangs is
  replaced at once. A *failure* - a replacement that does not start, or a template lost before its first
  worker - is retried after a backoff that doubles each time (``backoff_seconds`` up to
  ``max_backoff_seconds``); runs wait for the replacement within their own wall-clock budget.
- ``open``: ``max_failures`` failures happened within ``window_seconds``. No template is started and every
  run that needs a new worker fails at once with kind ``worker-exit`` and a message naming the last cause
  and the time of the next attempt, one window later.
- ``half-open``: the window has passed; one trial template is started. Its first worker closes the breaker
  (and clears the failure count); a failed start or a loss before that reopens it for another window.

:meth:`Sandbox.health() <codemode.sandbox.Sandbox.health>` returns a :class:`SandboxHealth` snapshot;
:meth:`Sandbox.on_health() <codemode.sandbox.Sandbox.on_health>` observers receive a :class:`HealthEvent` for
each change worth a log line.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Literal, TypeAlias

from .errors import SandboxUsageError

__all__ = (
    "BreakerState",
    "HealthEvent",
    "HealthEventKind",
    "RestartPolicy",
    "SandboxHealth",
)

BreakerState: TypeAlias = Literal["closed", "open", "half-open"]

#: ``template-lost``: the template died or stopped answering (its workers died with it);
#: ``template-restarted``: a replacement is serving; ``template-start-failed``: a replacement did not start;
#: ``breaker-opened`` / ``breaker-closed``: see :class:`RestartPolicy`; ``spawn-failed``: a worker could not
#: be started (the message says what ran out).
HealthEventKind: TypeAlias = Literal["template-lost", "template-restarted", "template-start-failed",
                                     "breaker-opened", "breaker-closed", "spawn-failed"]


@dataclasses.dataclass(frozen=True, slots=True)
class RestartPolicy:
    """How a sandbox replaces a template that died or hung (see the module docstring for the breaker).

    - ``max_failures`` failures within ``window_seconds`` open the breaker for ``window_seconds``;
    - ``backoff_seconds``: the pause before the first retry after a failure, doubled for each further
      consecutive failure up to ``max_backoff_seconds``;
    - ``hang_seconds``: a template that leaves a request to start a worker unanswered this long is taken
      for hung (stopped, frozen, stuck): it is killed (SIGKILL) and replaced.
    """

    max_failures: int = 5
    window_seconds: float = 60.0
    backoff_seconds: float = 0.1
    max_backoff_seconds: float = 5.0
    hang_seconds: float = 5.0

    def __post_init__(self) -> None:
        if type(self.max_failures) is not int or self.max_failures < 1:
            raise SandboxUsageError("RestartPolicy.max_failures must be an int >= 1")
        for name in ("window_seconds", "backoff_seconds", "max_backoff_seconds", "hang_seconds"):
            value = getattr(self, name)
            if type(value) not in (int, float) or not math.isfinite(value) or value <= 0:
                raise SandboxUsageError(f"RestartPolicy.{name} must be a finite number of seconds > 0")

    def backoff(self, failures: int) -> float:
        """The pause before the next start after ``failures`` consecutive failures (0 for none)."""
        if failures <= 0:
            return 0.0
        return float(min(self.backoff_seconds * 2.0 ** (failures - 1), self.max_backoff_seconds))


@dataclasses.dataclass(frozen=True, slots=True)
class SandboxHealth:
    """One consistent snapshot of a sandbox's supply.

    - ``breaker``: ``closed``, ``open`` or ``half-open`` (see :class:`RestartPolicy`);
    - ``template_pid``: the serving template, or None while it is being replaced (or the breaker is open);
    - ``template_restarts``: replacements that came up; ``template_failures``: failed starts and templates
      lost before their first worker (what the breaker counts); ``spawn_failures``: workers that could not
      be started (a template lost mid-start is not counted: the start is retried on its replacement);
    - ``warm`` of ``warm_target`` workers are ready; ``live_workers`` of at most ``max_workers`` exist
      (warm, running, in a session or exiting); ``waiting`` runs wait for one;
    - ``last_error``: the last failure's cause, if any; ``retry_at``: while the breaker is open, the
      time (``time.time()``) of the next attempt.
    """

    breaker: BreakerState
    template_pid: int | None
    template_restarts: int
    template_failures: int
    spawn_failures: int
    warm: int
    warm_target: int
    live_workers: int
    max_workers: int
    waiting: int
    last_error: str | None
    retry_at: float | None

    @property
    def serving(self) -> bool:
        """True while a template serves (runs get workers without waiting for a replacement)."""
        return self.template_pid is not None

    def to_json(self) -> dict[str, Any]:
        """The snapshot as a plain JSON object (for logs)."""
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True, slots=True)
class HealthEvent:
    """One change in a sandbox's supply: its ``kind``, a message for a log line and the snapshot after it."""

    kind: HealthEventKind
    message: str
    health: SandboxHealth

    def to_json(self) -> dict[str, Any]:
        """``{"event": kind, "message": ..., "health": {...}}`` (the ``code/sandbox`` event's data)."""
        return {"event": self.kind, "message": self.message, "health": self.health.to_json()}
