"""Schedulers over the pipeline's stages: one ordered lane, two callers.

Both callers put each tool call through the same :class:`~codemode.runtime._lane.OrderedLane`: starts
(``tool/call`` event, then the pipeline's ordered *prepare* stage) happen one at a time in submission
order; only *dispatch* (around-execute wrappers and the body) overlaps, in a rolling pool; commits
(*finish*: post-execute, materialisation, observers; then the result event and delivery) happen strictly
in submission order even when bodies finish out of order.

* :func:`execute_tool_calls` runs one model turn's batch (:class:`ToolCallRequest` values, raw JSON
  argument text) under ``rt.max_parallel_tool_calls`` and returns the results in model order. With an
  agent it appends ``tool/call`` (at start) and ``tool/result`` (at commit, linked to its call) to the
  agent's event log. On cancellation it stops starting, commits what started, then records a synthetic
  ``tool/call``/``tool/result`` pair with ``ABORTED_BEFORE_DISPATCH`` for every call that never started,
  so the log always pairs calls and results.
* :func:`open_sub_lane` opens the per-run lane ``run_code`` dispatches its program's tool calls through
  (``await lane.submit(name, args)`` from many concurrent program calls), under
  ``rt.max_parallel_sub_calls``. Child call ids are ``<outer call id>:code:<n>``.

Classification happens right before each start. A call whose definition declares ``claims`` is placed
by its :class:`~codemode.runtime.definitions.ResourceClaims` (two calls overlap only if neither writes what
the other reads or writes); otherwise a concurrency-safe call may overlap anything that writes nothing (it is
treated as "may read anything", so it never overlaps a claimed writer); everything else is an exclusive
barrier. The default stays conservative: undeclared means exclusive.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Protocol

import anyio
import anyio.abc

from codemode.sandbox.lossless import JsonValue, LosslessJsonError, loads, snapshot

from ._lane import EXCLUSIVE, NOTHING, PARALLEL, Footprint, OrderedLane
from ._oneshot import OneShot
from .cancel import CancelSignal, CancelSource
from .errors import AbortedBeforeDispatchError, AbortedError, ToolArgsError, ToolExecutionError
from .events import TOOL_CODE_DISPATCH, TOOL_CODE_DISPATCH_START, Event
from .hooks import CodeDispatch
from .results import ToolResult
from .scope import Agent, Scope

if TYPE_CHECKING:
    from ._runtime import ToolRuntime
    from .pipeline import Execution, ExecutionToken

__all__ = (
    "RUN_SETTLED",
    "OuterCall",
    "SubLane",
    "ToolCallRequest",
    "execute_tool_calls",
    "open_sub_lane",
    "parse_arguments",
)

#: Stands in for the lane's shield when the caller's abandonment says it shields the call already.
_ALREADY_SHIELDED: Final = nullcontext()

#: The ``run_code`` run reason used when a run settles normally (spec 7.2 step 3).
RUN_SETTLED = "run_code settled"


@dataclass(frozen=True, slots=True)
class ToolCallRequest:
    """One tool-call block of an assistant message: its id, the tool name and the raw argument text."""

    call_id: str
    name: str
    arguments_text: str

    def __post_init__(self) -> None:
        for label in ("call_id", "name", "arguments_text"):
            value = getattr(self, label)
            if not isinstance(value, str):
                raise TypeError(f"ToolCallRequest.{label} must be a str, not {type(value).__name__}")
        if not self.call_id:
            raise ValueError("ToolCallRequest.call_id must be a non-empty string")


def parse_arguments(text: str) -> JsonValue:
    """Parse a call's raw argument text: empty (or blank) -> ``{}``, otherwise strict lossless JSON.

    Raises :class:`~codemode.runtime.errors.ToolArgsError` (``INVALID_ARGS``) naming the JSON problem.
    """
    if not text.strip():
        return {}
    try:
        value: JsonValue = loads(text)
    except LosslessJsonError as exc:
        reason = exc.reason.removeprefix("invalid JSON: ")
        raise ToolArgsError([f"the argument text is not valid JSON ({reason})"]) from None
    except (ValueError, RecursionError) as exc:
        raise ToolArgsError([f"the argument text is not valid JSON ({exc})"]) from None
    return value


def _footprint(rt: ToolRuntime, execution: Execution) -> Footprint:
    claims = rt.stages.claims(execution)
    if claims is not None:
        return Footprint(reads=frozenset(claims.reads), writes=frozenset(claims.writes))
    return PARALLEL if rt.stages.execution_mode(execution) == "parallel" else EXCLUSIVE


def _aborted_before_dispatch() -> ToolResult:
    error = AbortedBeforeDispatchError()
    return ToolResult.failure(error.code, error.message)


# ----------------------------------------------------------------------------------------- model turns


class _TurnJob:
    """One model-level call of a turn (the lane drives it; see :class:`~codemode.runtime._lane.LaneJob`)."""

    __slots__ = ("_agent", "_args", "_call_event", "_cancel", "_execution", "_outcome", "_parse_error",
                 "_result_logged", "_rt", "_scope", "request", "result")

    def __init__(self, rt: ToolRuntime, request: ToolCallRequest, scope: Scope | None,
                 cancel: CancelSignal | None) -> None:
        self._rt = rt
        self.request = request
        self._scope = scope
        self._agent = scope if isinstance(scope, Agent) else None
        self._cancel = cancel
        self._args: JsonValue = None
        self._parse_error: ToolArgsError | None = None
        try:
            self._args = parse_arguments(request.arguments_text)
        except ToolArgsError as exc:
            self._parse_error = exc
        self._execution: Execution | None = None
        self._outcome: Any = None
        self._call_event: Event | None = None
        self._result_logged = False
        self.result: ToolResult | None = None

    def pair_unsettled(self) -> None:
        """Log an ABORTED result for a call whose ``tool/call`` is logged but whose commit never ran.

        Synchronous on purpose: it runs while the turn is being torn down by an anyio cancellation,
        where nothing may be awaited, and it keeps the event log paired.
        """
        if self._agent is not None and self._call_event is not None and not self._result_logged:
            self._result_logged = True
            self._agent.events.append_tool_result(self._call_event, ToolResult.failure(
                AbortedError.code, "tool call aborted: the turn was cancelled before this call settled"))

    def _ensure_execution(self) -> Execution:
        if self._execution is None:
            self._execution = self._rt.stages.create(
                self.request.name, self._args, call_id=self.request.call_id, agent=self._scope,
                cancel=self._cancel)
        return self._execution

    def footprint(self) -> Footprint:
        if self._parse_error is not None:
            return NOTHING
        return _footprint(self._rt, self._ensure_execution())

    async def start(self) -> bool:
        if self._agent is not None:
            self._call_event = self._agent.events.append_tool_call(
                self.request.call_id, self.request.name, self.request.arguments_text)
        if self._parse_error is not None:
            self.result = ToolResult.failure(self._parse_error.code, self._parse_error.message)
            return False
        prepared = await self._rt.stages.prepare(self._ensure_execution())
        self._outcome = prepared
        return bool(prepared.ready)

    async def run(self) -> None:
        self._outcome = await self._rt.stages.dispatch(self._outcome)

    async def commit(self) -> None:
        if self.result is None:
            self.result = await self._rt.stages.finish(self._outcome)
        if self._agent is not None and self._call_event is not None and not self._result_logged:
            self._result_logged = True
            self._agent.events.append_tool_result(self._call_event, self.result)

    async def abandon(self, reason: str) -> None:
        self.result = _aborted_before_dispatch()
        if self._agent is not None:
            call = self._agent.events.append_tool_call(
                self.request.call_id, self.request.name, self.request.arguments_text)
            self._agent.events.append_tool_result(call, self.result)


async def execute_tool_calls(rt: ToolRuntime, calls: Sequence[ToolCallRequest], *,
                             agent: Scope | None = None,
                             cancel: CancelSignal | None = None) -> list[ToolResult]:
    """Run one model turn's tool calls; return their results in model order (see the module docstring).

    Invalid argument text fails only its own call (``INVALID_ARGS``). The caller's ``cancel`` signal is
    the step signal: every call runs under it, and once it fires no further call starts. Events are
    appended only when ``agent`` is a :class:`~codemode.runtime.Agent` (a plain scope has no event log).
    """
    if not isinstance(calls, Sequence) or isinstance(calls, str | bytes):  # type: ignore[unreachable]
        raise TypeError(f"calls must be a sequence of ToolCallRequest, not {type(calls).__name__}")
    for index, call in enumerate(calls):
        if not isinstance(call, ToolCallRequest):
            raise TypeError(f"calls[{index}] must be a ToolCallRequest, not {type(call).__name__}")
    if agent is not None and not isinstance(agent, Scope):
        raise TypeError(
            f"agent must be a codemode.runtime.Agent (or Scope) or None, not {type(agent).__name__}")
    if cancel is not None and not isinstance(cancel, CancelSignal):
        raise TypeError(
            f"cancel must be a codemode.runtime.CancelSignal or None, not {type(cancel).__name__}")
    jobs = [_TurnJob(rt, call, agent, cancel) for call in calls]
    if not jobs:
        return []
    lane = OrderedLane(max_parallel=rt.max_parallel_tool_calls, cancel=cancel)
    for job in jobs:
        lane.submit(job)
    dispose = cancel.on_cancel(lambda _reason: lane.notify()) if cancel is not None else None
    try:
        await lane.drive(until_idle=True)
    finally:
        if dispose is not None:
            dispose()
        for job in jobs:  # torn down by an anyio cancellation: keep every logged call paired
            job.pair_unsettled()
    results: list[ToolResult] = []
    for job in jobs:
        assert job.result is not None, "the lane commits or abandons every job"
        results.append(job.result)
    return results


# ------------------------------------------------------------------------------------ run_code children


class Abandonable(Protocol):
    """Tells when a program stopped waiting for a call (``codemode.sandbox.CallAbandonment`` is one).

    One that also has ``shielded = True`` says its maker already runs the call in a shielded scope;
    the lane then enters none of its own (one cancel scope less per child call).
    """

    def on_abandon(self, callback: Callable[[str], object]) -> Callable[[], object]: ...


#: ``on_commit(name, sub_call_id, result)`` of :func:`open_sub_lane`.
CommitObserver = Callable[[str, str, ToolResult], None]


class OuterCall(Protocol):
    """What a sub-lane needs of the outer ``run_code`` call (a ``ToolCall`` or ``ToolContext``)."""

    @property
    def call_id(self) -> str: ...

    @property
    def root_call_id(self) -> str: ...

    @property
    def agent(self) -> Scope | None: ...

    @property
    def token(self) -> ExecutionToken: ...


class _ChildJob:
    """One child call of a ``run_code`` program, submitted through :meth:`SubLane.submit`."""

    __slots__ = ("_args", "_call_id", "_execution", "_lane", "_name", "_outcome", "_own", "_started",
                 "done", "failure", "result")

    def __init__(self, lane: SubLane, name: str, args: JsonValue, call_id: str) -> None:
        self._lane = lane
        self._name = name
        self._args = args
        self._call_id = call_id
        self._execution: Execution | None = None
        self._outcome: Any = None
        self._started: dict[str, Any] | None = None
        self.done = OneShot()
        self.result: ToolResult | None = None
        self.failure: Exception | None = None
        self._own = CancelSource(follows=lane.signal)  # (the run's signal, or this call's own cancel)

    @property
    def name(self) -> str:
        """The tool's name."""
        return self._name

    def cancel(self, reason: str) -> None:
        """The program stopped waiting for this call: cancel it alone (it still commits, as ABORTED)."""
        self._own.cancel(reason)

    def abandoned_by_program(self, _reason: object = None) -> None:
        """:meth:`cancel` with the reason a program's give-up reads as."""
        self.cancel(f"the program stopped waiting for {self._name}")

    def outcome(self) -> ToolResult:
        """The committed result; raises the failure when the call produced none of its own."""
        if self.failure is not None:
            raise self.failure
        assert self.result is not None
        return self.result

    def _ensure_execution(self) -> Execution:
        if self._execution is None:
            lane = self._lane
            cancel = self._own.signal
            self._execution = lane.runtime.stages.create(
                self._name, self._args, call_id=self._call_id, root_call_id=lane.outer.root_call_id,
                agent=lane.outer.agent, parent=lane.outer.token, cancel=cancel)
        return self._execution

    def footprint(self) -> Footprint:
        return _footprint(self._lane.runtime, self._ensure_execution())

    def _dispatch_fields(self) -> dict[str, Any]:
        outer = self._lane.outer
        return {"root_call_id": outer.root_call_id, "parent_call_id": outer.call_id,
                "sub_call_id": self._call_id, "name": self._name, "arguments": self._args}

    async def start(self) -> bool:
        execution = self._ensure_execution()
        agent = self._lane.agent
        if agent is not None:
            self._started = self._dispatch_fields()
            agent.events.append(TOOL_CODE_DISPATCH_START, self._started)
        prepared = await self._lane.runtime.stages.prepare(execution)
        self._outcome = prepared
        return bool(prepared.ready)

    async def run(self) -> None:
        self._outcome = await self._lane.runtime.stages.dispatch(self._outcome)

    async def commit(self) -> None:
        lane = self._lane
        try:
            result = await lane.runtime.stages.finish(self._outcome)
            self._own.detach()  # (settled: the run's end no longer concerns it)
            if lane.on_commit is not None:
                lane.on_commit(self._name, self._call_id, result)
        except BaseException:  # an internal failure: the lane re-raises it; never leave the caller waiting
            self.failure = ToolExecutionError(f"{self._name} could not be settled (internal failure)")
            self.done.set()
            raise
        self.result = result
        if lane.over_reason is not None:
            self.failure = AbortedError(
                f"run_code run is over ({lane.over_reason}); {self._name} result discarded")
        agent = lane.agent
        if agent is not None and self._started is not None:
            content = result.content
            stages = lane.runtime.stages
            if stages.dispatch_log_hooks:
                content = await stages.dispatch_log_content(CodeDispatch(
                    self._started["root_call_id"], self._started["parent_call_id"], self._call_id,
                    self._name, self._args, agent, result.is_error, content))
            agent.events.append(TOOL_CODE_DISPATCH, {
                **self._started, "is_error": result.is_error, "content": content})
        self.done.set()

    async def abandon(self, reason: str) -> None:
        self._own.detach()
        self.failure = AbortedBeforeDispatchError(
            f"run_code run is over ({reason}); {self._name} tool call abandoned")
        self.done.set()


class SubLane:
    """The per-run lane of one ``run_code`` execution; create it with :func:`open_sub_lane`.

    :meth:`submit` may be awaited from many concurrent program calls; the lane numbers them in
    submission order, starts them in that order, overlaps only their dispatch and delivers each result
    when it commits, so results arrive in submission order.
    """

    def __init__(self, rt: ToolRuntime, outer: OuterCall, signal: CancelSignal, lane: OrderedLane,
                 on_commit: CommitObserver | None = None) -> None:
        self.runtime = rt
        self.outer = outer
        self.signal = signal
        self.on_commit = on_commit
        agent = outer.agent
        self.agent: Agent | None = agent if isinstance(agent, Agent) else None
        self._lane = lane
        self._count = 0
        self._waiting: set[_ChildJob] = set()
        self.over_reason: str | None = None
        # The driver starts with the first submission: a program that calls no tool costs no task.
        self._group: anyio.abc.TaskGroup | None = None
        self._driving = False

    @property
    def submitted(self) -> int:
        """How many child calls were numbered so far (the last ``n`` of ``<outer>:code:<n>``)."""
        return self._count

    @property
    def peak_running(self) -> int:
        """The largest number of child bodies that ran at the same time."""
        return self._lane.peak_running

    async def submit(self, name: str, args: JsonValue, *,
                     abandoned: Abandonable | None = None) -> ToolResult:
        """Dispatch one child call and return its committed result (errors are results, not raises).

        Raises a :class:`~codemode.runtime.errors.ToolError` only when the call never produced a result of its
        own: ``ToolArgsError`` for non-JSON arguments (no number consumed), and, once the run is over,
        ``AbortedBeforeDispatchError`` (``... not dispatched`` / ``... tool call abandoned``) or
        ``AbortedError`` (``... result discarded``). The caller turns these into the program's
        ``ToolCallError``.

        Without ``abandoned``, an anyio cancellation of the caller means the program stopped waiting:
        the call is cancelled alone (it still commits, as ABORTED) and the cancellation propagates at
        once. With ``abandoned`` (e.g. the sandbox's ``CallAbandonment``) the caller promises not to be
        cancelled and to fire ``abandoned`` instead; the call is then awaited to its commit, and when
        the lane is idle it is driven in the caller's own task, with no hand-over to the lane's tasks.
        """
        if self.over_reason is not None:
            raise AbortedBeforeDispatchError(
                f"run_code run is over ({self.over_reason}); {name} not dispatched")
        try:
            frozen = snapshot(args, freeze=True, root="arguments")
        except LosslessJsonError as exc:
            raise ToolArgsError([
                "tool arguments must be lossless JSON (call the tool with an arguments object, e.g. `{}`): "
                + str(exc)]) from None
        self._count += 1
        job = _ChildJob(self, name, frozen, f"{self.outer.call_id}:code:{self._count}")
        if abandoned is not None:
            return await self._settle(job, abandoned)
        self._enqueue(job)
        try:
            await job.done.wait()
        except anyio.get_cancelled_exc_class():
            job.abandoned_by_program()
            raise
        finally:
            self._waiting.discard(job)
        return job.outcome()

    async def _settle(self, job: _ChildJob, abandoned: Abandonable) -> ToolResult:
        """Await ``job`` to its commit, driving it here when the lane is idle (see :meth:`submit`)."""
        dispose = abandoned.on_abandon(job.abandoned_by_program)
        shielded = getattr(abandoned, "shielded", False) is True
        try:
            with _ALREADY_SHIELDED if shielded else anyio.CancelScope(shield=True):
                if self._lane.idle():
                    await self._lane.run_inline(job)
                    if not job.done.is_set():  # a stage failed: the lane stopped (open_sub_lane raises)
                        job.failure = ToolExecutionError(
                            f"{job.name} could not be settled (internal failure)")
                        job.done.set()
                else:
                    self._enqueue(job)
                    await job.done.wait()
        finally:
            dispose()
            self._waiting.discard(job)
        return job.outcome()

    def _enqueue(self, job: _ChildJob) -> None:
        """Hand ``job`` to the lane's driver (started with the first job that needs it)."""
        self._waiting.add(job)
        if not self._driving and self._group is not None:
            self._driving = True
            self._group.start_soon(self._drive)
        self._lane.submit(job)

    def _close(self, reason: str) -> None:
        if self.over_reason is None:
            self.over_reason = reason
        self._lane.close(self.over_reason)

    async def _drive(self) -> None:
        """Run the lane; whatever ends it, no program call is left waiting for an outcome.

        The driver is shielded from the enclosing scope: the outer call's cancellation reaches a
        ``run_code`` body as an anyio cancellation of the scope this lane lives in, and the lane must
        still drain (bodies see the run signal instead, and every started call is committed and
        logged). The drain ends because the run signal fires whenever the lane closes.
        """
        try:
            with anyio.CancelScope(shield=True):
                await self._lane.drive(until_idle=False)
        finally:
            reason = self.over_reason or RUN_SETTLED
            for job in list(self._waiting):
                if not job.done.is_set():
                    await job.abandon(reason)


@asynccontextmanager
async def open_sub_lane(rt: ToolRuntime, *, outer_call: OuterCall, max_parallel: int | None = None,
                        cancel: CancelSignal | None = None,
                        on_commit: CommitObserver | None = None) -> AsyncIterator[SubLane]:
    """Open the child-call lane of one ``run_code`` run; closing it drains the run.

    ``on_commit(name, sub_call_id, result)`` is called as each child call commits, in submission order
    and before the program gets the value (``run_code`` hands the child's contexts, images and turn
    conclusion up to its own call there, so they keep the order the calls were made in).

    Child calls run under a run signal that follows ``cancel`` (the outer call's signal) and fires with
    ``run_code settled`` when the block exits. On exit: queued calls are abandoned (their ``submit``
    raises ``... tool call abandoned``), in-flight bodies see the run signal and are awaited, every
    started call is committed exactly once (its ``tool/code-dispatch`` event appended), in submission
    order, before this context manager returns.
    """
    cap = rt.max_parallel_sub_calls if max_parallel is None else max_parallel
    source = CancelSource()
    signal = CancelSignal.any_of(cancel, source.signal)
    lane = OrderedLane(max_parallel=cap, cancel=signal)
    sub = SubLane(rt, outer_call, signal, lane, on_commit)

    def on_outer_cancel(reason: str) -> None:
        sub._close(reason)

    dispose = signal.on_cancel(on_outer_cancel)
    try:
        async with anyio.create_task_group() as group:
            sub._group = group
            try:
                yield sub
            finally:
                sub._close(RUN_SETTLED)
                source.cancel(sub.over_reason or RUN_SETTLED)
        if not sub._driving and lane.failure is not None:
            raise lane.failure  # (an inline call's stage failed; a driver would have raised it)
    finally:
        dispose()
        signal.detach()
