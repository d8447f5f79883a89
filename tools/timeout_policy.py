"""The tool-call timeout policy: an around-execute wrapper enforcing each tool's ``timeout_ms``.

For a call whose visible definition declares ``timeout_ms`` the wrapper fuses the caller's cancellation
with a deadline of its own and runs the inner stages under it (``call_next(cancel=deadline)``); the
body sees cancellation at its next await when the deadline passes. When the wrapper's *own* deadline
fired first, the outcome is replaced by ``TOOL_TIMEOUT`` (``tool call timed out after <ms>ms``) whatever
the body returned (its abort, or a success that ignored the signal). When the caller cancelled first,
the pipeline's ``ABORTED`` stands, even if the deadline passes later. Calls of tools without a budget
pass through untouched. Child calls of ``run_code`` go through the same pipeline and so are covered too.

Better than the reference (spec 13.6), stall protection: cancellation is cooperative, and a body may
ignore it. Once a call is cancelled (by its deadline or by the caller), the body gets ``grace_ms`` to
settle. If it has not, the call is settled *without* it as ``TOOL_STALLED`` and reported: a
``tool/stalled`` event is appended to the agent's log (when the call has one) and a warning is logged.

What happens to the stuck body: it is never silently abandoned. To be able to settle a call without
its body, the policy runs each budgeted call's inner stages in a task of the runtime's own task group
(``rt.start_soon``, available while ``async with ToolRuntime(...) as rt`` is open) and waits for their
outcome. A stalled body stays in that group: it has been told to stop (its signal fired, its cancel
scope is cancelled), :attr:`TimeoutPolicy.stalled` lists it until it does, its late outcome is dropped,
and the runtime awaits it when it exits, so nothing outlives the runtime. If that task group is torn
down under a body (the host failed), the call reads as ``ABORTED``. When the runtime is not entered no
task can adopt the body: the policy then behaves like the reference (it still reports the stall, event
and warning, when the grace period expires, but keeps awaiting the body).

A genuine outer cancellation of the calling task (the host tearing the turn down) cancels the deadline
signal too, so an adopted body is told to stop as well.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, Final

import anyio

from codemode.runtime.cancel import CancelSource
from codemode.runtime.errors import AbortedError, ToolStalledError, ToolTimeoutError
from codemode.runtime.results import ToolResult
from codemode.runtime.scope import Agent

if TYPE_CHECKING:
    from codemode.runtime._runtime import ToolRuntime
    from codemode.runtime.pipeline import ToolCall

__all__ = ("DEFAULT_GRACE_MS", "TOOL_STALLED_EVENT", "TimeoutPolicy", "install_timeout_policy")

_log = logging.getLogger(__name__)

#: How long a cancelled body may take to settle before the call is reported as stalled.
DEFAULT_GRACE_MS: Final = 5_000.0
#: The log-only event recording a stalled call.
TOOL_STALLED_EVENT: Final = "tool/stalled"

CallNext = Callable[..., Awaitable[ToolResult]]


def _shown(ms: float) -> int | float:
    return int(ms) if float(ms).is_integer() else ms


class _Attempt:
    """The state of one budgeted call, shared by the wrapper, the timer and the body task."""

    __slots__ = ("call", "cancelled_at", "done", "failure", "progress", "result", "timed_out")

    def __init__(self, call: ToolCall) -> None:
        self.call = call
        self.timed_out = False
        self.cancelled_at: float | None = None
        self.result: ToolResult | None = None
        self.failure: Exception | None = None
        self.done = anyio.Event()
        self.progress = anyio.Event()  # set when the body settled or the call was cancelled

    def note_cancel(self, _reason: str = "") -> None:
        if self.cancelled_at is None:
            self.cancelled_at = anyio.current_time()
        self.progress.set()


class TimeoutPolicy:
    """The installed policy: call it to uninstall; :attr:`stalled` lists bodies still running.

    Build it with :func:`install_timeout_policy`.
    """

    def __init__(self, rt: ToolRuntime, grace_ms: float) -> None:
        self._rt = rt
        self.grace_ms = grace_ms
        self._stalled: dict[int, ToolCall] = {}
        self._dispose: Callable[[], None] | None = None

    @property
    def stalled(self) -> tuple[ToolCall, ...]:
        """Calls reported stalled whose bodies are still running (in the runtime's task group)."""
        return tuple(self._stalled.values())

    def __call__(self) -> None:
        """Uninstall the wrapper (idempotent); calls already inside it finish under it."""
        dispose, self._dispose = self._dispose, None
        if dispose is not None:
            dispose()

    async def _wrap(self, call: ToolCall, call_next: CallNext) -> ToolResult:
        definition = self._rt.get(call.name, call.agent)
        timeout_ms = None if definition is None else definition.timeout_ms
        if timeout_ms is None:
            return await call_next()
        attempt = _Attempt(call)
        deadline = CancelSource()
        caller = call.cancel
        dispose_caller = caller.on_cancel(attempt.note_cancel) if caller is not None else None

        async def timer() -> None:
            await anyio.sleep(timeout_ms / 1000)
            if attempt.done.is_set():
                return
            attempt.timed_out = caller is None or not caller.cancelled
            attempt.note_cancel()
            deadline.cancel(ToolTimeoutError(timeout_ms).message)

        async def body() -> None:
            try:
                attempt.result = await call_next(cancel=deadline.signal)
            except Exception as exc:  # re-raised in the calling task, never inside the policy's group
                attempt.failure = exc
            finally:
                attempt.done.set()
                attempt.progress.set()
                self._stalled.pop(id(attempt), None)

        try:
            async with anyio.create_task_group() as local:
                local.start_soon(timer)
                adopted = self._adopt(body)
                if not adopted:
                    local.start_soon(body)
                stalled = await self._await_settle(attempt, timeout_ms, adopted=adopted)
                local.cancel_scope.cancel()
        except BaseException:
            # our own task is being torn down (a genuine outer cancellation): make an adopted body stop too
            deadline.cancel("the calling task was cancelled")
            raise
        finally:
            if dispose_caller is not None:
                dispose_caller()
        if stalled:
            return self._stalled_result(timeout_ms, attempt)
        if attempt.failure is not None:
            raise attempt.failure
        if attempt.result is None:  # the runtime's task group was torn down under the adopted body
            aborted = AbortedError("tool call aborted: the runtime closed while it was running")
            return ToolResult.failure(aborted.code, aborted.message)
        if attempt.timed_out:
            error = ToolTimeoutError(timeout_ms)
            return ToolResult.failure(error.code, error.message,
                                      additional_contexts=attempt.result.additional_contexts)
        return attempt.result

    def _adopt(self, body: Callable[[], Coroutine[Any, Any, None]]) -> bool:
        """Run ``body`` in the runtime's own task group when the runtime is entered (so it may outlive us)."""
        if getattr(self._rt, "closed", False):
            return False
        try:
            self._rt.start_soon(body, name="timeout-policy body")
        except RuntimeError:  # the runtime is not entered: no task can adopt the body
            return False
        return True

    async def _await_settle(self, attempt: _Attempt, timeout_ms: float, *, adopted: bool) -> bool:
        """Wait for the body; True when it stalled past the grace period and the policy adopted it."""
        await attempt.progress.wait()
        if attempt.done.is_set():
            return False
        assert attempt.cancelled_at is not None
        remaining = attempt.cancelled_at + self.grace_ms / 1000 - anyio.current_time()
        with anyio.move_on_after(max(remaining, 0)):
            await attempt.done.wait()
        if attempt.done.is_set():
            return False
        self._report(attempt, timeout_ms, adopted=adopted)
        if adopted:
            self._stalled[id(attempt)] = attempt.call
            return True
        await attempt.done.wait()
        return False

    def _report(self, attempt: _Attempt, timeout_ms: float, *, adopted: bool) -> None:
        call = attempt.call
        _log.warning('tool "%s" (%s) ignored cancellation for %sms; %s', call.name, call.call_id,
                     _shown(self.grace_ms),
                     "settled as stalled, its body keeps running until it stops" if adopted
                     else "still awaiting it (enter the runtime with `async with` to adopt stalled bodies)")
        agent = call.agent
        if isinstance(agent, Agent):
            agent.events.append(TOOL_STALLED_EVENT, {
                "call_id": call.call_id, "root_call_id": call.root_call_id, "name": call.name,
                "timeout_ms": _shown(timeout_ms), "grace_ms": _shown(self.grace_ms),
                "timed_out": attempt.timed_out, "adopted": adopted,
            })

    def _stalled_result(self, timeout_ms: float, attempt: _Attempt) -> ToolResult:
        cause = f"timed out after {_shown(timeout_ms)}ms" if attempt.timed_out else "was cancelled"
        error = ToolStalledError(
            f"tool call {cause} and its body ignored cancellation for {_shown(self.grace_ms)}ms; "
            "the call was settled without it")
        return ToolResult.failure(error.code, error.message)


def install_timeout_policy(rt: ToolRuntime, *, grace_ms: float = DEFAULT_GRACE_MS) -> TimeoutPolicy:
    """Install the timeout wrapper on ``rt``'s execute stage; returns the policy (call it to uninstall).

    ``grace_ms`` (positive, finite) is how long a cancelled body may keep running before the call is
    reported stalled. Enter the returned policy as an async context manager to let stalled calls settle
    without their bodies (see the module docstring).
    """
    if (isinstance(grace_ms, bool) or not isinstance(grace_ms, int | float) or not math.isfinite(grace_ms)
            or grace_ms <= 0):
        raise ValueError(f"grace_ms must be a positive finite number of milliseconds, not {grace_ms!r}")
    policy = TimeoutPolicy(rt, float(grace_ms))
    policy._dispose = rt.around_execute(policy._wrap, enforces_timeouts=True)
    return policy

