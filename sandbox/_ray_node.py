"""The node side of :class:`~codemode.sandbox.ray.RaySandbox`: one Ray actor that owns a local sandbox.

:class:`NodeSandbox` is the actor's class (the host makes it a Ray actor; this module imports nothing
from Ray, so it stays importable and testable without it). It runs a plain :class:`~codemode.sandbox.Sandbox`
on its node - a supervised template forking isolated workers, with every layer, budget and check of a
local sandbox - and relays each run's traffic with the host:

- ``run`` starts a program and returns its first events; ``exchange`` hands over replies and waits for
  more events. An event is a tuple: ``("log", text)``, ``("call", call_id, name, args)``,
  ``("abandon", call_id)`` (the program stopped waiting for that call, or the run ended) or
  ``("done", RunResult)``; ``("gone",)`` answers an exchange for a run the actor does not know.
- A reply answers one call: ``(call_id, ok, value or message, code)``. It comes with the host's next
  ``exchange``, or by itself (``reply``) when it is ready while an exchange waits. Tools never run here:
  the host serves every call through its own pipeline, so its guards, approvals and policies apply.
- ``cancel`` cancels a run (its worker is killed as in a local run); ``close_session`` closes a
  persistent session (kept here by the host's session id).
- ``watch`` returns only when the actor stops: the host keeps one call of it outstanding, so the
  actor's death fails that call at once and the host learns of it without waiting for a run.

The node enforces the run's budgets next to the worker (the CPU watch reads the node's /proc). The host
sends each run's remaining wall-clock budget, so the deadline holds across the hop. Should the actor die,
its template sees its control socket close and kills its workers: nothing outlives the actor.

The actor's event loop is Ray's asyncio loop. The local sandbox and every run live in one task group
opened by a task the actor starts once (:meth:`NodeSandbox.start`): the only task not awaited by a caller,
as a Ray actor has no enclosing scope of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from typing import Any, Final

import anyio
import anyio.abc

from .calls import CallAbandonment, CooperativeCallTool
from .errors import SandboxError, SandboxUsageError, ToolCallFailure
from .health import RestartPolicy
from .lossless import JsonValue
from .pool import Sandbox
from .results import RunError, RunResult, RunStats
from .session import SandboxSession

__all__ = ("Event", "NodeSandbox")

Event = tuple[Any, ...]

_MAX_EARLY: Final = 1024
#: The longest a ``run`` or ``exchange`` waits for an event before it returns none (the host asks again).
MAX_POLL: Final = 30.0


class _Cancel:
    """A run's cancel signal on the node (a ``CancelLike`` with a callback, so it costs no task)."""

    def __init__(self) -> None:
        self._event = anyio.Event()
        self._callbacks: list[Any] = []

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    async def wait(self) -> None:
        await self._event.wait()

    def on_cancel(self, callback: Any) -> Any:
        self._callbacks.append(callback)
        return lambda: self._callbacks.remove(callback) if callback in self._callbacks else None

    def fire(self) -> None:
        if self._event.is_set():
            return
        self._event.set()
        for callback in list(self._callbacks):
            with contextlib.suppress(Exception):
                callback("cancelled")


class _Relay:
    """One run's mailbox: the events for the host, and the host's replies to its calls."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.wake = anyio.Event()
        self.cancel = _Cancel()
        self.finished = False
        #: The host stopped waiting for this run: forget it once it is over.
        self.forget = False
        self._replies: dict[int, tuple[anyio.Event, list[tuple[bool, Any, str]]]] = {}
        self._next_call = 0

    def push(self, event: Event) -> None:
        self.events.append(event)
        self.wake.set()

    def log(self, text: str) -> None:
        self.push(("log", text))

    async def call(self, name: str, args: JsonValue, abandonment: CallAbandonment) -> JsonValue:
        """Relay one call to the host and wait for its reply (or for the program to abandon it)."""
        call_id = self._next_call
        self._next_call += 1
        arrived = anyio.Event()
        box: list[tuple[bool, Any, str]] = []
        self._replies[call_id] = (arrived, box)
        self.push(("call", call_id, name, args))

        def abandoned(reason: str) -> None:
            self.push(("abandon", call_id))
            arrived.set()

        dispose = abandonment.on_abandon(abandoned)
        try:
            await arrived.wait()
        finally:
            dispose()
            self._replies.pop(call_id, None)
        if not box:
            return None  # (abandoned: the program no longer waits for the value)
        ok, payload, code = box[0]
        if ok:
            return payload  # type: ignore[no-any-return]
        raise ToolCallFailure(str(payload), code)

    def reply(self, call_id: int, ok: bool, payload: Any, code: str) -> None:
        waiter = self._replies.get(call_id)
        if waiter is not None and not waiter[1]:
            waiter[1].append((ok, payload, code))
            waiter[0].set()

    async def take(self, wait: float) -> list[Event]:
        """The events so far, waiting up to ``wait`` seconds for the first."""
        with anyio.move_on_after(min(max(wait, 0.0), MAX_POLL)):
            while not self.events:
                await self.wake.wait()
                self.wake = anyio.Event()
        events, self.events = self.events, []
        return events


class NodeSandbox:
    """A Ray actor's state: a local sandbox on its node, its runs and its persistent sessions.

    ``options`` are the keyword arguments of the local :class:`~codemode.sandbox.Sandbox` (``limits`` as a
    dict, ``restart_policy`` as a dict, ``layers`` and ``require`` as lists).
    """

    def __init__(self, options: dict[str, Any]) -> None:
        self._options = options
        self._sandbox: Sandbox | None = None
        self._group: anyio.abc.TaskGroup | None = None
        self._runs: dict[str, _Relay] = {}
        #: Runs cancelled before they arrived (a cancellation may overtake its run): id -> forget.
        self._early: dict[str, bool] = {}
        self._sessions: dict[str, SandboxSession] = {}
        self._stopping: anyio.Event | None = None
        self._stopped: anyio.Event | None = None
        self._life: asyncio.Task[None] | None = None
        self._failure: str | None = None

    def _local(self) -> Sandbox:
        options = dict(self._options)
        limits = options.pop("limits", None)
        policy = options.pop("restart_policy", None)
        from .limits import SandboxLimits
        return Sandbox(None if limits is None else SandboxLimits(**limits),
                       restart_policy=None if policy is None else RestartPolicy(**policy), **options)

    async def start(self) -> dict[str, Any]:
        """Start the local sandbox (its template and warm workers); return this actor's pid and node."""
        if self._life is None:
            ready = anyio.Event()
            self._stopping, self._stopped = anyio.Event(), anyio.Event()
            self._life = asyncio.get_running_loop().create_task(self._lifespan(ready))
            await ready.wait()
        if self._failure is not None:
            raise SandboxError(self._failure)
        return {"pid": os.getpid(), "node_id": _node_id()}

    async def _lifespan(self, ready: anyio.Event) -> None:
        assert self._stopping is not None and self._stopped is not None
        try:
            async with self._local() as sandbox, anyio.create_task_group() as group:
                self._sandbox, self._group = sandbox, group
                ready.set()
                await self._stopping.wait()
                group.cancel_scope.cancel()
        except Exception as exc:  # (the host is told by start, or by the runs that follow)
            self._failure = f"the node's sandbox could not start or failed: {exc}"
        finally:
            self._sandbox = self._group = None
            for relay in self._runs.values():
                relay.push(("gone",))
            ready.set()
            self._stopped.set()

    async def watch(self) -> None:
        """Return when the actor stops (the host's death detector keeps one call outstanding)."""
        if self._stopped is not None:
            await self._stopped.wait()

    async def stop(self) -> None:
        """Close the sessions and the local sandbox (every worker is killed and reaped)."""
        if self._stopping is None or self._stopped is None:
            return
        self._stopping.set()
        await self._stopped.wait()

    async def health(self) -> dict[str, Any]:
        """The local sandbox's :class:`~codemode.sandbox.SandboxHealth` as JSON (empty once stopped)."""
        return {} if self._sandbox is None else self._sandbox.health().to_json()

    async def run(self, run_id: str, program: str, tool_names: list[str], limits: dict[str, Any],
                  session_id: str | None, wait: float) -> list[Event]:
        """Start a run; return its first events (waiting up to ``wait`` s for one)."""
        if self._sandbox is None or self._group is None:
            return [("done", _failed(self._failure or "the node's sandbox is not running"))]
        if run_id in self._runs:
            raise SandboxUsageError(f"run {run_id} was started already")
        relay = self._runs[run_id] = _Relay()
        if run_id in self._early:
            relay.forget = self._early.pop(run_id)
            relay.cancel.fire()
        self._group.start_soon(self._execute, run_id, relay, program, tool_names, limits, session_id)
        return await self._take(run_id, relay, wait)

    async def _take(self, run_id: str, relay: _Relay, wait: float) -> list[Event]:
        events = await relay.take(wait)
        if relay.finished and not relay.events:
            self._runs.pop(run_id, None)
        return events

    async def exchange(self, run_id: str, replies: list[tuple[int, bool, Any, str]],
                       wait: float) -> list[Event]:
        """Hand over the host's replies, then return more events (waiting up to ``wait`` s for one)."""
        relay = self._runs.get(run_id)
        if relay is None:
            return [("gone",)]
        for call_id, ok, payload, code in replies:
            relay.reply(call_id, ok, payload, code)
        return await self._take(run_id, relay, wait)

    async def reply(self, run_id: str, call_id: int, ok: bool, payload: Any, code: str) -> None:
        """The host's answer to one call (ignored once the run or the call is over)."""
        relay = self._runs.get(run_id)
        if relay is not None:
            relay.reply(call_id, ok, payload, code)

    async def cancel(self, run_id: str, forget: bool = False) -> None:
        """Cancel a run: its worker is killed and its result says ``aborted``. ``forget``: the host no
        longer waits for the result, so the run is dropped once over."""
        relay = self._runs.get(run_id)
        if relay is None:
            self._early[run_id] = forget
            while len(self._early) > _MAX_EARLY:  # (bounded: a run that never comes is not kept)
                del self._early[next(iter(self._early))]
            return
        relay.forget = relay.forget or forget
        relay.cancel.fire()
        if relay.finished and relay.forget:
            self._runs.pop(run_id, None)

    async def close_session(self, session_id: str) -> None:
        """Close a persistent session and kill its worker (idempotent)."""
        session = self._sessions.pop(session_id, None)
        if session is not None:
            await session.aclose()

    async def _execute(self, run_id: str, relay: _Relay, program: str, tool_names: list[str],
                       limits: dict[str, Any], session_id: str | None) -> None:
        from .limits import SandboxLimits
        try:
            sandbox = self._sandbox
            if sandbox is None:
                raise SandboxError("the node's sandbox stopped")
            run_limits = SandboxLimits(**limits)
            session = None
            if session_id is not None:
                session = self._sessions.get(session_id)
                if session is None or session.closed:
                    session = self._sessions[session_id] = sandbox.open_session(run_limits)
            result = await sandbox.run(program, tool_names=tool_names,
                                       call_tool=CooperativeCallTool(relay.call),
                                       limits=run_limits, cancel=relay.cancel, on_log=relay.log,
                                       session=session)
        except SandboxError as exc:
            result = _failed(f"the node's sandbox failed the run: {exc}")
        except Exception as exc:  # (one run's failure must not take the node's sandbox down)
            result = _failed(f"the node's sandbox failed the run: {type(exc).__name__}: {exc}")
        relay.push(("done", result))
        relay.finished = True  # (after the push: an exchange that finds it finished and empty forgets it)
        if relay.forget:
            self._runs.pop(run_id, None)


def _failed(message: str) -> RunResult:
    stats = RunStats(wall_ms=0.0, cpu_ms=None, tool_calls=0, isolation=())
    return RunResult(value=None, has_value=False, logs=(), error=RunError("worker-exit", message),
                     stats=stats)


def _node_id() -> str | None:
    """This actor's Ray node id (None outside Ray: asking then would start a Ray instance)."""
    ray: Any = sys.modules.get("ray")
    if ray is None or not ray.is_initialized():
        return None
    try:
        return str(ray.get_runtime_context().get_node_id())
    except Exception:
        return None
