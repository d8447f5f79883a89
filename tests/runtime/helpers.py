"""Small builders shared by the runtime tests (plain functions, so tests read top to bottom)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from codemode.runtime import ToolContext, ToolDefinition, ToolOutput, ToolRuntime, define_tool

TEXT_OUTPUT: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {"text": {"type": "string"}},
    "required": ["text"],
}


def render_text(args: Any, value: Any) -> list[dict[str, Any]]:
    """Render ``{"text": ...}`` values as one text block."""
    return [{"type": "text", "text": value["text"]}]


def echo_tool(name: str = "echo", *, prefix: str = "", safe: bool = True,
              calls: list[Any] | None = None, **options: Any) -> ToolDefinition:
    """A tool returning ``{"text": prefix + args["text"]}``; records its arguments in ``calls``."""

    async def execute(args: Any, ctx: ToolContext) -> Any:
        if calls is not None:
            calls.append(args)
        return {"text": prefix + args["text"]}

    return define_tool(
        name=name,
        description=f"Echo the text ({name}).",
        parameters={"text": {"type": "string", "required": True}},
        output=ToolOutput(schema=TEXT_OUTPUT, render=render_text),
        execute=execute,
        is_concurrency_safe=(lambda args: True) if safe else None,
        **options,
    )


def body_tool(name: str, body: Callable[[Any, ToolContext], Awaitable[Any]], *,
              schema: dict[str, Any] | None = None, **options: Any) -> ToolDefinition:
    """A tool with open parameters, an arbitrary body and (by default) an unconstrained output."""
    return define_tool(
        name=name,
        description=f"Test tool {name}.",
        parameters={},
        output=ToolOutput(schema={} if schema is None else schema,
                          render=lambda args, value: [{"type": "text", "text": repr(value)}]),
        execute=body,
        **options,
    )


@dataclass(frozen=True)
class OuterCall:
    """The identity of an outer run_code call, as ``open_sub_lane`` needs it."""

    call_id: str
    root_call_id: str
    agent: Any
    token: Any


def outer_call(rt: ToolRuntime, agent: Any, call_id: str = "run-1") -> OuterCall:
    """An outer run_code call created (not dispatched) on ``rt``, for a sub-lane's children."""
    execution = rt.stages.create("run_code", {}, call_id=call_id, agent=agent)
    return OuterCall(call_id, call_id, agent, execution.token)
