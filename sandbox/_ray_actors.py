"""The actors of a :class:`~codemode.sandbox.ray.RaySandbox`: where they run, their load, their replacement.

:class:`ActorPool` starts one :class:`~codemode.sandbox._ray_node.NodeSandbox` actor per slot, pinned to a
node: by default one per node alive when the sandbox starts. It places each run on the live actor with the
fewest runs in flight (ties go round the actors). Every actor has one ``watch`` call outstanding, which
fails as soon as Ray sees the actor die; an actor that leaves a run unanswered past its deadline is asked
how it is, and taken for hung if it does not answer within ``RestartPolicy.hang_seconds`` (it is killed).
Either way the pool marks it lost (runs in flight on it fail with kind ``worker-exit``, through their own
calls) and starts a replacement on the same node if that node is still there (else on the live node with
the fewest actors), retrying with the restart policy's backoff. A run that finds no live actor waits for
a replacement within its own wall-clock budget.

Actors are created with ``max_restarts=0``: Ray's own restart would bring back an actor with an empty
sandbox under the same handle while runs still wait on the old one; replacing it here keeps each run's
fate tied to one actor.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, Final, cast

import anyio
import anyio.abc
import ray
from ray.exceptions import RayError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from ._ray_node import NodeSandbox
from ._supply import WorkerUnavailable
from .errors import SandboxStartError
from .health import HealthEventKind, RestartPolicy

__all__ = ("ActorPool", "Member", "describe")

#: How long an actor may take to be scheduled and start its sandbox (a busy node is slow to fork).
ACTOR_START: Final = 120.0
#: How long a closing sandbox waits for an actor to stop its sandbox before killing it.
_STOP_WAIT: Final = 10.0
_WAIT_STEP: Final = 0.1

_actor_class: Any = None


def _remote() -> Any:
    """The Ray actor class over :class:`NodeSandbox` (made once, at first use)."""
    global _actor_class
    if _actor_class is None:
        _actor_class = ray.remote(NodeSandbox)
    return _actor_class


def describe(exc: BaseException) -> str:
    """A Ray error's first line, bounded (Ray's messages carry tracebacks and hints)."""
    text = str(exc).strip().splitlines()
    first = text[0] if text else type(exc).__name__
    return first if len(first) <= 240 else first[:237] + "..."


@dataclasses.dataclass(eq=False)
class Member:
    """One actor: its handle, where it runs, and the runs in flight on it (host-side bookkeeping)."""

    index: int
    handle: Any
    node_id: str | None
    pid: int | None
    load: int = 0
    runs: int = 0
    alive: bool = True
    probing: bool = False
    lost: str | None = None

    def where(self) -> str:
        node = (self.node_id or "?")[:12]
        return f"the Ray actor {self.index} (pid {self.pid} on node {node})"


class ActorPool:
    """The live actors of one sandbox (see the module docstring)."""

    def __init__(self, node_options: dict[str, Any], actor_options: Mapping[str, Any], policy: RestartPolicy,
                 on_event: Callable[[HealthEventKind, str], None]) -> None:
        self._node_options = node_options
        self._actor_options = dict(actor_options)
        self._policy = policy
        self._on_event = on_event
        self.members: list[Member] = []
        self._group: anyio.abc.TaskGroup | None = None
        self._changed = anyio.Event()
        self._next = 0
        self.closing = False
        self.restarts = 0
        self.failures = 0
        self.last_error: str | None = None
        self.waiting = 0

    # --- start and stop --------------------------------------------------------------------
    async def start(self, group: anyio.abc.TaskGroup, count: int | None, per_node: int) -> None:
        """Start ``count`` actors (default: ``per_node`` on each live node); raise SandboxStartError if
        one cannot start (those that did are stopped)."""
        self._group = group
        nodes = _live_nodes()
        if not nodes:
            raise SandboxStartError("the Ray instance has no live node to start sandbox actors on")
        total = count if count is not None else per_node * len(nodes)
        started: list[Member | None] = [None] * total
        errors: list[str] = []

        async def one(index: int) -> None:
            try:
                started[index] = await self._start_member(index, nodes[index % len(nodes)])
            except SandboxStartError as exc:
                errors.append(exc.message)

        async with anyio.create_task_group() as starting:
            for index in range(total):
                starting.start_soon(one, index)
        members = [member for member in started if member is not None]
        if errors:
            for member in members:
                self._kill(member)
            raise SandboxStartError(f"{len(errors)} of {total} sandbox actors did not start: {errors[0]}")
        self.members = members
        for member in members:
            group.start_soon(self._watch, member)

    async def _start_member(self, index: int, node_id: str) -> Member:
        try:
            # (hard affinity: a soft one lets Ray place an actor that asks for no CPU on the driver's node)
            strategy = NodeAffinitySchedulingStrategy(node_id, soft=False)
            options: dict[str, Any] = {"max_restarts": 0, "max_task_retries": 0, "num_cpus": 0,
                                       "max_concurrency": 10_000, "scheduling_strategy": strategy}
            options.update(self._actor_options)
            handle = _remote().options(**options).remote(self._node_options)
        except Exception as exc:  # (bad actor_options, a Ray that is shutting down)
            raise SandboxStartError(f"cannot create a sandbox actor: {describe(exc)}") from None
        try:
            with anyio.fail_after(ACTOR_START):
                info = await handle.start.remote()
        except TimeoutError:
            self._kill_handle(handle)
            raise SandboxStartError(f"a sandbox actor did not start within {ACTOR_START:g} s (no node "
                                    "had room for it, or its sandbox template did not start)") from None
        except RayError as exc:
            self._kill_handle(handle)
            raise SandboxStartError(f"a sandbox actor failed to start: {describe(exc)}") from None
        except BaseException:
            self._kill_handle(handle)
            raise
        return Member(index, handle, info.get("node_id"), info.get("pid"))

    async def aclose(self) -> None:
        """Stop every actor's sandbox (its workers are killed and reaped), then kill the actors."""
        self.closing = True
        self._wake()
        members, self.members = self.members, []
        with anyio.CancelScope(shield=True):
            async with anyio.create_task_group() as stopping:
                for member in members:
                    if member.alive:
                        stopping.start_soon(self._stop, member)
        for member in members:
            self._kill(member)

    async def _stop(self, member: Member) -> None:
        with anyio.move_on_after(_STOP_WAIT), contextlib.suppress(RayError):
            await member.handle.stop.remote()

    def _kill(self, member: Member) -> None:
        member.alive = False
        self._kill_handle(member.handle)

    @staticmethod
    def _kill_handle(handle: Any) -> None:
        with contextlib.suppress(Exception):  # (already dead, or Ray shut down)
            ray.kill(handle, no_restart=True)

    # --- placement -------------------------------------------------------------------------
    def pick(self) -> Member | None:
        """The live actor with the fewest runs in flight (ties: the next one round the pool)."""
        members = self.members
        best: Member | None = None
        count = len(members)
        for offset in range(count):
            member = members[(self._next + offset) % count]
            if member.alive and (best is None or member.load < best.load):
                best = member
        if best is not None:
            self._next = (best.index + 1) % max(count, 1)
        return best

    async def acquire(self, deadline: float, cancelled: Callable[[], bool]) -> Member:
        """A live actor, waiting for a replacement within ``deadline`` (anyio clock) while none lives.

        Raises :class:`WorkerUnavailable` (``timeout``, ``aborted`` or ``worker-exit`` when closing).
        """
        self.waiting += 1
        try:
            while True:
                member = self.pick()
                if member is not None:
                    return member
                if self.closing:
                    raise WorkerUnavailable("worker-exit", "the sandbox is closing")
                if cancelled():
                    raise WorkerUnavailable("aborted", "the run was cancelled while it waited for a Ray "
                                                       "actor")
                left = deadline - anyio.current_time()
                if left <= 0:
                    raise WorkerUnavailable("timeout", "the run's wall-clock budget (wall_seconds) ran out "
                                                       "while it waited for a sandbox actor to be replaced "
                                                       f"(last error: {self.last_error or 'none'}); the "
                                                       "program did not run")
                with anyio.move_on_after(min(left, _WAIT_STEP)):
                    await self._changed.wait()
        finally:
            self.waiting -= 1

    def _wake(self) -> None:
        changed, self._changed = self._changed, anyio.Event()
        changed.set()

    # --- loss and replacement ----------------------------------------------------------------
    def lost(self, member: Member, reason: str) -> None:
        """``member`` died or stopped answering: mark it lost and start its replacement (idempotent)."""
        if not member.alive or self.closing:
            return
        member.alive = False
        member.lost = reason
        self.last_error = f"{member.where()} {reason}"
        self._kill_handle(member.handle)
        self._on_event("template-lost", f"{member.where()} {reason}; its runs failed and it is being "
                                        "replaced")
        if self._group is not None:
            self._group.start_soon(self._replace, member)

    def suspect(self, member: Member) -> None:
        """A run on ``member`` got no answer by its deadline: ask the actor how it is, and take it for
        hung (kill and replace it) if it does not answer within the policy's ``hang_seconds``."""
        if member.alive and not member.probing and not self.closing and self._group is not None:
            member.probing = True
            self._group.start_soon(self._probe, member)

    async def _probe(self, member: Member) -> None:
        hang = self._policy.hang_seconds
        try:
            with anyio.move_on_after(hang) as scope:
                await member.handle.health.remote()
            if scope.cancelled_caught:
                self.lost(member, f"did not answer within {hang:g} s (stopped or hung) and was killed")
        except RayError as exc:
            self.lost(member, f"died ({describe(exc)})")
        finally:
            member.probing = False

    def _closed(self) -> bool:
        return self.closing  # (a method: it can change while _replace awaits)

    def _home_for(self, old: Member) -> str:
        """The node for ``old``'s replacement: its own if still alive, else the live node with the fewest
        actors (a node that left the cluster does not come back under the same id)."""
        nodes = _live_nodes()
        if old.node_id in nodes or not nodes:
            return old.node_id or ""
        count = dict.fromkeys(nodes, 0)
        for member in self.members:
            if member.alive and member.node_id in count:
                count[member.node_id] += 1
        return min(nodes, key=lambda node: count[node])

    async def _watch(self, member: Member) -> None:
        try:
            await member.handle.watch.remote()
            reason = "stopped"
        except RayError as exc:
            reason = f"died ({describe(exc)})"
        self.lost(member, reason)

    async def _replace(self, old: Member) -> None:
        failures = 0
        while not self.closing:
            pause = self._policy.backoff(failures)
            if pause:
                await anyio.sleep(pause)
            try:
                member = await self._start_member(old.index, self._home_for(old))
            except SandboxStartError as exc:
                failures += 1
                self.failures += 1
                self.last_error = exc.message
                self._on_event("template-start-failed", f"{exc.message} (attempt {failures})")
                continue
            if self._closed():
                self._kill(member)
                return
            self.members = [member if m is old else m for m in self.members]
            self.restarts += 1
            self._on_event("template-restarted", f"{member.where()} replaces the lost one (restart "
                                                 f"{self.restarts})")
            self._wake()
            assert self._group is not None
            self._group.start_soon(self._watch, member)
            return


def _live_nodes() -> list[str]:
    """The ids of the Ray nodes alive now, sorted."""
    listing = cast(Callable[[], list[dict[str, Any]]], ray.nodes)  # (untyped in Ray)
    return sorted(str(node["NodeID"]) for node in listing() if node.get("Alive"))
