"""``ToolRuntime``: the public façade over the registry, the pipeline stages, modes and prompt assembly."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import weakref
from collections.abc import Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass, field, replace
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, Self, TypeVar

import anyio
import anyio.abc

from .approval import ApprovalService
from .cancel import CancelSignal, Disposer, _Once, removal
from .definitions import ToolDefinition, ToolOutput, define_tool
from .errors import (
    CodeRuntimeChangedError,
    CodeRuntimeMissingError,
    ConfigError,
    DefinitionError,
    LifecycleError,
    UnknownLanguageError,
)
from .hooks import AroundHook, CodeDispatchLogHook, Guard, PostExecuteHook, PreExecuteHook, ResultObserver
from .modes import (
    KNOWN_LANGUAGES,
    RUN_CODE,
    RUN_CODE_OUTPUT_SCHEMA,
    RUN_CODE_PARAMETERS,
    Mode,
    collapses,
    parse_mode,
)
from .pipeline import ExecutionToken, Stages
from .prompt import AssembleHook, Prompt, assemble_prompt
from .registry import Registry, SectionSpec
from .results import ToolResult
from .scheduler import ToolCallRequest, execute_tool_calls
from .scope import Scope

if TYPE_CHECKING:
    from .modes import CodeRuntime

__all__ = ("ToolRuntime",)

logger = logging.getLogger("runtime")

_T = TypeVar("_T")


def _positive_int(value: object, label: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{label} must be a positive integer, not {value!r}")
    return value


class ToolRuntime:
    """The tool runtime: register tools, shape what each scope sees, and execute calls.

    Use as ``async with ToolRuntime(...) as rt:`` so that resources (worker pools, background drains)
    are owned and released; :meth:`execute` also works outside the context for simple uses.
    """

    def __init__(
        self,
        mode: Mode | str = "native",
        *,
        max_parallel_tool_calls: int = 10,
        max_parallel_sub_calls: int = 10,
        approval: ApprovalService | None = None,
        code_runtime: CodeRuntime | None = None,
    ) -> None:
        self.mode = parse_mode(mode)
        self.max_parallel_tool_calls = _positive_int(max_parallel_tool_calls, "max_parallel_tool_calls")
        self.max_parallel_sub_calls = _positive_int(max_parallel_sub_calls, "max_parallel_sub_calls")
        if approval is not None and not callable(getattr(approval, "request", None)):
            raise ConfigError("approval must have an async request(ApprovalRequest) -> str method")
        _check_code_runtime(code_runtime)
        self.approval = approval
        self._code_runtime = code_runtime
        self._check_running = _running_check(code_runtime)
        self._run_code: ToolDefinition | None = None
        self._run_code_for: CodeRuntime | None = None  # the runtime that built _run_code
        # What each scope's last prompt promised (spec 13.1): checked by every run_code call.
        self._code_bindings: weakref.WeakKeyDictionary[Scope, CodeBinding] = weakref.WeakKeyDictionary()
        self._default_binding: CodeBinding | None = None
        self._registry = Registry(self.mode, self._run_code_definition)
        self._assemble_hooks: list[AssembleHook] = []
        self._user_message_listeners: list[tuple[Scope | None, Callable[..., Any]]] = []
        self.stages = Stages(self)
        self._stack: contextlib.AsyncExitStack | None = None
        self._task_group: anyio.abc.TaskGroup | None = None
        self._background = 0
        self._background_done: anyio.Event | None = None
        self._background_scopes: set[anyio.CancelScope] = set()
        self.closed = False

    # ------------------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> Self:
        if self.closed or self._stack is not None:
            raise LifecycleError("a ToolRuntime can be entered once (`async with` it a single time; build a "
                                 "new one for another lifetime)")
        stack = contextlib.AsyncExitStack()
        # The task group is the stack's first entry, so resources tied to the runtime later
        # (enter_async_context) nest inside it and close first: contexts that own task groups or
        # cancel scopes of their own must be exited in the reverse order of entry.
        self._task_group = await stack.enter_async_context(anyio.create_task_group())
        self._stack = stack
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> bool | None:
        """Await background tasks first (they may still use resources), then close the resources.

        Leaving on an exception (or a cancellation) cancels the background tasks instead, as a task
        group does, and waits for them to unwind. The resources close in reverse order of entry and the
        task group last; by then it has no task left.
        """
        stack = self._stack
        self.closed = True
        if stack is None:
            return None
        try:
            if exc_type is None:
                await self._wait_for_background()
            else:
                for scope in list(self._background_scopes):
                    scope.cancel()
                with anyio.CancelScope(shield=True):
                    await self._wait_for_background()
        finally:
            self._stack, self._task_group = None, None
            await stack.__aexit__(exc_type, exc, tb)
        return None

    async def _wait_for_background(self) -> None:
        while self._background:
            done = self._background_done = anyio.Event()
            await done.wait()

    async def enter_async_context(self, manager: contextlib.AbstractAsyncContextManager[_T]) -> _T:
        """Tie ``manager``'s lifetime to this runtime (closed, in reverse order, when the runtime exits)."""
        if self._stack is None:
            raise LifecycleError("enter_async_context() needs the runtime to be entered (async with)")
        return await self._stack.enter_async_context(manager)

    def start_soon(self, fn: Callable[..., Coroutine[Any, Any, Any]], *args: Any,
                   name: str | None = None) -> None:
        """Run ``fn(*args)`` in the runtime's own task group; the runtime awaits it when it exits."""
        if self._task_group is None:
            raise LifecycleError("start_soon() needs the runtime to be entered (async with)")
        self._background += 1
        self._task_group.start_soon(self._tracked, fn, args, name=name or getattr(fn, "__qualname__", None))

    async def _tracked(self, fn: Callable[..., Coroutine[Any, Any, Any]], args: tuple[Any, ...]) -> None:
        try:
            with anyio.CancelScope() as scope:
                self._background_scopes.add(scope)
                try:
                    await fn(*args)
                finally:
                    self._background_scopes.discard(scope)
        finally:
            self._background -= 1
            if not self._background and self._background_done is not None:
                self._background_done.set()

    # ------------------------------------------------------------------------------ registry

    def register(self, definition: ToolDefinition, *, scope: Scope | None = None) -> Disposer:
        """Register a tool globally or in ``scope`` (shadowing inherited ones); returns its disposer."""
        return self._registry.register(definition, scope)

    def restrict(self, scope: Scope | None, *, allow: Iterable[str] | None = None,
                 deny: Iterable[str] | None = None) -> Disposer:
        """Narrow the inherited tools of ``scope`` (restrictions intersect along the chain)."""
        return self._registry.restrict(scope, allow, deny)

    def guard(self, fn: Guard, *, scope: Scope | None = None) -> Disposer:
        """Add a guard ``fn(call) -> reason | None``; a reason denies (guards can only deny)."""
        return self._registry.guard(fn, scope)

    def present_as(self, scope: Scope | None, mode: Mode | str) -> Disposer:
        """Override the presentation mode for ``scope`` and its descendants (one per scope)."""
        return self._registry.present_as(scope, mode)

    def on_change(self, fn: Callable[[], None]) -> Disposer:
        """Call ``fn()`` after every change of tools, restrictions or presentation (e.g. to rebuild a
        cached prompt). If ``fn`` raises while something is being added, the addition is rolled back
        and the error propagates to the caller of ``register``/``restrict``/``present_as``."""
        if not callable(fn):
            raise TypeError("on_change() needs a callable fn()")
        listeners = self._registry.change_listeners
        listeners.append(fn)
        return removal(listeners, fn)

    def mode_for(self, scope: Scope | None = None) -> Mode:
        """The effective mode of ``scope``: the nearest ``present_as`` on its chain, else ``mode``."""
        return self._registry.mode_for(scope)

    def collapses(self, name: str, scope: Scope | None, nested: bool) -> bool:
        """True when a call of ``name`` from ``scope`` is reachable only from a ``run_code`` program."""
        return collapses(name, self._registry.mode_for(scope), nested)

    def get(self, name: str, scope: Scope | None = None) -> ToolDefinition | None:
        """The definition ``scope`` sees under ``name`` (incl. ``run_code`` in code/both), or None."""
        return self._registry.view(scope).visible.get(name)

    def definitions(self, scope: Scope | None = None) -> tuple[ToolDefinition, ...]:
        """Every definition visible to ``scope``, in view order."""
        return tuple(self._registry.view(scope).visible.values())

    def code_visible(self, scope: Scope | None = None) -> tuple[ToolDefinition, ...]:
        """What a ``run_code`` program of ``scope`` can call: the visible set minus ``run_code``.

        The SDK section and the program's bindings are both built from this.
        """
        return tuple(d for name, d in self._registry.view(scope).visible.items() if name != RUN_CODE)

    def schemas(self, scope: Scope | None = None) -> list[dict[str, Any]]:
        """Detached ``{"name", "description", "parameters"}`` projections of the visible set."""
        return [definition.schema() for definition in self.definitions(scope)]

    def execution_mode(self, name: str, args: Any, scope: Scope | None = None) -> Literal["parallel",
                                                                                             "exclusive"]:
        """``"parallel"`` when the tool's classifier says the call may overlap, else ``"exclusive"``."""
        definition = self.stages.resolve(name, scope, False)
        classify = None if definition is None else definition.is_concurrency_safe
        if classify is None:
            return "exclusive"
        try:
            return "parallel" if classify(args) is True else "exclusive"
        except Exception:
            return "exclusive"

    # ------------------------------------------------------------------------------ hooks

    def on_pre_execute(self, fn: PreExecuteHook, *, scope: Scope | None = None) -> Disposer:
        """Add a pre-execute hook ``async fn(call, call_next) -> Allow | Deny | Ask``."""
        return _add(self.stages.pre_hooks, scope, fn)

    def around_execute(self, fn: AroundHook, *, scope: Scope | None = None,
                       enforces_timeouts: bool = False) -> Disposer:
        """Add a wrapper ``async fn(call, call_next) -> ToolResult`` around dispatch.

        ``enforces_timeouts=True`` declares that the wrapper enforces each tool's ``timeout_ms`` (as the
        timeout policy does): a call of a tool with a budget that no such wrapper covers logs a warning
        once per tool, since nothing else enforces the budget.
        """
        dispose = _add(self.stages.around_hooks, scope, fn)
        if not enforces_timeouts:
            return dispose
        dispose_mark = _add(self.stages.timeout_hooks, scope, fn)

        def both() -> None:
            dispose()
            dispose_mark()

        return _Once(both)

    def on_post_execute(self, fn: PostExecuteHook, *, scope: Scope | None = None) -> Disposer:
        """Add a post-execute hook ``async fn(call, result, call_next) -> Accept | Block``."""
        return _add(self.stages.post_hooks, scope, fn)

    def on_result(self, fn: ResultObserver, *, scope: Scope | None = None) -> Disposer:
        """Add an observer ``fn(call, result)`` (sync or async); its failures are logged, not raised."""
        return _add(self.stages.observers, scope, fn)

    def on_code_dispatch_log(self, fn: CodeDispatchLogHook, *, scope: Scope | None = None) -> Disposer:
        """Add a hook ``async fn(dispatch, call_next) -> blocks`` over what a ``run_code`` child call's
        ``tool/code-dispatch`` event records (:class:`~codemode.runtime.hooks.CodeDispatch`).

        Only the logged copy changes (e.g. a large output replaced by a preview and where it was
        spilled); the program and the model are unaffected. A failing hook is contained: a warning is
        logged and the original content recorded. The hook runs when the child call commits, before the
        program gets the call's value.
        """
        return _add(self.stages.dispatch_log_hooks, scope, fn)

    def on_user_message(self, fn: Callable[[Scope], object], *, scope: Scope | None = None) -> Disposer:
        """Call ``fn(agent)`` whenever a user message reaches ``agent`` (see :meth:`note_user_message`).

        Policies with per-conversation state listen here (the repeat reminder forgets its chains).
        """
        return _add(self._user_message_listeners, scope, fn)

    def note_user_message(self, agent: Scope) -> None:
        """Tell the :meth:`on_user_message` listeners that a user message reached ``agent``.

        :class:`codemode.runtime.Turn` calls this for each user message; an agent loop of your own calls
        it when the user speaks (not for additional contexts, which are not the user's words). A
        listener's failure is logged, never raised.
        """
        if not isinstance(agent, Scope):
            raise TypeError(f"note_user_message() needs the agent's Scope, not {type(agent).__name__}")
        for scope, fn in list(self._user_message_listeners):
            if scope is not None and not agent.is_within(scope):
                continue
            try:
                fn(agent)
            except Exception:
                logger.exception("an on_user_message listener failed")

    # ------------------------------------------------------------------------------ execution

    async def execute(self, name: str, arguments: Any, *, call_id: str | None = None,
                      root_call_id: str | None = None, agent: Scope | None = None,
                      parent: ExecutionToken | None = None, cancel: CancelSignal | None = None) -> ToolResult:
        """Run one call through the whole pipeline and return its frozen result (never raises for it).

        A ``run_code`` call whose code runtime is not running (never entered, or already exited) raises
        :class:`~codemode.runtime.errors.LifecycleError` instead: that is the integrator's mistake.
        """
        if name == RUN_CODE and self._check_running is not None:
            self._check_code_running(agent)
        stages = self.stages
        execution = stages.create(name, arguments, call_id=call_id, root_call_id=root_call_id, agent=agent,
                                  parent=parent, cancel=cancel)
        prepared = await stages.prepare(execution)
        if prepared.result is None:
            return await stages.finish(await stages.dispatch(prepared))
        return await stages.finish(prepared)

    async def execute_tool_calls(self, calls: Sequence[ToolCallRequest], *, agent: Scope | None = None,
                                 cancel: CancelSignal | None = None) -> list[ToolResult]:
        """Run one model turn's tool calls under the native scheduling contract
        (:func:`codemode.runtime.scheduler.execute_tool_calls`); the results come in model order.

        Raises :class:`~codemode.runtime.errors.LifecycleError` before anything runs when a ``run_code``
        call would reach a code runtime that is not running (see :meth:`execute`).
        """
        if self._check_running is not None and any(
                getattr(call, "name", None) == RUN_CODE for call in calls):
            self._check_code_running(agent)
        return await execute_tool_calls(self, calls, agent=agent, cancel=cancel)

    def _check_code_running(self, scope: Scope | None) -> None:
        check = self._check_running
        if check is not None and self._registry.mode_for(scope) is not Mode.NATIVE:
            check()

    # ------------------------------------------------------------------------------ code mode

    def require_code_runtime(self, scope: Scope | None = None) -> CodeRuntime:
        """The code runtime for a non-native scope; raises naming the scope's EFFECTIVE mode."""
        runtime = self.code_runtime
        if runtime is None:
            raise CodeRuntimeMissingError(str(self._registry.mode_for(scope)))
        language = runtime.language
        if not isinstance(language, str) or language not in KNOWN_LANGUAGES:
            raise UnknownLanguageError(str(language), KNOWN_LANGUAGES)
        return runtime

    def render_sdk(self, scope: Scope | None = None) -> str:
        """The ``tools:sdk`` section body for ``scope`` (its code-visible set)."""
        text = self.require_code_runtime(scope).render_sdk(self.code_visible(scope))
        if not isinstance(text, str):
            raise DefinitionError(f"code_runtime.render_sdk() returned {type(text).__name__}, not a string")
        return text

    @property
    def code_runtime(self) -> CodeRuntime | None:
        """The code runtime behind ``run_code`` and the ``tools:sdk`` section (``None``: none).

        Replacing it changes the tool set (listeners are told, as for a registration), and prompts
        assembled before the change no longer run programs: their ``run_code`` calls fail with
        ``CODE_RUNTIME_CHANGED`` until the prompt is assembled again.
        """
        return self._code_runtime

    @code_runtime.setter
    def code_runtime(self, runtime: CodeRuntime | None) -> None:
        _check_code_runtime(runtime)
        if runtime is not self._code_runtime:
            self._code_runtime = runtime
            self._check_running = _running_check(runtime)
            self._registry._changed()

    def _run_code_definition(self) -> ToolDefinition:
        # (rebuilt when code_runtime is replaced: a cached definition would run the old runtime)
        if self._run_code is None or self._run_code_for is not self.code_runtime:
            self._run_code = self._build_run_code()
            self._run_code_for = self.code_runtime
        return self._run_code

    def _build_run_code(self) -> ToolDefinition:
        runtime = self.code_runtime
        if runtime is None or runtime.language not in KNOWN_LANGUAGES:
            return _unavailable_run_code(self)
        definition = runtime.run_code_definition(self)
        if not isinstance(definition, ToolDefinition) or definition.name != RUN_CODE:
            raise DefinitionError(f'code_runtime.run_code_definition() must return a ToolDefinition named '
                                  f'"{RUN_CODE}", got {definition!r}')
        body = definition.execute

        async def execute(args: Any, ctx: Any) -> Any:
            self._check_code_binding(ctx.agent, runtime)
            return await body(args, ctx)

        return replace(definition, execute=execute)

    # ------------------------------------------------------------------------------ the code binding

    def bind_code(self, scope: Scope | None, sdk_text: str) -> CodeBinding:
        """Record that ``scope``'s prompt now offers the current code runtime's SDK ``sdk_text``.

        :func:`~codemode.runtime.prompt.assemble_prompt` calls this whenever it renders the ``tools:sdk``
        section; every ``run_code`` call under that scope then checks that the same runtime (so the
        same language) still executes programs, and fails with ``CODE_RUNTIME_CHANGED`` otherwise.
        """
        runtime = self.require_code_runtime(scope)
        binding = CodeBinding(runtime.language, hashlib.sha256(sdk_text.encode("utf-8")).hexdigest(),
                              runtime)
        if scope is None:
            self._default_binding = binding
        else:
            self._code_bindings[scope] = binding
        return binding

    def code_binding(self, scope: Scope | None) -> CodeBinding | None:
        """What the last prompt assembled for ``scope`` promised (the runtime default's for ``None``)."""
        if scope is not None:
            binding = self._code_bindings.get(scope)
            if binding is not None:
                return binding
        return self._default_binding

    def _check_code_binding(self, scope: Scope | None, runtime: CodeRuntime) -> None:
        binding = self.code_binding(scope)
        if binding is None:
            return  # (no prompt was assembled here: a program sent directly, e.g. from the CLI)
        if binding.runtime is not runtime or binding.language != runtime.language:
            raise CodeRuntimeChangedError(f'a "{binding.language}" runtime',
                                          f'another "{runtime.language}" runtime')

    # ------------------------------------------------------------------------------ prompt

    def add_section(self, name: str, *, order: int, text: str | Callable[[Scope | None], str],
                    scope: Scope | None = None) -> Disposer:
        """Add a prompt section (a string or ``fn(scope) -> str``); scoped sections shadow by name."""
        if not isinstance(name, str) or not name:
            raise ConfigError("a prompt section needs a non-empty name")
        if isinstance(order, bool) or not isinstance(order, int):
            raise ConfigError(f'prompt section "{name}" order must be an integer')
        return self._registry.add_section(SectionSpec(name, order, text), scope)

    def on_assemble(self, fn: AssembleHook) -> Disposer:
        """Add a final transform ``fn(prompt, scope) -> Prompt`` of every assembly (its answer wins)."""
        hooks = self._assemble_hooks
        hooks.append(fn)
        return removal(hooks, fn)

    def prompt(self, scope: Scope | None = None, *, tool_order: Sequence[str] | None = None) -> Prompt:
        """What the model is offered in ``scope`` (a closed runtime offers nothing)."""
        if self.closed:
            return Prompt((), ())
        return assemble_prompt(self, scope, tool_order=tool_order)


def _add(hooks: list[tuple[Scope | None, Callable[..., Any]]], scope: Scope | None,
         fn: Callable[..., Any]) -> Disposer:
    if not callable(fn):
        raise TypeError("a hook must be callable")
    if scope is not None and not isinstance(scope, Scope):
        raise TypeError(f"hook scope must be a codemode.runtime.Scope or None, not {type(scope).__name__}")
    entry = (scope, fn)
    hooks.append(entry)
    return removal(hooks, entry)


def _running_check(runtime: object) -> Callable[[], None] | None:
    """The code runtime's optional ``check_running()`` (raises ``LifecycleError`` when it cannot run
    programs now), looked up once rather than on every call."""
    check = getattr(runtime, "check_running", None)
    return check if callable(check) else None


def _check_code_runtime(runtime: object) -> None:
    if runtime is not None and not all(
            hasattr(runtime, attr) for attr in ("language", "run_code_definition", "render_sdk")):
        raise ConfigError("code_runtime must provide language, run_code_definition(rt) and render_sdk()")


@dataclass(frozen=True, slots=True)
class CodeBinding:
    """What a prompt promised about code: the language, the SDK text's SHA-256 and the runtime."""

    language: str
    sdk_sha256: str
    runtime: CodeRuntime = field(compare=False, repr=False)


def _unavailable_run_code(runtime: ToolRuntime) -> ToolDefinition:
    """The reserved ``run_code`` stand-in when no usable code runtime is configured: it always fails."""

    async def execute(args: Any, ctx: Any) -> Any:
        runtime.require_code_runtime(ctx.agent)
        raise CodeRuntimeMissingError(str(runtime.mode_for(ctx.agent)))

    return define_tool(
        name=RUN_CODE,
        description=("Execute a Python program against the available tools. `code` is the BODY of an async "
                     "function (top-level `await` and `return <value>` work); `description` is a short "
                     "active-voice summary shown to the user. No code runtime is configured, so every "
                     "call fails."),
        parameters=RUN_CODE_PARAMETERS,
        output=ToolOutput(schema=RUN_CODE_OUTPUT_SCHEMA, render=lambda args, value: []),
        execute=execute,
    )
