"""The five-stage execution pipeline, exposed stage by stage for schedulers.

Stages (spec 3): **create** (identity, execution token, lossless frozen snapshot of the arguments, the
collapse check), **prepare** (pre-execute waterfall, approval, guards), **dispatch** (around wrappers, then
the base dispatch: argument validation and the tool body under a cancel scope), **finish** (post-execute
waterfall, cancellation replacement, ``finalize_content`` exactly once, broadcast to observers).

INTERNAL API for ``codemode.runtime.scheduler`` and ``codemode.tools.run_code``; ``rt.stages`` is a
:class:`Stages`::

    execution = rt.stages.create(name, arguments, *, call_id, root_call_id=None, agent=None,
                                 parent=None, cancel=None)              # sync, never raises for bad input
    execution.call        -> ToolCall (frozen: name, arguments, call_id, root_call_id, agent, token,
                                       parent, cancel)
    execution.token       -> ExecutionToken (pass as ``parent=`` for child calls)
    rt.stages.execution_mode(execution) -> "parallel" | "exclusive"     # re-classify right before start
    rt.stages.claims(execution) -> ResourceClaims | None                # opt-in resource claims
    prepared = await rt.stages.prepare(execution)                       # ordered stage
    prepared.ready        -> bool (False: already settled, do not dispatch; pass it to finish)
    dispatched = await rt.stages.dispatch(prepared)                     # the only overlapping stage
    result = await rt.stages.finish(dispatched_or_prepared)             # ordered stage -> ToolResult
    content = await rt.stages.dispatch_log_content(dispatch)            # a child's logged content

``rt.execute(...)`` is exactly ``create -> prepare -> dispatch -> finish``. Every stage is total: bad
input, failing hooks and failing bodies become error results. Only a genuine outer anyio cancellation of
the calling task propagates (a started body is always awaited first: it runs in the caller's task).

Result kinds: a *final* result skips post-execute (bad arguments at creation, a collapsed call, a broken
pre-execute hook or guard, a raising wrapper); a *post-result* goes through post-execute (denials,
unknown tool at dispatch, every dispatch outcome).

Cancellation (spec 3.8): cancelled before the body was invoked -> ``ABORTED_BEFORE_DISPATCH``; after ->
only a *success* is replaced by ``ABORTED``; denials, tool failures, timeouts and policy failures are more
specific and survive.
"""

from __future__ import annotations

import inspect
import itertools
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Final, Literal, NamedTuple

import anyio

from codemode.sandbox.lossless import FrozenList, LosslessJsonError, snapshot

from ._fast import freeze, validate_fast
from .approval import resolve_ask
from .cancel import NEVER, CancelSignal
from .definitions import ResourceClaims, ToolDefinition
from .errors import (
    AbortedBeforeDispatchError,
    AbortedError,
    CodemodeError,
    PolicyError,
    ToolArgsError,
    ToolDeniedError,
    ToolExecutionError,
    ToolNotFoundError,
    ToolOutputError,
)
from .hooks import UNSET, Accept, Allow, Ask, Block, CodeDispatch, Decision, Deny, PostDecision
from .modes import RUN_CODE, collapses
from .results import ToolErrorInfo, ToolResult, text_block, text_of
from .scope import Scope

if TYPE_CHECKING:
    from ._runtime import ToolRuntime

__all__ = (
    "Dispatched",
    "Execution",
    "ExecutionMode",
    "ExecutionToken",
    "Prepared",
    "Stages",
    "ToolCall",
    "ToolContext",
    "signpost_message",
)

logger = logging.getLogger("runtime")

ExecutionMode = Literal["parallel", "exclusive"]
_EMPTY: Final = FrozenList()
_ALLOW: Final = Allow()
_ACCEPT: Final = Accept()


def signpost_message(name: str) -> str:
    """The UNKNOWN_TOOL message of a collapsed call: the name exists, but only inside ``run_code``."""
    return (f'unknown tool "{name}": only `{RUN_CODE}` is callable directly; call `{name}` from inside a '
            f"`{RUN_CODE}` program instead")


class ExecutionToken:
    """An opaque identity minted per execution; child calls carry their parent's token."""

    __slots__ = ("call_id",)

    def __init__(self, call_id: str) -> None:
        self.call_id = call_id

    def __repr__(self) -> str:
        return f"<ExecutionToken {self.call_id}>"


class ToolCall(NamedTuple):
    """The frozen execution object handed to hooks, guards and observers.

    ``arguments`` is the deep-frozen lossless snapshot (None when the arguments were not lossless JSON);
    ``cancel`` is the caller's signal (:data:`~codemode.runtime.cancel.NEVER` when there is none). A named
    tuple rather than a frozen dataclass because one is built per call on the hot path (5x cheaper).
    """

    name: str
    arguments: Any
    call_id: str
    root_call_id: str
    agent: Scope | None
    token: ExecutionToken
    parent: ExecutionToken | None
    cancel: CancelSignal

    @property
    def nested(self) -> bool:
        """True for a child call (it has a parent token)."""
        return self.parent is not None


class ToolContext:
    """What a tool body gets besides its arguments: identity, the fused signal, ``defer_context``."""

    __slots__ = ("_execution", "call", "cancel", "runtime")

    def __init__(self, call: ToolCall, cancel: CancelSignal, runtime: ToolRuntime,
                 execution: Execution) -> None:
        self.call = call
        self.cancel = cancel
        self.runtime = runtime
        self._execution = execution

    @property
    def name(self) -> str:
        """The tool name as called."""
        return self.call.name

    @property
    def call_id(self) -> str:
        """This call's id."""
        return self.call.call_id

    @property
    def root_call_id(self) -> str:
        """The id of the model-level call this call descends from (its own id at top level)."""
        return self.call.root_call_id

    @property
    def agent(self) -> Scope | None:
        """The calling agent (or scope), None for an anonymous call."""
        return self.call.agent

    @property
    def token(self) -> ExecutionToken:
        """This execution's token: pass it as ``parent=`` for child calls."""
        return self.call.token

    @property
    def parent(self) -> ExecutionToken | None:
        """The parent's token (None for a top-level call)."""
        return self.call.parent

    def conclude_turn(self) -> None:
        """Ask the agent loop to end the turn after this batch (honoured only if the call succeeds)."""
        self._execution.concludes = True

    def defer_context(self, context: Mapping[str, Any]) -> None:
        """Attach an additional context (a lossless JSON object) to this call's result, in call order."""
        if not isinstance(context, Mapping):
            raise TypeError("defer_context() needs a JSON object such as {'content': [...], 'source': {...}}")
        self._execution.deferred.append(snapshot(dict(context), freeze=True, root="context"))


class Execution:
    """Mutable per-call state owned by the pipeline (schedulers only read ``call`` and ``token``)."""

    __slots__ = ("body_invoked", "call", "concludes", "deferred", "final", "finalize_content", "finished",
                 "own")

    def __init__(self, call: ToolCall, finalize_content: Any, final: ToolResult | None) -> None:
        self.call = call
        self.finalize_content = finalize_content
        self.final = final
        self.deferred: list[Any] = []
        self.body_invoked = False
        self.concludes = False
        self.finished = False
        self.own: list[ToolResult] = []

    @property
    def token(self) -> ExecutionToken:
        """The execution token (``parent=`` for child calls)."""
        return self.call.token

    def __repr__(self) -> str:
        return f"<Execution {self.call.name} {self.call.call_id}>"


class Prepared(NamedTuple):
    """Outcome of :meth:`Stages.prepare`: ready to dispatch (``result`` None) or already settled."""

    execution: Execution
    result: ToolResult | None
    post: bool

    @property
    def ready(self) -> bool:
        """True when the call should be dispatched; False when it is settled (go straight to finish)."""
        return self.result is None


class Dispatched(NamedTuple):
    """Outcome of :meth:`Stages.dispatch`; ``post`` says whether post-execute still runs."""

    execution: Execution
    result: ToolResult
    post: bool


Hook = tuple[Scope | None, Callable[..., Any]]


def _applicable(hooks: list[Hook], agent: Scope | None) -> list[Callable[..., Any]]:
    if not hooks:
        return []
    if agent is None:
        return [fn for scope, fn in hooks if scope is None]
    return [fn for scope, fn in hooks if scope is None or agent.is_within(scope)]


def _fired(signal: CancelSignal) -> bool:
    """Read a signal afresh (a function call, so type checkers do not narrow it across awaits)."""
    return signal.cancelled


def _message_of(exc: BaseException) -> str:
    try:
        if isinstance(exc, CodemodeError):
            return str(exc.message)
        text = str(exc)
    except Exception:
        return "<unprintable thrown value>"
    if not isinstance(exc, Exception):
        return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return text or type(exc).__name__


def _failure(exc: BaseException, default_code: str) -> ToolResult:
    code = exc.code if isinstance(exc, CodemodeError) else default_code
    return ToolResult.failure(code, _message_of(exc))


def _error(cls: type[CodemodeError], message: str) -> ToolResult:
    return ToolResult.failure(cls.code, message)


_ABORTED_BEFORE: Final = AbortedBeforeDispatchError().message
_ABORTED: Final = AbortedError().message


class Stages:
    """The pipeline stages of one :class:`~codemode.runtime.ToolRuntime` (internal API, see module
    docstring)."""

    def __init__(self, runtime: ToolRuntime) -> None:
        self._rt = runtime
        self._registry = runtime._registry
        self.pre_hooks: list[Hook] = []
        self.around_hooks: list[Hook] = []
        self.post_hooks: list[Hook] = []
        self.observers: list[Hook] = []
        self.dispatch_log_hooks: list[Hook] = []
        #: The around hooks that enforce ``timeout_ms`` (``around_execute(..., enforces_timeouts=True)``).
        self.timeout_hooks: list[Hook] = []
        self._unenforced: set[str] = set()  # tools already warned about an unenforced timeout_ms
        self._ids = itertools.count(1)

    # ------------------------------------------------------------------------------ resolution

    def resolve(self, name: str, agent: Scope | None, nested: bool) -> ToolDefinition | None:
        """Execution resolution (spec 6.1): the visible definition, or None when absent or collapsed."""
        definition = self._registry.view(agent).visible.get(name)
        if definition is None or collapses(name, self._registry.mode_for(agent), nested):
            return None
        return definition

    def execution_mode(self, execution: Execution) -> ExecutionMode:
        """Classify now: ``"parallel"`` only when the tool's classifier answers literally ``True``."""
        call = execution.call
        try:
            definition = self.resolve(call.name, call.agent, call.parent is not None)
            classify = None if definition is None else definition.is_concurrency_safe
            if classify is not None and classify(call.arguments) is True:
                return "parallel"
        except Exception:
            logger.exception('tool "%s" (%s): concurrency classifier failed', call.name, call.call_id)
        return "exclusive"

    def claims(self, execution: Execution) -> ResourceClaims | None:
        """The call's resource claims (None when the tool declares none or the claimer fails)."""
        call = execution.call
        try:
            definition = self.resolve(call.name, call.agent, call.parent is not None)
            claimer = None if definition is None else definition.claims
            found = None if claimer is None else claimer(call.arguments)
        except Exception:
            logger.exception('tool "%s" (%s): claims() failed', call.name, call.call_id)
            return None
        return found if isinstance(found, ResourceClaims) else None

    # ------------------------------------------------------------------------------ stage 0: create

    def create(self, name: str, arguments: Any, *, call_id: str | None = None,
               root_call_id: str | None = None, agent: Scope | None = None,
               parent: ExecutionToken | None = None, cancel: CancelSignal | None = None) -> Execution:
        """Create an execution; bad arguments or a collapsed call yield a settled execution."""
        if call_id is None:
            call_id = f"call-{next(self._ids)}"
        elif not isinstance(call_id, str) or not call_id:
            raise TypeError(f"call_id must be a non-empty string, not {call_id!r}")
        if root_call_id is not None and (not isinstance(root_call_id, str) or not root_call_id):
            raise TypeError(f"root_call_id must be a non-empty string, not {root_call_id!r}")
        if agent is not None and not isinstance(agent, Scope):
            raise TypeError(f"agent must be a codemode.runtime.Scope or None, not {type(agent).__name__}")
        if parent is not None and not isinstance(parent, ExecutionToken):
            raise TypeError(f"parent must be an ExecutionToken or None, not {type(parent).__name__}")
        if cancel is not None and not isinstance(cancel, CancelSignal):
            raise TypeError(
                f"cancel must be a codemode.runtime.CancelSignal or None, not {type(cancel).__name__}")
        signal = NEVER if cancel is None else cancel
        nested = parent is not None
        final: ToolResult | None = None
        finalize = None
        collapsed = False
        raw_name: object = name
        if not isinstance(raw_name, str):
            final = _error(ToolNotFoundError, f"unknown tool {raw_name!r} (tool names are strings)")
            name = repr(raw_name)
        else:
            try:
                visible = self._registry.view(agent).visible.get(name)
            except Exception as exc:  # e.g. a broken code runtime while building run_code
                visible = None
                final = _failure(exc, PolicyError.code)
            if visible is not None:
                collapsed = collapses(name, self._registry.mode_for(agent), nested)
                finalize = visible.finalize_content
        try:
            frozen = freeze(arguments, "arguments")
        except Exception as exc:
            frozen = None
            detail = (str(exc) if isinstance(exc, LosslessJsonError)
                      else f"snapshot failed: {_message_of(exc)}")
            final = _error(ToolArgsError,
                           f"tool execution arguments must be losslessly JSON-serializable ({detail})")
        call = ToolCall(name, frozen, call_id, root_call_id or call_id, agent, ExecutionToken(call_id),
                        parent, signal)
        if final is None and collapsed:
            if signal.cancelled:
                final = _error(AbortedBeforeDispatchError, _ABORTED_BEFORE)
            else:
                final = _error(ToolNotFoundError, signpost_message(name))
                finalize = None
        return Execution(call, finalize, final)

    # ------------------------------------------------------------------------------ stage 1: prepare

    async def prepare(self, execution: Execution) -> Prepared:
        """Pre-execute waterfall, approval and guards (an ordered stage)."""
        if execution.final is not None:
            return Prepared(execution, execution.final, False)
        call = execution.call
        if _fired(call.cancel):
            return Prepared(execution, _error(AbortedBeforeDispatchError, _ABORTED_BEFORE), False)
        try:
            decision = await self._pre_execute(call)
            approval_cancelled = False
            if isinstance(decision, Ask):
                approved = await resolve_ask(self._rt.approval, decision, name=call.name,
                                             call_id=call.call_id, agent=call.agent, cancel=call.cancel)
                decision, approval_cancelled = approved.decision, approved.approval_cancelled
            if approval_cancelled and _fired(call.cancel):
                return Prepared(execution, _error(AbortedBeforeDispatchError, _ABORTED_BEFORE), True)
            reason = decision.reason if isinstance(decision, Deny) else self._run_guards(call)
            if reason is not None:
                return Prepared(execution, _error(ToolDeniedError, reason), True)
            if _fired(call.cancel):
                return Prepared(execution, _error(AbortedBeforeDispatchError, _ABORTED_BEFORE), True)
        except anyio.get_cancelled_exc_class():
            raise
        except BaseException as exc:  # a broken hook, guard or approval service: fail closed
            return Prepared(execution, _failure(exc, PolicyError.code), False)
        return Prepared(execution, None, True)

    async def _pre_execute(self, call: ToolCall) -> Decision:
        hooks = _applicable(self.pre_hooks, call.agent)
        if not hooks:
            return _ALLOW

        async def run(index: int) -> Decision:
            if index == len(hooks):
                return _ALLOW
            decision = await hooks[index](call, lambda: run(index + 1))
            if isinstance(decision, Deny):
                if not isinstance(decision.reason, str):
                    raise PolicyError("on_pre_execute hook returned Deny with a non-string reason")
                return decision
            if isinstance(decision, Allow | Ask):
                return decision
            raise PolicyError(f"on_pre_execute hook returned {type(decision).__name__}; expected Allow(), "
                              "Deny(reason) or Ask(reason)")

        return await run(0)

    def _run_guards(self, call: ToolCall) -> str | None:
        if not self._registry.guard_count:
            return None
        for table in self._registry.guard_tables(call.agent):
            index = 0
            while index < len(table):  # live table: a guard added during this pass is visited too
                reason = table[index](call)
                index += 1
                if reason is None:
                    continue
                if isinstance(reason, str):
                    return reason
                raise PolicyError(f"a guard returned {type(reason).__name__}; "
                                  "expected a reason string or None")
        return None

    # ------------------------------------------------------------------------------ stage 2: dispatch

    async def dispatch(self, prepared: Prepared) -> Dispatched:
        """Around wrappers and the base dispatch (the only stage a scheduler may overlap)."""
        execution = prepared.execution
        if prepared.result is not None:
            return Dispatched(execution, prepared.result, prepared.post)
        call = execution.call
        wrappers = _applicable(self.around_hooks, call.agent)
        try:
            if wrappers:
                result = await self._around(execution, wrappers, 0, None)
            else:
                result = await self._base(execution, None)
        except anyio.get_cancelled_exc_class():
            raise
        except BaseException as exc:  # a wrapper raised: final, post-execute skipped
            return Dispatched(execution, _failure(exc, PolicyError.code), False)
        if execution.deferred:
            result = replace(result, additional_contexts=FrozenList(
                (*execution.deferred, *result.additional_contexts)))
        if _fired(call.cancel) and not result.is_error:
            result = self._aborted(execution, result)
        return Dispatched(execution, result, True)

    def _aborted(self, execution: Execution, prior: ToolResult) -> ToolResult:
        if execution.body_invoked:
            aborted = _error(AbortedError, _ABORTED)
        else:
            aborted = _error(AbortedBeforeDispatchError, _ABORTED_BEFORE)
        if prior.additional_contexts:
            aborted = replace(aborted, additional_contexts=prior.additional_contexts)
        return aborted

    async def _around(self, execution: Execution, wrappers: list[Callable[..., Any]], index: int,
                      signal: CancelSignal | None) -> ToolResult:
        if index == len(wrappers):
            return await self._base(execution, signal)

        async def call_next(cancel: CancelSignal | None = None) -> ToolResult:
            if cancel is not None and not isinstance(cancel, CancelSignal):
                raise TypeError("call_next(cancel=...) needs a codemode.runtime.CancelSignal")
            inner = cancel if cancel is not None else signal
            return await self._around(execution, wrappers, index + 1, inner)

        result = await wrappers[index](execution.call, call_next)
        if not isinstance(result, ToolResult):
            raise PolicyError(f"around_execute hook returned {type(result).__name__}; expected a ToolResult")
        return self._normalize(execution, result)

    def _own(self, execution: Execution, result: ToolResult) -> ToolResult:
        execution.own.append(result)
        return result

    def _normalize(self, execution: Execution, result: ToolResult) -> ToolResult:
        """Pass our own result through; rebuild an authored one (a success is re-validated/re-rendered)."""
        if any(result is own for own in execution.own):
            return result
        call = execution.call
        contexts = snapshot(list(result.additional_contexts), freeze=True, root="additional_contexts")
        if result.is_error:
            error = result.error
            if not isinstance(error, ToolErrorInfo):
                error = ToolErrorInfo(ToolExecutionError.code, text_of(result.content) or "tool call failed")
            rebuilt = ToolResult(is_error=True,
                                 content=snapshot(list(result.content), freeze=True, root="content"),
                                 error=error, meta=snapshot(result.meta, freeze=True, root="meta"),
                                 additional_contexts=contexts)
            return self._own(execution, rebuilt)
        definition = self.resolve(call.name, call.agent, call.parent is not None)
        if definition is None:
            return self._own(execution, _error(ToolNotFoundError, f'unknown tool "{call.name}"'))
        try:
            rebuilt = self._success(definition, call, result.value)
        except ToolOutputError as exc:
            rebuilt = _failure(exc, ToolOutputError.code)
        if contexts:
            rebuilt = replace(rebuilt, additional_contexts=contexts)
        return self._own(execution, rebuilt)

    async def _base(self, execution: Execution, substitute: CancelSignal | None) -> ToolResult:
        call = execution.call
        fused = CancelSignal.any_of(call.cancel, substitute)
        try:
            if _fired(fused):
                return self._own(execution, _error(AbortedBeforeDispatchError, _ABORTED_BEFORE))
            definition = self.resolve(call.name, call.agent, call.parent is not None)
            if definition is None:
                return self._own(execution, _error(ToolNotFoundError, f'unknown tool "{call.name}"'))
            if definition.timeout_ms is not None and not _applicable(self.timeout_hooks, call.agent):
                self._warn_unenforced(definition)
            validate = definition.validate_arguments
            if validate is not None:
                violations = validate(call.arguments)
                if violations:
                    return self._own(execution, _failure(ToolArgsError(violations), ToolArgsError.code))
            execution.body_invoked = True
            context = ToolContext(call, fused, self._rt, execution)
            result = await self._invoke(definition, call, context, fused)
            if _fired(fused) and not result.is_error:
                result = _error(AbortedError, _ABORTED)
            return self._own(execution, result)
        finally:
            if fused is not call.cancel and fused is not substitute:
                fused.detach()

    def _warn_unenforced(self, definition: ToolDefinition) -> None:
        if definition.name in self._unenforced:
            return
        self._unenforced.add(definition.name)
        logger.warning('tool "%s" declares timeout_ms=%s, but no timeout policy covers this call, so the '
                       "budget is not enforced: install one with codemode.tools.install_timeout_policy(rt) "
                       "(codemode.CodeMode and the command line install it)", definition.name,
                       definition.timeout_ms)

    async def _invoke(self, definition: ToolDefinition, call: ToolCall, context: ToolContext,
                      fused: CancelSignal) -> ToolResult:
        failure: ToolResult | None = None
        value: Any = None
        if fused is NEVER:
            try:
                value = await definition.execute(call.arguments, context)
            except anyio.get_cancelled_exc_class():
                raise
            except BaseException as exc:  # any body failure, incl. SystemExit/KeyboardInterrupt
                return _failure(exc, ToolExecutionError.code)
        else:
            with anyio.CancelScope() as scope:
                detach = fused.attach_scope(scope)
                try:
                    value = await definition.execute(call.arguments, context)
                except anyio.get_cancelled_exc_class():
                    raise
                except BaseException as exc:
                    failure = _failure(exc, ToolExecutionError.code)
                finally:
                    detach()
            if failure is not None:
                return failure
            if scope.cancelled_caught:
                return _error(AbortedError, _ABORTED)
        try:
            return self._success(definition, call, value)
        except ToolOutputError as exc:
            return _failure(exc, ToolOutputError.code)

    def _success(self, definition: ToolDefinition, call: ToolCall, value: Any) -> ToolResult:
        """Snapshot, validate, freeze and render a success value (spec 3.5); raises ToolOutputError."""
        name = definition.name
        prefix = f'tool "{name}" returned invalid output: '
        try:
            frozen = freeze(value)
        except LosslessJsonError as exc:
            raise ToolOutputError(f"{prefix}value is not lossless JSON ({exc})") from None
        except Exception as exc:
            raise ToolOutputError(f"{prefix}value snapshot failed: {_message_of(exc)}") from None
        violations = validate_fast(definition.output.schema, frozen, "value")
        if violations:
            raise ToolOutputError(prefix + "; ".join(violations))
        try:
            blocks = definition.output.render(call.arguments, frozen)
        except Exception as exc:
            raise ToolOutputError(f"{prefix}output.render failed: {_message_of(exc)}") from None
        content = _content(blocks, prefix + "output.render")
        meta = None
        presentation_meta = definition.output.presentation_meta
        if presentation_meta is not None and call.parent is None:
            try:
                raw_meta = presentation_meta(call.arguments, frozen)
            except Exception as exc:
                raise ToolOutputError(
                    f"{prefix}output.presentation_meta failed: {_message_of(exc)}") from None
            try:
                meta = snapshot(raw_meta, freeze=True, root="meta")
            except Exception:
                raise ToolOutputError(
                    f"{prefix}output.presentation_meta returned non-lossless JSON") from None
        return ToolResult(is_error=False, value=frozen, content=content, meta=meta)

    # ------------------------------------------------------------------------------ stage 3/4: finish

    async def finish(self, outcome: Prepared | Dispatched) -> ToolResult:
        """Post-execute (for post-results), finalize_content once, observers; returns the frozen result."""
        execution = outcome.execution
        if execution.finished:
            raise RuntimeError(f"{execution!r} was already finished")
        execution.finished = True
        call = execution.call
        result = outcome.result
        if result is None:
            raise RuntimeError(f"{execution!r} is ready to dispatch; finish() needs its dispatch() outcome")
        if outcome.post:
            try:
                result = await self._post_execute(execution, result)
            except anyio.get_cancelled_exc_class():
                raise
            except BaseException as exc:
                result = _failure(exc, PolicyError.code)
            if _fired(call.cancel) and not result.is_error:
                result = self._aborted(execution, result)
        result = self._finalize(execution, result)
        if execution.concludes and not result.is_error and not result.concludes_turn:
            result = replace(result, concludes_turn=True)
        await self._broadcast(call, result)
        return result

    async def _post_execute(self, execution: Execution, result: ToolResult) -> ToolResult:
        call = execution.call
        hooks = _applicable(self.post_hooks, call.agent)
        if not hooks:
            return result

        async def run(index: int) -> PostDecision:
            if index == len(hooks):
                return _ACCEPT
            decision = await hooks[index](call, result, lambda: run(index + 1))
            if not isinstance(decision, Accept | Block):
                raise PolicyError(f"on_post_execute hook returned {type(decision).__name__}; expected "
                                  "Accept(...) or Block(feedback)")
            return decision

        decision = await run(0)
        if isinstance(decision, Block):
            feedback = decision.feedback
            blocks = [text_block(feedback)] if isinstance(feedback, str) else list(feedback)
            content = _content(blocks, "on_post_execute Block feedback")
            message = text_of(content) or "tool result blocked by post-execute policy"
            contexts = snapshot(list(decision.additional_contexts), freeze=True, root="additional_contexts")
            error = ToolErrorInfo(ToolDeniedError.code, message)
            return ToolResult(is_error=True, content=content, error=error, additional_contexts=contexts)
        has_value, has_content = decision.value is not UNSET, decision.content is not UNSET
        if has_value and has_content:
            raise PolicyError("on_post_execute Accept cannot replace both value and content")
        extra = snapshot(list(decision.additional_contexts), freeze=True, root="additional_contexts")
        if has_value:
            if result.is_error:
                raise PolicyError("on_post_execute cannot replace the value of a failed result")
            definition = self.resolve(call.name, call.agent, call.parent is not None)
            if definition is None:
                result = _error(ToolNotFoundError, f'unknown tool "{call.name}"')
            else:
                try:
                    replaced = self._success(definition, call, decision.value)
                except ToolOutputError as exc:
                    replaced = _failure(exc, ToolOutputError.code)
                result = replace(replaced, additional_contexts=result.additional_contexts)
        elif has_content:
            result = replace(result, content=_content(decision.content, "on_post_execute Accept content"))
        if extra:
            result = replace(result, additional_contexts=FrozenList((*result.additional_contexts, *extra)))
        return result

    def _finalize(self, execution: Execution, result: ToolResult) -> ToolResult:
        finalize = execution.finalize_content
        if finalize is None:
            return result
        execution.finalize_content = None  # exactly once, even if it fails
        try:
            replaced = finalize(execution.call, result)
            if replaced is None:
                return result
            return replace(result, content=_content(replaced, "finalize_content"))
        except anyio.get_cancelled_exc_class():
            raise
        except BaseException as exc:
            return _failure(exc, ToolExecutionError.code)

    # ------------------------------------------------------------------------------ the dispatch log

    async def dispatch_log_content(self, dispatch: CodeDispatch) -> Any:
        """The content to log for a settled child call: the ``on_code_dispatch_log`` waterfall's answer.

        A hook that raises or answers something other than content blocks is contained: the failure is
        logged as a warning and the original content is kept, so the event is always written.
        """
        hooks = _applicable(self.dispatch_log_hooks, dispatch.agent)
        if not hooks:
            return dispatch.content

        async def run(index: int) -> Any:
            if index == len(hooks):
                return dispatch.content
            return await hooks[index](dispatch, lambda: run(index + 1))

        try:
            return _content(await run(0), "on_code_dispatch_log hook")
        except anyio.get_cancelled_exc_class():
            raise
        except BaseException as exc:
            logger.warning('tool "%s" (%s): code-dispatch-log hook failed: %s; logging the original content',
                           dispatch.name, dispatch.sub_call_id, _message_of(exc))
            return dispatch.content

    async def _broadcast(self, call: ToolCall, result: ToolResult) -> None:
        for observer in _applicable(self.observers, call.agent):
            try:
                outcome = observer(call, result)
                if inspect.isawaitable(outcome):
                    await outcome
            except anyio.get_cancelled_exc_class():
                raise
            except BaseException as exc:  # observers cannot break or transform the outcome
                logger.error('tool "%s" (%s): on_result observer failed: %s', call.name, call.call_id,
                             _message_of(exc))


def _content(blocks: object, what: str) -> FrozenList:
    """Validate and freeze content blocks: a list of JSON objects each with a string ``type``."""
    if isinstance(blocks, str | bytes | Mapping) or not isinstance(blocks, Sequence):
        raise ToolOutputError(f"{what} must return a list of content blocks such as "
                              f'[{{"type": "text", "text": "..."}}], not {type(blocks).__name__}')
    try:
        frozen: FrozenList = freeze(blocks if type(blocks) is list else list(blocks), "content")
    except Exception:
        raise ToolOutputError(f"{what} returned non-lossless JSON") from None
    for index, block in enumerate(frozen):
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise ToolOutputError(f'{what} returned content[{index}] without a string "type" (a content '
                                  'block is a JSON object such as {"type": "text", "text": "..."})')
    return frozen

