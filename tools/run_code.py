"""``run_code``: the reserved Code Mode tool, and the Python code runtime that provides it.

A model in code (or both) mode answers with one program: the body of an async Python function. The
program runs in the sandbox (a RestrictedPython interpreter inside an isolated worker process) and sees
exactly two host names, ``tools`` and ``ToolCallError``. Every ``await tools.NAME(...)`` becomes a *child
dispatch*: a call through the very same five-stage pipeline as a model-level call, numbered
``<outer call id>:code:<n>``, carrying the outer call's execution token as its parent, scheduled on the
run's own ordered lane (:func:`codemode.runtime.scheduler.open_sub_lane`).

:class:`PythonCodeRuntime` is the runtime's ``code_runtime`` seam: it builds the ``run_code`` definition
for a :class:`~codemode.runtime.ToolRuntime` and renders the ``tools:sdk`` prompt section from the same
visible set that the program's bindings come from (``rt.code_visible(agent)``), so the prompt never declares a
tool the program cannot call, nor hides one it can.

What a child call hands up reaches the ``run_code`` result (:func:`hand_up_child_result`, run as each
child commits, in submission order): its additional contexts, its image content (one context per
image-bearing child, since the program itself only sees values) and its conclusion of the turn.
"""

from __future__ import annotations

import collections
import contextlib
import json
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, Self

from codemode.runtime import (
    Agent,
    CodeRunFailedError,
    LifecycleError,
    Scope,
    ToolContext,
    ToolDefinition,
    ToolError,
    ToolOutput,
    ToolResult,
    ToolRuntime,
    define_tool,
    text_block,
)
from codemode.runtime.modes import RUN_CODE_OUTPUT_SCHEMA, RUN_CODE_PARAMETERS
from codemode.runtime.scheduler import open_sub_lane
from codemode.sandbox import (
    CallAbandonment,
    CooperativeCallTool,
    HealthEvent,
    RunResult,
    Sandbox,
    SandboxLimits,
    SandboxSession,
    ToolCallFailure,
)
from codemode.sandbox.lossless import JsonValue, dumps
from codemode.sdk import ToolSignature, render_python_sdk

__all__ = (
    "CODE_DESCRIPTION",
    "CODE_MODE_PLUGIN",
    "NO_OUTPUT",
    "RUN_CODE_DESCRIPTION",
    "PythonCodeRuntime",
    "hand_up_child_result",
    "has_image",
    "render_run_output",
    "signature_of",
)

#: What the model reads about ``run_code`` (the Python flavour).
RUN_CODE_DESCRIPTION = (
    "Execute a Python program against the available tools. Pass two required arguments: `code`, the BODY "
    "of an async Python function (top-level `await` and `return` both work), and `description`, a short "
    "summary shown to the user. Inside the program call tools as `await tools.name(args)` (a dict, or "
    "keyword arguments) exactly as declared in the system prompt; a failed call raises `ToolCallError`. "
    "Only what the program prints and returns comes back: use `print(...)` and/or `return <value>` "
    "(lossless JSON); a successful tool result that carries an image is attached after the run. "
    "Independent read-only calls may overlap under `asyncio.gather`."
)
CODE_DESCRIPTION: str = RUN_CODE_PARAMETERS["code"]["description"]
DESCRIPTION_DESCRIPTION: str = RUN_CODE_PARAMETERS["description"]["description"]
#: The plugin name in the ``source`` of the contexts ``run_code`` attaches (a child's image content).
CODE_MODE_PLUGIN = "code-mode"
#: Content of a successful run that printed and returned nothing.
NO_OUTPUT = "(run_code completed with no output)"

_COMPACT_DEPTH = 5


def signature_of(definition: ToolDefinition) -> ToolSignature:
    """The SDK's view of a runtime definition (name, description, parameter and output schemas)."""
    return ToolSignature(name=definition.name, description=definition.description,
                         parameters=definition.parameters, output_schema=definition.output.schema)


def _pretty(value: JsonValue, depth: int = 0) -> str:
    """Pretty JSON with 2-space indentation; containers at depth >= 5 are compact (bounded indent)."""
    if isinstance(value, dict) and value:
        if depth >= _COMPACT_DEPTH:
            return dumps(value, validate=False)
        pad = "  " * (depth + 1)
        items = [f"{pad}{json.dumps(k, ensure_ascii=False)}: {_pretty(v, depth + 1)}"
                 for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + "  " * depth + "}"
    if isinstance(value, list) and value:
        if depth >= _COMPACT_DEPTH:
            return dumps(value, validate=False)
        pad = "  " * (depth + 1)
        return "[\n" + ",\n".join(pad + _pretty(v, depth + 1) for v in value) + "\n" + "  " * depth + "]"
    return dumps(value, validate=False)


def render_run_output(logs: Sequence[str], value: JsonValue, has_value: bool) -> str:
    """What the model sees of a successful run: logs, then the result (strings raw, JSON pretty)."""
    parts = []
    if logs:
        parts.append("\n".join(logs))
    if has_value:
        parts.append(value if isinstance(value, str) else _pretty(value))
    text = "\n".join(part for part in parts if part)
    return text or NO_OUTPUT


def _render(args: Any, value: Any) -> list[dict[str, Any]]:
    return [text_block(render_run_output(value["logs"], value.get("result"), "result" in value))]


def _present_call(args: Any) -> dict[str, Any]:
    return {"kind": "execute", "title": args["description"], "raw_input": args["code"]}


def has_image(content: Sequence[Any]) -> bool:
    """True when some block of ``content`` is an image (``{"type": "image", ...}``)."""
    return any(isinstance(block, Mapping) and block.get("type") == "image" for block in content)


def hand_up_child_result(ctx: ToolContext, name: str, call_id: str, result: ToolResult) -> None:
    """Hand what a committed child call carries up to its ``run_code`` call (in commit order).

    * A successful child whose content holds an image: its whole content becomes ONE additional
      context, a user message attached after the run (the SDK section promises the model this), with
      ``source`` ``{"kind": "plugin", "plugin": "code-mode", "tool", "call_id"}``. The program itself
      only ever sees values, never images.
    * The child's own additional contexts, in order.
    * A child's conclusion of the turn. Only a success can carry it, so a child that a policy blocked
      (or that failed) never concludes the turn, even when the program catches the error.

    Contexts are deferred onto the ``run_code`` call right away, so they stay attached when the program
    fails later (or is cancelled); an outer post-execute ``Block`` discards them with the result.
    """
    if not result.is_error and has_image(result.content):
        ctx.defer_context({"content": result.content,
                           "source": {"kind": "plugin", "plugin": CODE_MODE_PLUGIN, "tool": name,
                                      "call_id": call_id}})
    for context in result.additional_contexts:
        ctx.defer_context(context)
    if result.concludes_turn:
        ctx.conclude_turn()


LogObserver = Callable[[ToolContext, str], None]
RunObserver = Callable[[ToolContext, RunResult], None]


class PythonCodeRuntime:
    """The Python code runtime: ``ToolRuntime(mode="code", code_runtime=PythonCodeRuntime())``.

    It owns a :class:`codemode.sandbox.Sandbox` (a warm supply of isolated workers) unless one is passed in,
    and must be entered before programs run: outside the runtime that uses it, or tied to it::

        async with PythonCodeRuntime() as code_runtime, ToolRuntime("code", code_runtime=code_runtime) as rt:
            ...

        code_runtime = PythonCodeRuntime()
        async with ToolRuntime("code", code_runtime=code_runtime) as rt:
            await rt.enter_async_context(code_runtime)
            ...

    ``limits`` are the per-run sandbox budgets. With
    ``persistent_sessions=True`` each agent keeps one sandbox session, so variables survive between its
    ``run_code`` calls (like a notebook); the agent's event log records the session (``code/session``:
    ``opened``, and ``restarted`` when a run had to start a fresh worker because the old one had died).
    The sandbox's health events during a run (its template lost or replaced, the restart breaker) go to
    the log of the agent whose run saw them (``code/sandbox``).
    A call without an agent has nobody to share a session with: it always runs on a fresh worker, so
    two such callers never see each other's variables.
    ``on_log`` observes each printed line as it arrives (the CLI streams them); ``on_run`` observes each
    finished run's :class:`codemode.sandbox.RunResult` (failure kind, logs, stats) before it becomes a tool
    result.
    """

    language = "python"

    def __init__(self, sandbox: Sandbox | None = None, *, limits: SandboxLimits | None = None,
                 persistent_sessions: bool = False, on_log: LogObserver | None = None,
                 on_run: RunObserver | None = None) -> None:
        self._own_sandbox = sandbox is None
        self.sandbox = sandbox if sandbox is not None else Sandbox(limits)
        self.limits = limits
        self.persistent_sessions = persistent_sessions
        self.on_log = on_log
        self.on_run = on_run
        self._sessions: dict[Scope, SandboxSession] = {}
        self._stack: contextlib.AsyncExitStack | None = None
        self._exited = False
        #: The sandbox's recent health events, numbered; a run logs those numbered above its start's.
        self._health: collections.deque[tuple[int, HealthEvent]] = collections.deque(maxlen=32)
        self._health_seq = 0

    async def __aenter__(self) -> Self:
        if self._stack is not None or self._exited:
            raise LifecycleError("a PythonCodeRuntime can be entered once (`async with` it a single time)")
        stack = contextlib.AsyncExitStack()
        if self._own_sandbox:
            await stack.enter_async_context(self.sandbox)
        stack.callback(self.sandbox.on_health(self._note_health))
        self._stack = stack
        return self

    def _note_health(self, event: HealthEvent) -> None:
        self._health_seq += 1
        self._health.append((self._health_seq, event))

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        sessions, self._sessions = self._sessions, {}
        for session in sessions.values():
            await session.aclose()
        stack, self._stack = self._stack, None
        self._exited = True
        if stack is not None:
            await stack.aclose()

    def check_running(self) -> None:
        """Raise :class:`~codemode.runtime.LifecycleError` unless programs can run now (entered, not exited).

        The :class:`~codemode.runtime.ToolRuntime` calls it before it schedules a ``run_code`` call, so a
        runtime that was never entered fails in the integrator's hands, not as a tool error the model sees.
        """
        if self._stack is None:
            state = "has exited" if self._exited else "was never entered"
            raise LifecycleError(f"the PythonCodeRuntime {state}: programs run only inside `async with "
                                 "PythonCodeRuntime() as code_runtime` (entered before the ToolRuntime that "
                                 "uses it, or with rt.enter_async_context(code_runtime)); codemode.CodeMode "
                                 "does this for you")

    # ------------------------------------------------------------------ the CodeRuntime seam

    def render_sdk(self, definitions: Sequence[ToolDefinition]) -> str:
        """The ``tools:sdk`` section for ``definitions`` (the caller's visible set minus run_code)."""
        return render_python_sdk(signature_of(definition) for definition in definitions)

    def run_code_definition(self, rt: ToolRuntime) -> ToolDefinition:
        """Build the reserved ``run_code`` tool bound to ``rt``."""

        async def execute(args: Mapping[str, Any], ctx: ToolContext) -> JsonValue:
            return await self._execute(rt, args, ctx)

        return define_tool(
            name="run_code",
            description=RUN_CODE_DESCRIPTION,
            parameters=RUN_CODE_PARAMETERS,
            output=ToolOutput(schema=RUN_CODE_OUTPUT_SCHEMA, render=_render),
            execute=execute,
            present_call=_present_call,
        )

    # ------------------------------------------------------------------ one run

    async def _session_for(self, agent: Scope | None) -> SandboxSession | None:
        if not self.persistent_sessions or agent is None:
            return None
        session = self._sessions.get(agent)
        if session is None:
            session = self.sandbox.open_session(self.limits)
            await session.__aenter__()
            self._sessions[agent] = session
            if isinstance(agent, Agent):
                agent.events.append("code/session", {"event": "opened", "language": self.language})
        return session

    def _log_health(self, agent: Agent, outcome: RunResult, seen: int) -> None:
        for number, event in self._health:
            if number > seen:
                agent.events.append("code/sandbox", event.to_json())
        if outcome.stats.session_restarted:
            agent.events.append("code/session", {
                "event": "restarted", "language": self.language,
                "reason": "the session's worker had died, so this run started a fresh one: variables from "
                          "earlier runs are gone"})

    async def _execute(self, rt: ToolRuntime, args: Mapping[str, Any], ctx: ToolContext) -> JsonValue:
        if not args["description"].strip():
            raise ToolError("invalid description: expected a non-empty string")
        if self._stack is None:
            raise ToolError("the Python code runtime is not running: enter it with 'async with' before "
                            "the ToolRuntime that uses it, or with rt.enter_async_context(...)")
        # (the worker's CPU wakes while the lane and the bindings are set up)
        if not self.persistent_sessions or ctx.agent is None:
            self.sandbox.prewake()
        elif (kept := self._sessions.get(ctx.agent)) is not None:
            kept.prewake()
        names = [definition.name for definition in rt.code_visible(ctx.agent)]
        observer = self.on_log

        def on_log(line: str) -> None:
            if observer is not None:
                observer(ctx, line)

        session = await self._session_for(ctx.agent)
        def hand_up(name: str, call_id: str, result: ToolResult) -> None:
            hand_up_child_result(ctx, name, call_id, result)

        seen = self._health_seq
        async with open_sub_lane(rt, outer_call=ctx, cancel=ctx.cancel, on_commit=hand_up) as lane:

            async def call_tool(name: str, arguments: Any, abandonment: CallAbandonment) -> Any:
                # Cooperative: the sandbox never cancels this call, it fires the abandonment instead,
                # so the lane settles every call it started and may drive it right in this task.
                try:
                    result = await lane.submit(name, arguments, abandoned=abandonment)
                except ToolError as exc:
                    raise ToolCallFailure(exc.message, exc.code) from None
                if result.is_error:
                    error = result.error
                    raise ToolCallFailure(error.message if error else "tool call failed",
                                          (error.code if error else None) or "TOOL_FAILED")
                return result.value  # frozen and validated; the sandbox copies it into the reply

            outcome: RunResult = await self.sandbox.run(
                args["code"], tool_names=names, call_tool=CooperativeCallTool(call_tool),
                limits=self.limits, cancel=ctx.cancel, on_log=on_log, session=session)
        if (outcome.stats.session_restarted or self._health_seq != seen) and isinstance(ctx.agent, Agent):
            self._log_health(ctx.agent, outcome, seen)
        if self.on_run is not None:
            self.on_run(ctx, outcome)
        if outcome.error is not None:
            raise CodeRunFailedError(outcome.error.kind, outcome.error.message, outcome.logs)
        value: dict[str, Any] = {"logs": list(outcome.logs)}
        if outcome.has_value:
            value["result"] = outcome.value
        return value
