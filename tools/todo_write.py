"""``todo_write``: the agent's whole-list task plan, recorded in its session log.

The tool has no item ids and no partial updates: every call sends the complete list, and the last write
wins. Each accepted write appends a log-only ``todo/write`` event ``{"todos": [...]}`` (the trimmed list)
to the calling agent's event log, so a UI or a resumed session rebuilds the current plan with
:func:`latest_todos` instead of keeping hidden state.

Validation, in order (the first failure wins, nothing is logged):

1. every ``content`` is trimmed; an empty one fails ``invalid todo: `content` must be a non-empty string``;
2. duplicate trimmed contents fail ``invalid todos: duplicate content "<content>"``;
3. without ``allow_parallel_in_progress``, more than one ``in_progress`` item fails
   ``invalid todos: at most one task may be in_progress (got <n>)``;
4. a call without an owning agent fails ``todo_write requires an owning agent session``.

The first three are ``INVALID_ARGS`` (the model can fix its arguments); the last is ``TOOL_FAILED``.
The tool is exclusive (no concurrency classifier) and declares no timeout.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from codemode.runtime.definitions import ToolDefinition, ToolOutput, define_tool
from codemode.runtime.errors import ToolArgsError, ToolExecutionError
from codemode.runtime.events import TODO_WRITE, Event
from codemode.runtime.scope import Agent
from codemode.sandbox.lossless import thaw

__all__ = ("STATUSES", "TURN_START", "latest_todos", "todo_write_tool")

#: The three states of a todo item, in display order.
STATUSES: Final = ("pending", "in_progress", "completed")
#: A session event that starts a new turn; the todo projection resets on it.
TURN_START: Final = "turn/start"

_PARAMETERS: Final = {
    "todos": {
        "type": "array",
        "required": True,
        "description": "The complete todo list, replacing the previous one.",
        "items": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "content": {"type": "string", "required": True,
                            "description": "One concrete step, in the imperative."},
                "status": {"type": "string", "required": True, "enum": list(STATUSES)},
            },
        },
    },
}

_ITEM_SCHEMA: Final = {
    "type": "object",
    "additionalProperties": False,
    "properties": {"content": {"type": "string"}, "status": {"type": "string", "enum": list(STATUSES)}},
    "required": ["content", "status"],
}

_OUTPUT_SCHEMA: Final = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "todos": {"type": "array", "items": _ITEM_SCHEMA},
        "counts": {
            "type": "object",
            "additionalProperties": False,
            "properties": {name: {"type": "integer"} for name in STATUSES},
            "required": list(STATUSES),
        },
    },
    "required": ["todos", "counts"],
}

_DESCRIPTION_HEAD = (
    "Write the todo list for the current task. Each call replaces the whole list: send every item, "
    "with no partial updates. Use it to plan multi-step work, one todo per concrete step. "
)
_DESCRIPTION_PARALLEL = (
    "Mark every task you are actively working on as in_progress (several at once only when the work "
    "really runs in parallel), and keep at least one in_progress while work remains. "
)
_DESCRIPTION_SINGLE = (
    "Keep exactly one task in_progress while work remains, and never more than one. "
)
_DESCRIPTION_TAIL = (
    "Mark a task completed as soon as it is done. Skip this tool for trivial one-step tasks."
)


def _invalid(message: str) -> ToolArgsError:
    """An ``INVALID_ARGS`` error whose message is exactly ``message`` (no ``invalid arguments:`` prefix)."""
    error = ToolArgsError([message])
    error.message = message
    error.args = (message,)
    return error


def _render(args: Any, value: Any) -> list[dict[str, Any]]:
    counts = value["counts"]
    text = (f"Updated todo list: {counts['pending']} pending, {counts['in_progress']} in progress, "
            f"{counts['completed']} completed.")
    return [{"type": "text", "text": text}]


def _present_call(args: Any) -> dict[str, Any]:
    return {"title": "Update todo list", "kind": "other", "raw_input": thaw(args["todos"])}


def _normalise(todos: list[Any], allow_parallel: bool) -> list[dict[str, str]]:
    cleaned: list[dict[str, str]] = []
    seen: set[str] = set()
    for item in todos:
        content = item["content"].strip()
        if not content:
            raise _invalid("invalid todo: `content` must be a non-empty string")
        cleaned.append({"content": content, "status": item["status"]})
    for item in cleaned:
        if item["content"] in seen:
            raise _invalid(f'invalid todos: duplicate content "{item["content"]}"')
        seen.add(item["content"])
    active = sum(1 for item in cleaned if item["status"] == "in_progress")
    if not allow_parallel and active > 1:
        raise _invalid(f"invalid todos: at most one task may be in_progress (got {active})")
    return cleaned


def todo_write_tool(*, allow_parallel_in_progress: bool) -> ToolDefinition:
    """Build the ``todo_write`` definition; the flag (no default) decides how many tasks may be active."""
    if type(allow_parallel_in_progress) is not bool:
        raise TypeError("todo_write_tool(allow_parallel_in_progress=...) must be True or False, not "
                        f"{allow_parallel_in_progress!r}")
    allow_parallel = allow_parallel_in_progress

    async def execute(args: Any, ctx: Any) -> dict[str, Any]:
        todos = _normalise(list(args["todos"]), allow_parallel)
        agent = ctx.agent
        if not isinstance(agent, Agent):
            raise ToolExecutionError("todo_write requires an owning agent session")
        agent.events.append(TODO_WRITE, {"todos": todos})
        counts = {status: sum(1 for item in todos if item["status"] == status) for status in STATUSES}
        return {"todos": todos, "counts": counts}

    middle = _DESCRIPTION_PARALLEL if allow_parallel else _DESCRIPTION_SINGLE
    return define_tool(
        name="todo_write",
        description=_DESCRIPTION_HEAD + middle + _DESCRIPTION_TAIL,
        parameters=_PARAMETERS,
        output=ToolOutput(schema=_OUTPUT_SCHEMA, render=_render),
        execute=execute,
        present_call=_present_call,
    )


def latest_todos(events: Iterable[Event]) -> list[dict[str, str]] | None:
    """Replay the current todo list from a session log: the latest ``todo/write`` wins.

    ``None`` before the first write of a turn: a ``turn/start`` event resets the projection (a finished
    list stays visible after the turn ends, until the next one starts). Returns a detached copy.
    """
    current: Any = None
    for event in events:
        if event.type == TODO_WRITE:
            current = event.data.get("todos")
        elif event.type == TURN_START:
            current = None
    if current is None:
        return None
    return [{"content": item["content"], "status": item["status"]} for item in current]
