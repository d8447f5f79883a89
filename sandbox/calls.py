"""How the host serves a program's tool calls: plain handlers, and cooperative ones that settle every call.

``Sandbox.run(call_tool=...)`` takes either a plain async callable ``call_tool(name, args) -> value``,
which the sandbox cancels (an anyio cancellation) when the program stops waiting for the call or the
run ends, or a :class:`CooperativeCallTool`. A cooperative handler is never cancelled by the sandbox:
it runs shielded and receives a :class:`CallAbandonment` that fires instead, and it must then finish
promptly (its value is dropped: the program no longer waits for it). This is for hosts that must settle
every call they started exactly once, such as ``run_code``'s ordered lane, which then serves a call in
the very task that received it instead of handing it to a scheduler task and back.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from .lossless import JsonValue

__all__ = ("CallAbandonment", "CooperativeCallTool", "CooperativeHandler")


def _noop() -> None:
    return None


class CallAbandonment:
    """Fires once, with a reason, when the program no longer waits for one call (or the run ended)."""

    __slots__ = ("_callbacks", "_reason", "_shielded")

    def __init__(self, *, shielded: bool = False) -> None:
        self._reason: str | None = None
        self._callbacks: list[Callable[[str], object]] | None = None
        self._shielded = shielded

    @property
    def shielded(self) -> bool:
        """Whether whoever made this abandonment runs the call in a shielded scope already.

        The sandbox makes its abandonments so (it serves a cooperative handler shielded), which tells
        a consumer such as ``runtime``'s sub-lane that it need not enter a shielded scope of its own.
        """
        return self._shielded

    @property
    def abandoned(self) -> bool:
        """Whether the call was abandoned."""
        return self._reason is not None

    @property
    def reason(self) -> str | None:
        """Why the call was abandoned (``None`` while it was not)."""
        return self._reason

    def on_abandon(self, callback: Callable[[str], object]) -> Callable[[], None]:
        """Call ``callback(reason)`` when the call is abandoned (now, if it was); returns a disposer.

        Callbacks run synchronously in whatever task abandons the call; one that raises does not stop
        the others.
        """
        if self._reason is not None:
            _call_quietly(callback, self._reason)
            return _noop
        if self._callbacks is None:
            self._callbacks = []
        callbacks = self._callbacks
        callbacks.append(callback)

        def dispose() -> None:
            if callback in callbacks:
                callbacks.remove(callback)

        return dispose

    def abandon(self, reason: str) -> None:
        """Fire (the sandbox calls this; idempotent, the first reason is kept)."""
        if self._reason is not None:
            return
        self._reason = reason
        callbacks, self._callbacks = self._callbacks, None
        for callback in callbacks or ():
            _call_quietly(callback, reason)


def _call_quietly(callback: Callable[[str], object], reason: str) -> None:
    with contextlib.suppress(Exception):  # an observer failing must not stop the abandonment
        callback(reason)


CooperativeHandler = Callable[[str, JsonValue, "CallAbandonment"], Awaitable[JsonValue]]


@dataclass(frozen=True, slots=True)
class CooperativeCallTool:
    """A call handler the sandbox never cancels: ``handler(name, args, abandonment) -> value``.

    The handler's exceptions are treated as those of a plain handler (``ToolCallFailure`` becomes the
    program's ``ToolCallError``; anything else a ``TOOL_FAILED`` error).
    """

    handler: CooperativeHandler
