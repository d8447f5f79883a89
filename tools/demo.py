"""The built-in demo tools: small, deterministic, and enough to exercise every scheduling path.

``demo_tools()`` builds a fresh set each call, so per-runtime state (the counter) never leaks between
runtimes: register one set per :class:`~codemode.runtime.ToolRuntime`.
"""

from __future__ import annotations

from typing import Any

import anyio

from codemode.runtime import ToolContext, ToolDefinition, ToolExecutionError, ToolOutput, define_tool

__all__ = ("demo_tools",)


def _text(value: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": value}]


def _object(properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "additionalProperties": False, "properties": properties,
            "required": list(properties)}


def _always(args: Any) -> bool:
    return True


def demo_tools() -> list[ToolDefinition]:
    """A fresh list of the demo tools ``echo``, ``add``, ``sleep``, ``counter_increment`` and ``fail``."""
    counter = {"value": 0}

    async def echo(args: Any, ctx: ToolContext) -> Any:
        return {"text": args["text"]}

    async def add(args: Any, ctx: ToolContext) -> Any:
        return {"sum": args["a"] + args["b"]}

    async def sleep(args: Any, ctx: ToolContext) -> Any:
        await anyio.sleep(args["ms"] / 1000)
        return {"slept_ms": args["ms"]}

    async def counter_increment(args: Any, ctx: ToolContext) -> Any:
        counter["value"] += args.get("by", 1)
        return {"value": counter["value"]}

    async def fail(args: Any, ctx: ToolContext) -> Any:
        raise ToolExecutionError(args["message"])

    return [
        define_tool(
            name="echo",
            description="Return the given text unchanged. Use it to check that tool calls work.",
            parameters={"text": {"type": "string", "required": True, "description": "The text to echo."}},
            output=ToolOutput(schema=_object({"text": {"type": "string"}}),
                              render=lambda args, value: _text(value["text"])),
            execute=echo,
            is_concurrency_safe=_always,
        ),
        define_tool(
            name="add",
            description="Add two numbers and return their sum as {sum}.",
            parameters={
                "a": {"type": "number", "required": True, "description": "The first addend."},
                "b": {"type": "number", "required": True, "description": "The second addend."},
            },
            output=ToolOutput(schema=_object({"sum": {"type": "number"}}),
                              render=lambda args, value: _text(str(value["sum"]))),
            execute=add,
            is_concurrency_safe=_always,
        ),
        define_tool(
            name="sleep",
            description=("Wait for `ms` milliseconds, then return {slept_ms}. Safe to run in parallel; "
                         "stops early (as aborted) when the call is cancelled."),
            parameters={"ms": {"type": "integer", "required": True,
                               "description": "How long to wait, in milliseconds (0 to 60000)."}},
            output=ToolOutput(schema=_object({"slept_ms": {"type": "integer"}}),
                              render=lambda args, value: _text(f"slept {value['slept_ms']} ms")),
            execute=_bounded_sleep(sleep),
            is_concurrency_safe=_always,
        ),
        define_tool(
            name="counter_increment",
            description=("Add `by` (default 1) to this runtime's counter, which starts at 0, and return "
                         "the new {value}. Calls run one at a time, in order."),
            parameters={"by": {"type": "integer", "description": "How much to add (may be negative)."}},
            output=ToolOutput(schema=_object({"value": {"type": "integer"}}),
                              render=lambda args, value: _text(str(value["value"]))),
            execute=counter_increment,
        ),
        define_tool(
            name="fail",
            description=("Always fail with the given message (code TOOL_FAILED). Use it to test error "
                         "handling."),
            parameters={"message": {"type": "string", "required": True,
                                    "description": "The error message to fail with."}},
            output=ToolOutput(schema={"type": "null"}, render=lambda args, value: []),
            execute=fail,
        ),
    ]


def _bounded_sleep(body: Any) -> Any:
    async def execute(args: Any, ctx: ToolContext) -> Any:
        ms = args["ms"]
        if ms < 0 or ms > 60_000:
            raise ToolExecutionError(f"ms must be between 0 and 60000, got {ms}")
        return await body(args, ctx)

    return execute
