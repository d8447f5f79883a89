"""What a run returns: the value or the failure, the kept logs and measured statistics.

A run never raises for what its program does; every outcome is one of these immutable values.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final, Literal, TypeAlias

from .lossless import JsonValue

__all__ = (
    "ERROR_KINDS",
    "ISOLATION_LAYERS",
    "ErrorKind",
    "RunError",
    "RunResult",
    "RunStats",
)

ErrorKind: TypeAlias = Literal[
    "syntax", "policy", "exception", "timeout", "cpu-limit", "memory-limit", "output-limit",
    "invalid-output", "call-limit", "protocol", "worker-exit", "aborted",
]

ERROR_KINDS: Final[frozenset[str]] = frozenset(ErrorKind.__args__)  # type: ignore[attr-defined]

#: Every isolation layer a worker can report in ``RunStats.isolation``, in the order it reports them;
#: README's security model says what each one stops (``Sandbox(require=...)`` takes these names).
ISOLATION_LAYERS: Final = ("process", "empty-env", "tmpdir", "closed-fds", "mount-ns", "pid-ns", "ipc-ns",
                           "uts-ns", "netns", "uid", "rlimits", "no-new-privs", "landlock", "seccomp")


@dataclass(frozen=True, slots=True)
class RunError:
    """Why a run failed: ``kind`` (one of :data:`ERROR_KINDS`) and a message a model can act on."""

    kind: ErrorKind
    message: str


@dataclass(frozen=True, slots=True)
class RunStats:
    """Measurements of one run.

    ``wall_ms`` is host-measured from the request to the result; ``cpu_ms`` is the worker's CPU time
    as reported by the kernel when the worker was reaped (``None`` while a session worker lives on);
    ``isolation`` names the layers that were active in the worker, in :data:`ISOLATION_LAYERS` order
    (see :mod:`codemode.sandbox._isolate`; a layer the platform could not give is missing from it);
    ``session_restarted`` is true when a session's previous worker had died and this run started a
    fresh one with empty globals.
    """

    wall_ms: float
    cpu_ms: float | None
    tool_calls: int
    isolation: tuple[str, ...]
    worker_pid: int | None = None
    session_restarted: bool = False


@dataclass(frozen=True, slots=True)
class RunResult:
    """The outcome of one run.

    ``value`` is the program's return value (lossless JSON) when ``has_value``; a program that returns
    nothing has ``has_value=False`` and ``value=None``. ``logs`` holds the captured output up to the
    log budget, then exactly one truncation marker. ``error`` is ``None`` on success.
    """

    value: JsonValue
    has_value: bool
    logs: tuple[str, ...]
    error: RunError | None
    stats: RunStats = field(compare=False)

    @property
    def ok(self) -> bool:
        """True when the program completed without error."""
        return self.error is None
