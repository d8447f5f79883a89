"""The agent session's append-only event log, its JSON-lines form, and the tool-history projection.

Events are ``Event(seq, type, data)`` with ``seq`` counting from 1 and ``data`` a frozen lossless JSON
object, so an exported log re-imports to an equal log and every projection of it replays identically.
Canonical tool values are never logged (only what the model saw), exactly like the reference.

Event types written by the runtime and its schedulers:

* ``tool/call``  ``{"call_id", "name", "arguments"}`` - ``arguments`` is the raw argument text.
* ``tool/result`` ``{"call_seq", "call_id", "name", "is_error", "content", "error", "meta"}`` - linked to
  its ``tool/call`` by ``call_seq``; ``error`` is ``{"code", "message"}`` or null.
* ``tool/code-dispatch-start`` / ``tool/code-dispatch`` - child calls of ``run_code`` (log only).
* ``todo/write`` - the todo list snapshot (log only).

Event types written by an agent loop through :mod:`codemode.runtime.turn`:

* ``turn/start`` ``{"turn"}`` and ``turn/end`` ``{"turn", "reason"}`` - the bounds of one turn.
* ``user/message`` ``{"content", "source", "call_id"}`` - what the user wrote (``source`` ``{"kind":
  "user"}``), or an additional context delivered to the model after its step's results (``source``
  names the plugin, ``call_id`` the call whose result carried it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from codemode.sandbox.lossless import (
    FrozenDict,
    LosslessJsonError,
    dumps,
    escape_lone_surrogates,
    loads,
    snapshot,
    thaw,
)

from .cancel import removal
from .errors import EventLogError

if TYPE_CHECKING:
    from .results import ToolResult

__all__ = (
    "TODO_WRITE",
    "TOOL_CALL",
    "TOOL_CODE_DISPATCH",
    "TOOL_CODE_DISPATCH_START",
    "TOOL_RESULT",
    "TURN_END",
    "TURN_START",
    "USER_MESSAGE",
    "Event",
    "EventLog",
    "ToolExchange",
    "project_tool_history",
)

TOOL_CALL = "tool/call"
TOOL_RESULT = "tool/result"
TOOL_CODE_DISPATCH_START = "tool/code-dispatch-start"
TOOL_CODE_DISPATCH = "tool/code-dispatch"
TODO_WRITE = "todo/write"
TURN_START = "turn/start"
TURN_END = "turn/end"
USER_MESSAGE = "user/message"


@dataclass(frozen=True, slots=True)
class Event:
    """One log entry: its position ``seq`` (1-based), its ``type`` and frozen JSON ``data``."""

    seq: int
    type: str
    data: FrozenDict

    def to_json(self) -> dict[str, Any]:
        """The plain JSON object of one JSON-lines record."""
        return {"seq": self.seq, "type": self.type, "data": thaw(self.data)}


class EventLog:
    """Append-only, in-memory event log of one agent session.

    :meth:`on_append` listeners see each event as it is appended (the command line streams ``--events``
    with one), so a log can be written while the session runs instead of after it.
    """

    __slots__ = ("_events", "_listeners")

    def __init__(self, events: Iterable[Event] = ()) -> None:
        self._events: list[Event] = []
        self._listeners: list[Callable[[Event], None]] = []
        for event in events:
            self._check_next(event.seq, event.type)
            self._events.append(event)

    def __len__(self) -> int:
        return len(self._events)

    def __iter__(self) -> Iterator[Event]:
        return iter(tuple(self._events))

    def __getitem__(self, index: int) -> Event:
        return self._events[index]

    @property
    def events(self) -> tuple[Event, ...]:
        """All events so far, oldest first."""
        return tuple(self._events)

    def of_type(self, type_: str) -> tuple[Event, ...]:
        """The events of one type, oldest first."""
        return tuple(event for event in self._events if event.type == type_)

    def append(self, type_: str, data: Mapping[str, Any]) -> Event:
        """Append an event; ``data`` must be a lossless JSON object (it is snapshotted and frozen)."""
        if not isinstance(type_, str) or not type_:
            raise EventLogError(f"event type must be a non-empty string, not {type_!r}")
        if not isinstance(data, Mapping):
            raise EventLogError(f"event data must be a JSON object, not {type(data).__name__}")
        try:
            # (an exact dict is copied by the snapshot itself; other mappings become one first)
            frozen = snapshot(data if type(data) is dict else dict(data), freeze=True, root="data")
        except LosslessJsonError as exc:
            raise EventLogError(f"event {type_!r} data is not lossless JSON: {exc}") from None
        event = Event(len(self._events) + 1, type_, frozen)
        self._events.append(event)
        if self._listeners:
            for listener in tuple(self._listeners):
                listener(event)
        return event

    def on_append(self, listener: Callable[[Event], None]) -> Callable[[], None]:
        """Call ``listener(event)`` after each append from now on; returns its (idempotent) remover.

        A listener runs inside :meth:`append`, so it must be quick and must not raise: what it raises
        reaches the code that appended.
        """
        self._listeners.append(listener)
        return removal(self._listeners, listener)

    def append_tool_call(self, call_id: str, name: str, arguments_text: str) -> Event:
        """Append ``tool/call`` for a model-level call (``arguments_text`` is the raw JSON text).

        These are a record of what the caller sent, which may hold text that is not Unicode (a lone
        surrogate, refused when the arguments are parsed): the record writes it as ``\\udc80``.
        """
        return self.append(TOOL_CALL, {"call_id": escape_lone_surrogates(call_id),
                                       "name": escape_lone_surrogates(name),
                                       "arguments": escape_lone_surrogates(arguments_text)})

    def append_tool_result(self, call: Event, result: ToolResult) -> Event:
        """Append ``tool/result`` for ``result``, linked to its ``tool/call`` event ``call``."""
        if call.type != TOOL_CALL:
            raise EventLogError(f"a tool/result must link to a tool/call event, not {call.type!r}")
        return self.append(TOOL_RESULT, {
            "call_seq": call.seq,
            "call_id": call.data["call_id"],
            "name": call.data["name"],
            "is_error": result.is_error,
            "content": result.content,
            "error": None if result.error is None else result.error.to_json(),
            "meta": result.meta,
        })

    def to_jsonl(self) -> str:
        """Export as JSON lines (one compact object per event, newline-terminated)."""
        return "".join(dumps(event.to_json()) + "\n" for event in self._events)

    @classmethod
    def from_jsonl(cls, text: str) -> EventLog:
        """Import an export of :meth:`to_jsonl`; malformed input raises :class:`EventLogError`."""
        log = cls()
        for number, line in enumerate(text.split("\n"), start=1):  # not splitlines(): U+0085 etc.
            if not line.strip():
                continue
            try:
                record = loads(line)
            except LosslessJsonError as exc:
                raise EventLogError(f"line {number}: {exc}") from None
            if not isinstance(record, dict) or set(record) != {"seq", "type", "data"}:
                raise EventLogError(f'line {number}: expected an object with "seq", "type" and "data"')
            seq, type_, data = record["seq"], record["type"], record["data"]
            if type(seq) is not int or not isinstance(type_, str) or not isinstance(data, dict):
                raise EventLogError(f"line {number}: seq must be an integer, type a string, data an object")
            log._check_next(seq, type_)
            log._events.append(Event(seq, type_, snapshot(data, freeze=True, root="data")))
        return log

    def _check_next(self, seq: int, type_: str) -> None:
        expected = len(self._events) + 1
        if seq != expected:
            raise EventLogError(f"event {type_!r} has seq {seq}, expected {expected}")


@dataclass(frozen=True, slots=True)
class ToolExchange:
    """One model-level tool call and (once committed) what the model saw of its result."""

    call_seq: int
    call_id: str
    name: str
    arguments: str
    settled: bool
    is_error: bool
    content: Any
    error_code: str | None


def project_tool_history(events: Iterable[Event]) -> tuple[ToolExchange, ...]:
    """Replay ``tool/call``/``tool/result`` events into the call history, in call order.

    A result whose ``call_seq`` names no earlier ``tool/call``, or a second result for one call, raises
    :class:`EventLogError`: a log that cannot be replayed must say so rather than guess.
    """
    calls: dict[int, ToolExchange] = {}
    for event in events:
        data = event.data
        if event.type == TOOL_CALL:
            calls[event.seq] = ToolExchange(event.seq, data["call_id"], data["name"], data["arguments"],
                                            False, False, None, None)
        elif event.type == TOOL_RESULT:
            seq = data.get("call_seq")
            pending = calls.get(seq) if isinstance(seq, int) else None
            if pending is None:
                raise EventLogError(f"tool/result #{event.seq} links to unknown tool/call {seq!r}")
            if pending.settled:
                raise EventLogError(f"tool/call #{seq} has more than one tool/result")
            error = data.get("error")
            calls[pending.call_seq] = ToolExchange(
                pending.call_seq, pending.call_id, pending.name, pending.arguments, True,
                bool(data["is_error"]), data["content"],
                error["code"] if isinstance(error, dict) else None,
            )
    return tuple(calls[seq] for seq in sorted(calls))
