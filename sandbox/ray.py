"""Sandbox workers on a Ray cluster: :class:`RaySandbox`, a drop-in :class:`~codemode.sandbox.Sandbox` whose
programs run on other machines while their tool calls come home.

One host runs out of cores at a few hundred trivial runs per second. A ``RaySandbox`` starts one actor per
Ray node (:mod:`codemode.sandbox._ray_node`); each actor owns an ordinary local sandbox on its node - a
supervised template forking workers with every isolation layer, budget and check of a local run - so a
program runs exactly as it would here. What crosses the network is the run request, the program's log lines,
its tool calls and their replies, and the result. Every tool call is served by the ``call_tool`` of the
host's run (for ``run_code``, the host's :class:`~codemode.runtime.ToolRuntime` pipeline): tools, guards,
approvals and policies never leave the agent's side.

- Placement: each run goes to the live actor with the fewest runs in flight
  (:mod:`codemode.sandbox._ray_actors`). A persistent session stays on one actor.
- Deadlines: the wall-clock budget starts on the host; the node is given what is left of it, and the host
  gives up one :data:`HOP_GRACE` after the deadline should the node not answer (kind ``timeout``).
- Failure: an actor that dies fails its runs in flight with kind ``worker-exit`` and is replaced; a run
  whose actor died before the run reached it (no output, no tool call) goes once more to another actor;
  a session on a lost actor starts afresh elsewhere (``stats.session_restarted``). The host never waits
  on a Ray call beyond the run's deadline.
- Cancellation: the caller's cancel signal cancels the run on its node (kind ``aborted``); an anyio
  cancellation of the caller tells the node to kill the worker and propagates.

It connects to the Ray instance the process has (``ray.init()`` done by the caller), or to ``address``
(then it owns that connection and shuts it down when it closes). ``codemode`` must be importable on every
node (the same version: the actor's class is sent by reference). The Ray cluster is a trust boundary of its
own: values cross it pickled, so every node must be as trusted as the host. It runs on the asyncio
backend (Ray's own event loop integration).
"""

from __future__ import annotations

try:
    import ray
    from ray.exceptions import RayActorError, RayError
except ImportError as _missing:  # pragma: no cover - exercised in an environment without Ray
    raise ImportError("codemode.sandbox.ray needs Ray, which is not installed; install the extra with "
                      "`pip install 'codemode[ray]'`") from _missing

import asyncio
import contextlib
import dataclasses
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Final, Literal

import anyio
import anyio.abc
import anyio.lowlevel

from ._ray_actors import ActorPool, Member, describe
from ._run import CallTool, CancelLike, OnLog, tell_observer
from ._supply import WorkerUnavailable
from .calls import CallAbandonment, CooperativeCallTool, CooperativeHandler
from .errors import (
    SandboxClosedError,
    SandboxStartError,
    SandboxUsageError,
    SessionClosedError,
    ToolCallFailure,
)
from .health import RestartPolicy, SandboxHealth
from .host import DEFAULT_EXECUTOR
from .limits import SandboxLimits
from .lossless import JsonValue, LosslessJsonError, snapshot
from .pool import DEFAULT_MAX_WORKERS, Sandbox, _check_arguments
from .results import RunError, RunResult, RunStats
from .session import SandboxSession, failed_result

__all__ = ("HOP_GRACE", "ActorInfo", "RaySandbox", "RaySession")

#: How long after a run's deadline the host still waits for its node's answer (which normally comes at
#: the deadline: the node enforces the same budget).
HOP_GRACE: Final = 1.0
#: How long one exchange waits on the node for an event before returning none.
_POLL: Final = 10.0
#: How long the host waits for a node to take a cancellation (the node's result is not awaited).
_CANCEL_WAIT: Final = 2.0

_ABANDONED: Final = "the program stopped waiting for the call"
_RUN_OVER: Final = "the run is over"


@dataclasses.dataclass(frozen=True, slots=True)
class ActorInfo:
    """One actor of a :class:`RaySandbox`: its place in the pool, its Ray node and process (pid on that
    node), whether it is live, its runs in flight and the runs it was given."""

    index: int
    node_id: str | None
    pid: int | None
    alive: bool
    in_flight: int
    runs: int


class RaySandbox(Sandbox):
    """Runs programs in isolated workers on the nodes of a Ray cluster (see the module docstring).

    A :class:`~codemode.sandbox.Sandbox`, so it goes wherever one does (``PythonCodeRuntime(sandbox=...)``),
    with the same :class:`~codemode.sandbox.RunResult`, limits, error kinds, cancellation and persistent
    sessions. ``limits``, ``warm``, ``max_workers``, ``executor``, ``layers``, ``require`` and
    ``restart_policy`` configure each node's local sandbox as they would a local one (``warm`` and
    ``max_workers`` are per node; the policy also paces actor replacement). ``address`` is a Ray address to
    connect to when the process has not called ``ray.init()``; ``actors`` the number of actors (default:
    ``actors_per_node`` on each node alive at the start); ``actor_options`` extra Ray actor options
    (``num_cpus``, ``resources``, ``runtime_env``...).
    """

    def __init__(self, limits: SandboxLimits | None = None, *, address: str | None = None,
                 actors: int | None = None, actors_per_node: int = 1, warm: int = 2,
                 max_workers: int = DEFAULT_MAX_WORKERS, executor: str = DEFAULT_EXECUTOR,
                 layers: Iterable[str] | None = None,
                 require: Iterable[str] | Literal["all"] | None = None,
                 restart_policy: RestartPolicy | None = None,
                 actor_options: Mapping[str, Any] | None = None) -> None:
        super().__init__(limits, warm=warm, max_workers=max_workers, executor=executor, layers=layers,
                         require=require, restart_policy=restart_policy)
        if address is not None and type(address) is not str:
            raise SandboxUsageError("address must be a Ray address string (such as 'auto' or "
                                    "'ray://head:10001') or None")
        if actors is not None and (type(actors) is not int or actors < 1):
            raise SandboxUsageError("actors must be an int >= 1 or None (one per node)")
        if type(actors_per_node) is not int or actors_per_node < 1:
            raise SandboxUsageError("actors_per_node must be an int >= 1")
        if actor_options is not None and not isinstance(actor_options, Mapping):
            raise SandboxUsageError("actor_options must be a mapping of Ray actor options")
        self._address = address
        self._actor_count = actors
        self._per_node = actors_per_node
        policy = restart_policy or RestartPolicy()
        node_options: dict[str, Any] = {
            "limits": self.limits.as_dict(), "warm": warm, "max_workers": max_workers, "executor": executor,
            "layers": sorted(self._layers), "require": sorted(self._required) or None,
            "restart_policy": dataclasses.asdict(policy)}
        self._actors = ActorPool(node_options, actor_options or {}, policy, self._emit)

    # --- lifecycle ---------------------------------------------------------------------------
    async def __aenter__(self) -> RaySandbox:
        if self._stack is not None:
            raise SandboxUsageError("a Sandbox can be entered only once")
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            raise SandboxUsageError("RaySandbox runs on asyncio only (Ray's event loop integration); run "
                                    "it with anyio.run(..., backend='asyncio')") from None
        stack = contextlib.AsyncExitStack()
        self._stack = stack
        try:
            if _connect(self._address):
                stack.callback(ray.shutdown)
            self._task_group = await stack.enter_async_context(anyio.create_task_group())
            await self._actors.start(self._task_group, self._actor_count, self._per_node)
        except BaseException:
            if self._task_group is not None:
                self._task_group.cancel_scope.cancel()
            await stack.aclose()
            raise
        self._open = True
        return self

    async def aclose(self) -> None:
        """Close sessions, stop every actor's sandbox and kill the actors (idempotent)."""
        if self._stack is None or not self._open:
            return
        self._open = False
        with anyio.CancelScope(shield=True):
            for session in list(self._sessions):
                await session.aclose()
            await self._actors.aclose()
        assert self._task_group is not None
        self._task_group.cancel_scope.cancel()
        await self._stack.aclose()

    @property
    def template_pid(self) -> int | None:
        """Pid (on its own node) of the first live actor, which owns that node's template; None if none."""
        member = next((m for m in self._actors.members if m.alive), None)
        return member.pid if member is not None else None

    @property
    def live_worker_pids(self) -> list[int]:
        """Always empty: the workers live on the nodes, where a pid of this host means nothing."""
        return []

    def actors(self) -> tuple[ActorInfo, ...]:
        """The actors now, in index order (a lost one until its replacement starts)."""
        return tuple(ActorInfo(m.index, m.node_id, m.pid, m.alive, m.load, m.runs)
                     for m in self._actors.members)

    def health(self) -> SandboxHealth:
        """A host-side snapshot: ``template_pid`` is a live actor's, restarts and failures count actor
        replacements, ``live_workers`` counts runs in flight, ``warm_target`` and ``max_workers`` are summed
        over the actors (each node's own health: :meth:`node_health`)."""
        members = self._actors.members
        alive = sum(m.alive for m in members)
        return SandboxHealth(
            breaker="closed" if alive else "half-open", template_pid=self.template_pid,
            template_restarts=self._actors.restarts, template_failures=self._actors.failures,
            spawn_failures=0, warm=0, warm_target=self._warm * len(members),
            live_workers=sum(m.load for m in members), max_workers=self._max_workers * len(members),
            waiting=self._actors.waiting, last_error=self._actors.last_error, retry_at=None)

    async def node_health(self) -> list[SandboxHealth | None]:
        """Each actor's local sandbox health (``None`` for an actor lost or not answering within 5 s)."""
        found: list[SandboxHealth | None] = []
        for member in list(self._actors.members):
            health = None
            if member.alive:
                with anyio.move_on_after(5.0), contextlib.suppress(RayError):
                    data = await member.handle.health.remote()
                    health = SandboxHealth(**data) if data else None
            found.append(health)
        return found

    async def wait_warm(self) -> None:
        """Wait until every live actor's warm supply is full (benchmarks use this)."""
        while self._open:
            healths = await self.node_health()
            if all(h is not None and h.warm >= h.warm_target for h in healths):
                return
            await anyio.sleep(0.05)

    def prewake(self) -> None:
        """Does nothing: a remote worker cannot be woken for less than the hop it would save."""

    # --- runs --------------------------------------------------------------------------------
    def open_session(self, limits: SandboxLimits | None = None) -> SandboxSession:
        """A persistent session on one actor's worker (``async with``; pass it to :meth:`run`)."""
        if not self._open:
            raise SandboxClosedError("the sandbox is closed; open sessions inside 'async with RaySandbox()'")
        if limits is not None and not isinstance(limits, SandboxLimits):
            raise SandboxUsageError("limits must be a SandboxLimits value")
        session = RaySession(self, limits or self.limits)
        self._sessions.add(session)
        return session

    async def run(self, program: str, *, tool_names: Sequence[str], call_tool: CallTool,
                  limits: SandboxLimits | None = None, cancel: CancelLike | None = None,
                  on_log: OnLog | None = None, session: SandboxSession | None = None) -> RunResult:
        """Run one program on a node and return its result, as :meth:`Sandbox.run` does."""
        started = time.perf_counter()
        names = _check_arguments(program, tool_names, call_tool, limits, cancel, on_log)
        if session is not None and not isinstance(session, RaySession):
            raise SandboxUsageError("session must come from RaySandbox.open_session()")
        if not self._open:
            raise SandboxClosedError("the sandbox is closed; use it inside 'async with RaySandbox()'")
        if session is not None and session not in self._sessions and not session.closed:
            raise SandboxUsageError("session belongs to another sandbox")
        if cancel is not None and cancel.cancelled:
            return failed_result("aborted", "the run was cancelled before it started", started)
        run_limits = limits or self.limits
        if session is not None:
            return await session.run(program, tool_names=names, call_tool=call_tool, limits=limits,
                                     cancel=cancel, on_log=on_log, started=started)
        deadline = anyio.current_time() + run_limits.wall_seconds
        result = failed_result("worker-exit", "no attempt was made", started)
        for _attempt in (1, 2):
            try:
                member = await self._actors.acquire(deadline, _cancelled(cancel))
            except WorkerUnavailable as exc:
                return failed_result(exc.kind, exc.message, started)
            result, unseen = await self._relay(member, program, names, call_tool, run_limits, cancel, on_log,
                                               deadline, started, None, False)
            if not unseen:
                break
        return result

    async def _relay(self, member: Member, program: str, names: Sequence[str], call_tool: CallTool,
                     limits: SandboxLimits, cancel: CancelLike | None, on_log: OnLog | None, deadline: float,
                     started: float, session_id: str | None, restarted: bool) -> tuple[RunResult, bool]:
        """Run one program on ``member``; returns the result and whether the actor died before the run
        left any trace (then it may go once more to another actor)."""
        left = deadline - anyio.current_time()
        if left <= 0:
            return failed_result("timeout", f"the run's wall-clock budget of {limits.wall_seconds:g} s "
                                            "(wall_seconds) ran out before it reached a node", started), False
        run = _HostRun(member, uuid.uuid4().hex, call_tool, on_log)
        node_limits = limits.replace(wall_seconds=left).as_dict()
        member.load += 1
        member.runs += 1
        try:
            with anyio.CancelScope(deadline=deadline + HOP_GRACE) as scope:
                async with anyio.create_task_group() as group:
                    await run.relay(group, program, names, node_limits, session_id, cancel)
            if scope.cancelled_caught and run.result is None and run.failure is None:
                run.failure = RunError("timeout", f"the program ran past its wall-clock budget of "
                                                  f"{limits.wall_seconds:g} s (wall_seconds) and was killed")
                self._actors.suspect(member)  # (its node should have answered at the deadline)
        finally:
            member.load -= 1
            if run.result is None and not run.actor_died:  # (timed out, failed or cancelled: stop its run)
                with anyio.CancelScope(shield=True), anyio.move_on_after(_CANCEL_WAIT), \
                        contextlib.suppress(RayError):
                    await member.handle.cancel.remote(run.run_id, True)
        if run.actor_died:
            self._actors.lost(member, run.actor_died)
        result = run.outcome(limits, started, restarted)
        error = result.error
        if error is not None and error.kind == "timeout":  # (the node was given what was left of the budget)
            message = error.message.replace(f"{left:g} s (wall_seconds)",
                                            f"{limits.wall_seconds:g} s (wall_seconds)")
            result = dataclasses.replace(result, error=RunError("timeout", message))
        return result, run.unseen()


class RaySession(SandboxSession):
    """A persistent session of a :class:`RaySandbox`: one worker, on one actor, keeps its globals.

    Runs are serialised; a run's wall-clock budget covers its wait for the session. Should the actor be
    lost, the next run starts a fresh worker on another actor (``stats.session_restarted``).
    """

    def __init__(self, sandbox: RaySandbox, limits: SandboxLimits) -> None:
        super().__init__(_no_local_workers, limits, sandbox._sessions.discard)
        self._owner = sandbox
        self._member: Member | None = None
        self._session_id = uuid.uuid4().hex

    async def aclose(self) -> None:
        """Close the session on its actor (its worker is killed); later runs raise SessionClosedError."""
        self.closed = True
        self._on_close(self)
        member, self._member = self._member, None
        if member is not None and member.alive:
            with anyio.CancelScope(shield=True), anyio.move_on_after(_CANCEL_WAIT), \
                    contextlib.suppress(RayError):
                await member.handle.close_session.remote(self._session_id)

    async def run(self, program: str, *, tool_names: Sequence[str], call_tool: CallTool,
                  limits: SandboxLimits | None, cancel: CancelLike | None, on_log: OnLog | None,
                  started: float | None = None) -> RunResult:
        """Run one program in the session's worker (called by ``RaySandbox.run(..., session=...)``)."""
        begun = time.perf_counter() if started is None else started
        run_limits = limits or self.limits
        deadline = anyio.current_time() + run_limits.wall_seconds
        with anyio.CancelScope(deadline=deadline) as scope:
            await self._lock.acquire()
        if scope.cancelled_caught:
            return failed_result("timeout", f"the run's wall-clock budget of {run_limits.wall_seconds:g} s "
                                            "(wall_seconds) ran out while it waited for the session's "
                                            "previous run; the program did not run", begun)
        try:
            if self.closed:
                raise SessionClosedError("this session was closed; open a new one")
            restarted = False
            result = failed_result("worker-exit", "no attempt was made", begun)
            for _attempt in (1, 2):
                member = self._member
                if member is None or not member.alive:
                    restarted = restarted or self._had_worker
                    try:
                        member = await self._owner._actors.acquire(deadline, _cancelled(cancel))
                    except WorkerUnavailable as exc:
                        return failed_result(exc.kind, exc.message, begun)
                    self._member, self._had_worker = member, True
                result, unseen = await self._owner._relay(member, program, tool_names, call_tool, run_limits,
                                                          cancel, on_log, deadline, begun, self._session_id,
                                                          restarted)
                if not unseen:
                    break
                restarted = True
            self.restarts += int(result.stats.session_restarted)
            return result
        finally:
            self._lock.release()


class _HostRun:
    """The host's side of one run on one actor: its events, its calls in flight, its outcome."""

    def __init__(self, member: Member, run_id: str, call_tool: CallTool, on_log: OnLog | None) -> None:
        self.member = member
        self.run_id = run_id
        self.cooperative: CooperativeHandler | None = None
        self.plain: Callable[[str, JsonValue], Awaitable[JsonValue]] | None = None
        if isinstance(call_tool, CooperativeCallTool):
            self.cooperative = call_tool.handler
        else:
            self.plain = call_tool
        self.on_log = on_log
        self.logs: list[str] = []
        self.calls = 0
        self.scopes: dict[int, anyio.CancelScope] = {}
        self.abandonments: dict[int, CallAbandonment] = {}
        self.result: RunResult | None = None
        self.failure: RunError | None = None
        #: Why the actor is taken for dead (a Ray call said so), else None.
        self.actor_died: str | None = None
        #: Replies ready for the next exchange, and whether an exchange waits on the node now.
        self.ready: list[tuple[int, bool, Any, str]] = []
        self.exchanging = False

    def unseen(self) -> bool:
        """Nothing of the run was seen (no output, no call): it may go once more elsewhere."""
        return self.failure is not None and self.failure.kind == "worker-exit" and not self.logs \
            and not self.calls

    async def relay(self, group: anyio.abc.TaskGroup, program: str, names: Sequence[str],
                    limits: dict[str, Any], session_id: str | None, cancel: CancelLike | None) -> None:
        """Start the run on the node and act on its events until its result (or a failure)."""
        handle = self.member.handle
        dispose: Callable[[], object] | None = None
        if cancel is not None:
            dispose = self._observe_cancel(cancel, group)
        try:
            events = await handle.run.remote(self.run_id, program, list(names), limits, session_id, _POLL)
            while True:
                called = await self._handle(events, group)
                if self.result is not None or self.failure is not None:
                    break
                if called:  # (a quick tool replies within a step: its reply rides on the exchange)
                    await anyio.lowlevel.checkpoint()
                replies, self.ready = self.ready, []
                self.exchanging = True
                try:
                    events = await handle.exchange.remote(self.run_id, replies, _POLL)
                finally:
                    self.exchanging = False
        except RayActorError as exc:
            self.actor_died = f"died ({describe(exc)})"
            self.failure = RunError("worker-exit", f"{self.member.where()} died before the run finished "
                                                   f"({describe(exc)}); the sandbox replaces it, so the "
                                                   "program can be run again")
        except RayError as exc:
            self.failure = RunError("worker-exit", f"the call to {self.member.where()} failed: "
                                                   f"{describe(exc)}")
        finally:  # (also on the deadline: a shielded cooperative call must hear that the run is over)
            if dispose is not None:
                dispose()
            for abandonment in list(self.abandonments.values()):
                abandonment.abandon(_RUN_OVER)
            group.cancel_scope.cancel()  # (plain calls, the cancel watcher; cooperative ones are shielded)

    async def _handle(self, events: list[tuple[Any, ...]], group: anyio.abc.TaskGroup) -> bool:
        """Act on a batch of events; True if it held a call."""
        called = False
        for event in events:
            tag = event[0]
            if tag == "log":
                await self._log(event[1])
            elif tag == "call":
                self.calls += 1
                called = True
                group.start_soon(self._serve, event[1], event[2], event[3])
            elif tag == "abandon":
                self._abandon(event[1])
            elif tag == "done":
                if isinstance(event[1], RunResult):
                    self.result = event[1]
                else:
                    self.failure = RunError("worker-exit", f"{self.member.where()} sent a malformed result")
            else:  # ("gone",): the node no longer knows the run (its sandbox stopped)
                self.failure = RunError("worker-exit", f"the sandbox of {self.member.where()} stopped during "
                                                       "the run")
        return called

    async def _log(self, text: str) -> None:
        self.logs.append(text)
        await tell_observer(self.on_log, text)

    def _abandon(self, call_id: int) -> None:
        abandonment = self.abandonments.get(call_id)
        if abandonment is not None:
            abandonment.abandon(_ABANDONED)
        scope = self.scopes.get(call_id)
        if scope is not None:
            scope.cancel()

    async def _serve(self, call_id: int, name: str, args: JsonValue) -> None:
        """Serve one call with the run's handler and send the reply to the node."""
        reply: tuple[bool, Any, str] | None = None
        if self.cooperative is not None:
            handler = self.cooperative
            abandonment = CallAbandonment(shielded=True)
            self.abandonments[call_id] = abandonment

            async def call(tool: str, arguments: JsonValue) -> JsonValue:
                return await handler(tool, arguments, abandonment)

            try:
                with anyio.CancelScope(shield=True):
                    reply = await _answer(call, name, args)
            finally:
                self.abandonments.pop(call_id, None)
            if abandonment.abandoned:
                return
        else:
            assert self.plain is not None
            with anyio.CancelScope() as scope:
                self.scopes[call_id] = scope
                try:
                    reply = await _answer(self.plain, name, args)
                finally:
                    self.scopes.pop(call_id, None)
        if reply is None:  # (cancelled: the program abandoned the call)
            return
        if not self.exchanging:
            self.ready.append((call_id, *reply))  # (the next exchange carries it)
            return
        # An exchange waits on the node, maybe for this very reply: send it by itself. It is a one-way
        # message: its result is not awaited (a dead actor fails the run's exchange instead).
        self.member.handle.reply.remote(self.run_id, call_id, *reply)

    def _observe_cancel(self, cancel: CancelLike, group: anyio.abc.TaskGroup) -> Callable[[], object] | None:
        """Cancel the run on its node when ``cancel`` fires: by a callback if the signal offers
        ``on_cancel`` (no task; the cancellation goes as a one-way message), else by a watcher task.
        Returns what undoes the observation, if anything does."""
        subscribe = getattr(cancel, "on_cancel", None)
        if callable(subscribe):
            try:
                disposer = subscribe(lambda reason=None: self.member.handle.cancel.remote(self.run_id))
            except Exception:  # (a broken subscription: the watcher task instead)
                pass
            else:
                return disposer if callable(disposer) else None
        group.start_soon(self._watch_cancel, cancel)
        return None

    async def _watch_cancel(self, cancel: CancelLike) -> None:
        await cancel.wait()
        with contextlib.suppress(RayError):
            await self.member.handle.cancel.remote(self.run_id)

    def outcome(self, limits: SandboxLimits, started: float, restarted: bool) -> RunResult:
        wall_ms = (time.perf_counter() - started) * 1000.0
        result = self.result
        if result is not None:
            stats = dataclasses.replace(result.stats, wall_ms=wall_ms,
                                        session_restarted=result.stats.session_restarted or restarted)
            return dataclasses.replace(result, stats=stats)
        error = self.failure or RunError("worker-exit", "the run ended without a result")
        stats = RunStats(wall_ms=wall_ms, cpu_ms=None, tool_calls=self.calls, isolation=(),
                         session_restarted=restarted)
        return RunResult(value=None, has_value=False, logs=tuple(self.logs), error=error, stats=stats)


async def _answer(call: Callable[[str, JsonValue], Awaitable[JsonValue]], name: str,
                  args: JsonValue) -> tuple[bool, Any, str]:
    """``(ok, value or message, code)`` of one call, as the local sandbox would build its reply."""
    try:
        value = await call(name, args)
    except ToolCallFailure as failure:
        return False, failure.message, failure.code
    except Exception as exc:
        return False, f"the tool handler failed ({type(exc).__name__})", "TOOL_FAILED"
    try:
        return True, snapshot(value, freeze=True, root="result"), ""
    except LosslessJsonError as exc:
        return False, f"the tool's result is not lossless JSON: {exc}", "INVALID_TOOL_OUTPUT"


def _cancelled(cancel: CancelLike | None) -> Callable[[], bool]:
    return lambda: cancel is not None and cancel.cancelled


async def _no_local_workers(limits: SandboxLimits, deadline: float, fresh: bool,
                            cancel: CancelLike | None) -> Any:
    raise SandboxUsageError("a RaySession runs on its actor, never on a local worker")


def _connect(address: str | None) -> bool:
    """Make sure this process is connected to Ray; True if it connected here (and so must disconnect)."""
    if ray.is_initialized():
        return False
    if address is None:
        raise SandboxStartError("RaySandbox needs a running Ray instance: call ray.init() (or "
                                "ray.init(address='auto') after `ray start --head`) before entering it, or "
                                "pass RaySandbox(address=...)")
    try:
        ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False)
    except Exception as exc:
        raise SandboxStartError(f"cannot connect to the Ray instance at {address!r}: "
                                f"{describe(exc)}") from None
    return True
