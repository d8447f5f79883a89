"""Errors the sandbox raises to its integrator, each with a stable machine-readable ``code``.

A *run* never raises for anything the program does: syntax and policy rejections, exceptions, budget
trips, a dead or lying worker and cancellation all come back as ``RunResult.error``. What is raised is
misuse of the API and a substrate that cannot start at all.

Tree::

    SandboxError                 root of everything the sandbox raises on purpose
    ├── SandboxUsageError        SANDBOX_USAGE        (bad arguments: tool names, limits, callbacks)
    │   └── SandboxLimitsError   SANDBOX_LIMITS       (a meaningless budget; also a ValueError)
    ├── SandboxClosedError       SANDBOX_CLOSED       (run or session on a sandbox that is not open)
    ├── SessionClosedError       SESSION_CLOSED       (run with a session that was closed)
    └── SandboxStartError        SANDBOX_START_FAILED (the template process could not be started)
        └── SandboxIsolationError SANDBOX_ISOLATION_MISSING (a required isolation layer is missing)

:class:`ToolCallFailure` is not a sandbox error: the integrator's ``call_tool`` handler raises it to
fail one tool call, and the program sees it as ``ToolCallError``.
"""

from __future__ import annotations

from typing import ClassVar

__all__ = (
    "SandboxClosedError",
    "SandboxError",
    "SandboxIsolationError",
    "SandboxLimitsError",
    "SandboxStartError",
    "SandboxUsageError",
    "SessionClosedError",
    "ToolCallFailure",
)


class SandboxError(Exception):
    """Root of every error the sandbox raises deliberately."""

    code: ClassVar[str] = "SANDBOX_ERROR"

    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(message)


class SandboxUsageError(SandboxError):
    """The integrator passed something the sandbox cannot use (the message says which argument)."""

    code: ClassVar[str] = "SANDBOX_USAGE"


class SandboxLimitsError(SandboxUsageError, ValueError):
    """A budget is missing its meaning: zero, negative, NaN, infinite, mistyped or unknown.

    The message names the field. It is also a ``ValueError``, as any bad argument value is in Python.
    """

    code: ClassVar[str] = "SANDBOX_LIMITS"


class SandboxClosedError(SandboxError):
    """A run or session was requested on a sandbox that is not open (enter it with ``async with``)."""

    code: ClassVar[str] = "SANDBOX_CLOSED"


class SessionClosedError(SandboxError):
    """A run named a persistent session that has already been closed."""

    code: ClassVar[str] = "SESSION_CLOSED"


class SandboxStartError(SandboxError):
    """The template process that forks workers could not be started or died during its handshake."""

    code: ClassVar[str] = "SANDBOX_START_FAILED"


class SandboxIsolationError(SandboxStartError):
    """A worker came up without an isolation layer the sandbox was told to require.

    ``missing`` names the layers (as ``RunResult.stats.isolation`` spells them); the message says what
    each needs. Raised when the sandbox starts (its first worker is checked before ``__aenter__``
    returns); a later run that cannot get a complete worker fails with kind ``worker-exit``.
    """

    code: ClassVar[str] = "SANDBOX_ISOLATION_MISSING"

    def __init__(self, message: str, missing: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.missing = missing


class ToolCallFailure(Exception):
    """Raised by a ``call_tool`` handler to fail one tool call.

    The program sees ``ToolCallError`` with ``tool_name``, this ``code`` and ``str(err) == message``.
    Both are plain strings; they cross the protocol as they are.
    """

    def __init__(self, message: str, code: str = "TOOL_FAILED") -> None:
        self.message = str(message)
        self.code = str(code)
        super().__init__(self.message)
