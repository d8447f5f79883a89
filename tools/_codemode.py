"""``CodeMode``: the sandbox, the code runtime and the tool runtime as one async context manager.

The parts it assembles stay reachable (``cm.runtime`` is the :class:`~codemode.runtime.ToolRuntime` for
hooks, guards and policies; ``cm.code_runtime`` the :class:`~codemode.tools.PythonCodeRuntime`), but
nobody has to know in which order they are entered, that ``run_code`` wants a description, or that
``timeout_ms`` needs the timeout policy::

    async with CodeMode(tools=[search, fetch]) as cm:
        result = await cm.run("hits = await tools.search(query='x')\\nreturn len(hits)")
        prompt = cm.prompt()                                # what the model is offered
        results = await cm.execute_tool_calls(calls)        # one model turn

Misuse fails where it is made, with :class:`~codemode.runtime.LifecycleError` (a ``RuntimeError``):
calling before ``async with``, after it, or entering twice.
"""

from __future__ import annotations

import contextlib
import itertools
import json
from collections.abc import Callable, Iterable, Sequence
from types import TracebackType
from typing import Any, Final, Self

from codemode.runtime import (
    RUN_CODE,
    Agent,
    ApprovalService,
    CancelSignal,
    ConfigError,
    Disposer,
    LifecycleError,
    Mode,
    Prompt,
    Scope,
    ToolCallRequest,
    ToolDefinition,
    ToolResult,
    ToolRuntime,
    tool,
)
from codemode.runtime.modes import parse_mode
from codemode.sandbox import Sandbox, SandboxLimits

from .run_code import LogObserver, PythonCodeRuntime, RunObserver
from .timeout_policy import DEFAULT_GRACE_MS, TimeoutPolicy, install_timeout_policy

__all__ = ("DEFAULT_DESCRIPTION", "CodeMode")

#: The ``run_code`` description :meth:`CodeMode.run` sends when it is given none.
DEFAULT_DESCRIPTION: Final = "Run a Python program"

ToolLike = ToolDefinition | Callable[..., Any]


class CodeMode:
    """Code Mode in one object: ``async with CodeMode(tools=[...]) as cm``.

    ``tools`` are :class:`~codemode.runtime.ToolDefinition` values or plain typed functions (which go
    through :func:`codemode.tool`). ``mode`` is ``"code"`` (the model sees only ``run_code``), ``"both"``
    or ``"native"`` (no sandbox is started; :meth:`run` is then unavailable). ``limits`` are the sandbox's
    per-run budgets; pass ``sandbox`` to share one warm worker supply between several instances
    (``CodeMode`` enters only a sandbox it made). ``persistent_sessions=True`` keeps each agent's
    variables between its programs. ``approval`` answers ``Ask`` decisions of pre-execute hooks.

    ``timeout_ms`` of every tool is enforced: the timeout policy is installed (``enforce_timeouts``,
    with ``timeout_grace_ms`` for bodies that ignore cancellation; ``cm.timeout_policy``).

    ``agent`` is the default :class:`~codemode.runtime.Agent` of :meth:`run`, :meth:`prompt` and
    :meth:`execute_tool_calls` (a fresh ``Agent("agent")`` when not given); its event log records every
    call. ``on_log(ctx, line)`` and ``on_run(ctx, run_result)`` observe programs as they run.
    """

    def __init__(
        self,
        tools: Iterable[ToolLike] = (),
        *,
        mode: Mode | str = "code",
        limits: SandboxLimits | None = None,
        sandbox: Sandbox | None = None,
        persistent_sessions: bool = False,
        approval: ApprovalService | None = None,
        agent: Agent | None = None,
        max_parallel_tool_calls: int = 10,
        max_parallel_sub_calls: int = 10,
        enforce_timeouts: bool = True,
        timeout_grace_ms: float = DEFAULT_GRACE_MS,
        on_log: LogObserver | None = None,
        on_run: RunObserver | None = None,
    ) -> None:
        self.mode = parse_mode(mode)
        if agent is not None and not isinstance(agent, Agent):
            raise ConfigError(f"agent must be a codemode.runtime.Agent, not {type(agent).__name__}")
        self.agent = agent if agent is not None else Agent("agent")
        self.code_runtime: PythonCodeRuntime | None = None
        if self.mode is not Mode.NATIVE:
            self.code_runtime = PythonCodeRuntime(sandbox, limits=limits,
                                                  persistent_sessions=persistent_sessions,
                                                  on_log=on_log, on_run=on_run)
        elif sandbox is not None or limits is not None or persistent_sessions or on_log or on_run:
            raise ConfigError('mode "native" runs no programs: sandbox, limits, persistent_sessions, on_log '
                              'and on_run need mode "code" or "both"')
        #: The tool runtime: register tools, add hooks, guards and policies (before or inside ``async with``).
        self.runtime = ToolRuntime(self.mode, max_parallel_tool_calls=max_parallel_tool_calls,
                                   max_parallel_sub_calls=max_parallel_sub_calls, approval=approval,
                                   code_runtime=self.code_runtime)
        #: The installed timeout policy (None with ``enforce_timeouts=False``); ``stalled`` lists stuck
        #: bodies.
        self.timeout_policy: TimeoutPolicy | None = (
            install_timeout_policy(self.runtime, grace_ms=timeout_grace_ms) if enforce_timeouts else None)
        for item in tools:
            self.register(item)
        self._stack: contextlib.AsyncExitStack | None = None
        self._state = "new"  # -> "open" -> "closed"
        self._ids = itertools.count(1)

    # ------------------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> Self:
        if self._state != "new":
            raise LifecycleError("a CodeMode can be entered once (`async with` it a single time; make a new "
                                 "one for another lifetime)" if self._state == "closed" else
                                 "this CodeMode is already entered; use the object `async with` gave you")
        self._state = "open"
        try:
            async with contextlib.AsyncExitStack() as stack:
                if self.code_runtime is not None:  # owns the sandbox: entered first, closed last
                    await stack.enter_async_context(self.code_runtime)
                await stack.enter_async_context(self.runtime)
                self._stack = stack.pop_all()
        except BaseException:
            self._state = "closed"  # (the parts entered so far are closed again)
            raise
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        stack, self._stack = self._stack, None
        self._state = "closed"
        if stack is not None:
            await stack.__aexit__(exc_type, exc, tb)

    def _require_open(self, what: str) -> None:
        if self._state != "open":
            when = "after its `async with` block ended" if self._state == "closed" else "before `async with`"
            raise LifecycleError(f"CodeMode.{what} was called {when}: use it inside "
                                 "`async with CodeMode(...) as cm:`")

    # ------------------------------------------------------------------------------ tools

    def register(self, item: ToolLike, *, scope: Scope | None = None) -> Disposer:
        """Register a definition, or a plain typed function through :func:`codemode.tool`."""
        definition = item if isinstance(item, ToolDefinition) else tool(item)
        return self.runtime.register(definition, scope=scope)

    # ------------------------------------------------------------------------------ the integrator's calls

    def prompt(self, agent: Scope | None = None, *, tool_order: Sequence[str] | None = None) -> Prompt:
        """What the model is offered (tools and prompt sections) for ``agent`` (default :attr:`agent`)."""
        self._require_open("prompt()")
        return self.runtime.prompt(self.agent if agent is None else agent, tool_order=tool_order)

    async def run(self, code: str, description: str | None = None, *, agent: Scope | None = None,
                  cancel: CancelSignal | None = None) -> ToolResult:
        """Run ``code`` (the body of an async function) as one ``run_code`` call; return its result.

        The result's ``text`` is what the model would read (printed lines, then the returned value);
        ``value`` is ``{"logs": [...], "result": ...}`` on success; a failed program is an error result
        (``CODE_RUN_FAILED``) whose message has the failure kind and the captured output. ``description``
        is the one-line summary a UI shows (default :data:`DEFAULT_DESCRIPTION`).
        """
        self._require_open("run()")
        if self.code_runtime is None:
            raise ConfigError('CodeMode.run() runs a program through run_code, which mode "native" does not '
                              'offer; use mode="code" or "both"')
        if not isinstance(code, str):
            raise TypeError(f"code must be a str, not {type(code).__name__}")
        arguments = json.dumps({"code": code, "description": description or DEFAULT_DESCRIPTION})
        request = ToolCallRequest(f"run-{next(self._ids)}", RUN_CODE, arguments)
        [result] = await self.runtime.execute_tool_calls(
            [request], agent=self.agent if agent is None else agent, cancel=cancel)
        return result

    async def execute_tool_calls(self, calls: Sequence[ToolCallRequest], *, agent: Scope | None = None,
                                 cancel: CancelSignal | None = None) -> list[ToolResult]:
        """Run one model turn's tool calls (see :meth:`codemode.runtime.ToolRuntime.execute_tool_calls`)."""
        self._require_open("execute_tool_calls()")
        return await self.runtime.execute_tool_calls(calls, agent=self.agent if agent is None else agent,
                                                     cancel=cancel)

    def __repr__(self) -> str:
        names = ", ".join(definition.name for definition in self.runtime.definitions(None)
                          if definition.name != RUN_CODE)
        return f"<CodeMode mode={self.mode.value} {self._state} tools=[{names}]>"
