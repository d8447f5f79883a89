"""The delivery side of an agent turn: what a model loop does with the results of a batch of tool calls.

:meth:`ToolRuntime.execute_tool_calls` runs one assistant message's tool calls and returns their results.
Three things in those results are addressed to the *loop*, not to the tool-result slots of the calls:

* ``additional_contexts``: notes deferred by tools and policies (a repeat reminder, a ``run_code``
  child's image). Each becomes a **user message** sent to the model after the step's tool results,
  and a ``user/message`` event in the agent's log (after the step's ``tool/result`` events), whether or
  not the call succeeded.
* ``concludes_turn``: a successful call whose tool asked to end the turn (``ctx.conclude_turn()``).
  The loop sends the step's results and then waits for the next user message instead of calling the
  model again.
* a user message resets per-conversation policy state: :meth:`ToolRuntime.note_user_message` tells the
  listeners (the repeat reminder forgets its chains). Contexts are not the user's words: they reset
  nothing.

:class:`Turn` does all three for one turn (``user_message`` -> ``run`` per assistant message ->
``end``); :func:`deliver_results` is the delivery step alone, for a loop that calls
``execute_tool_calls`` itself. Both return a :class:`Step`, which a provider adapter
(``codemode.tools.providers``) renders into that provider's messages.

Events (data are lossless JSON): ``turn/start {"turn"}``, ``user/message {"content", "source",
"call_id"}`` (``source`` is ``{"kind": "user"}`` for the user's own words, and ``call_id`` names the
model-level call whose result carried a context, ``null`` otherwise), ``turn/end {"turn", "reason"}``
with ``reason`` one of ``completed``, ``concluded``, ``cancelled`` or the loop's own word.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from codemode.sandbox.lossless import FrozenDict, FrozenList, LosslessJsonError, canonical_dumps, snapshot

from .cancel import CancelSignal
from .errors import TurnOverError
from .events import TURN_END, TURN_START, USER_MESSAGE, Event
from .results import ToolResult, text_block
from .scheduler import ToolCallRequest
from .scope import Agent, Scope

if TYPE_CHECKING:
    from ._runtime import ToolRuntime

__all__ = ("USER_SOURCE", "Step", "Turn", "UserMessage", "deliver_results")

#: The ``source`` of a message the user wrote.
USER_SOURCE: Final = FrozenDict(kind="user")


@dataclass(frozen=True, slots=True)
class UserMessage:
    """A user-role message for the model: frozen content blocks and where the message came from.

    ``source`` is ``{"kind": "user"}`` for the user's own words; a context names its plugin
    (``{"kind": "plugin", "plugin": ...}``). ``call_id`` is the model-level call whose result carried
    the context (None for the user's words).
    """

    content: FrozenList
    source: FrozenDict
    call_id: str | None = None

    @property
    def from_user(self) -> bool:
        """True when the user wrote this message (it is not a tool's or a policy's context)."""
        return self.source.get("kind") == "user"

    def to_json(self) -> dict[str, Any]:
        """The ``user/message`` event data ``{"content", "source", "call_id"}``."""
        return {"content": self.content, "source": self.source, "call_id": self.call_id}

    @staticmethod
    def from_context(context: Any, call_id: str | None = None) -> UserMessage:
        """The user message of one additional context ``{"content": [blocks], "source": {...}}``.

        Contexts come from plugins, so a malformed one is repaired rather than lost: string content
        becomes a text block, any other non-list content (or a non-block item) becomes a text block of
        its JSON, and a missing or non-object source becomes ``{"kind": "plugin"}``.
        """
        raw = context if isinstance(context, Mapping) else {"content": context}
        content = raw.get("content")
        if isinstance(content, str):
            blocks: list[Any] = [text_block(content)]
        elif isinstance(content, list):
            blocks = [item if isinstance(item, Mapping) and isinstance(item.get("type"), str)
                      else text_block(_json_text(item)) for item in content]
        else:
            blocks = [text_block(_json_text(content if "content" in raw else raw))]
        source = raw.get("source")
        if not isinstance(source, Mapping):
            source = {"kind": "plugin"}
        return UserMessage(snapshot(blocks, freeze=True, root="content"),
                           snapshot(dict(source), freeze=True, root="source"), call_id)


def _json_text(value: Any) -> str:
    try:
        return canonical_dumps(value)
    except (LosslessJsonError, TypeError, ValueError):
        return repr(value)


def _user_message(content: str | Sequence[Mapping[str, Any]]) -> UserMessage:
    if isinstance(content, str):
        return UserMessage(FrozenList((text_block(content),)), USER_SOURCE)
    blocks: list[dict[str, Any]] = []
    for block in content if isinstance(content, Sequence) else [None]:
        if not isinstance(block, Mapping) or not isinstance(block.get("type"), str):
            raise TypeError("a user message is a string or a list of content blocks ({'type': ..., ...})")
        blocks.append(dict(block))
    return UserMessage(snapshot(blocks, freeze=True, root="content"), USER_SOURCE)


@dataclass(frozen=True, slots=True)
class Step:
    """What one assistant message's tool calls hand back to the model.

    Send ``results`` (one per call, in model order, paired with ``calls``), then ``messages`` (the
    additional contexts as user messages, in model order). When ``concludes_turn`` is True the turn is
    over: do not call the model again before the next user message.
    """

    calls: tuple[ToolCallRequest, ...]
    results: tuple[ToolResult, ...]
    messages: tuple[UserMessage, ...]
    concludes_turn: bool


def deliver_results(agent: Scope | None, calls: Sequence[ToolCallRequest],
                    results: Sequence[ToolResult]) -> Step:
    """Deliver one step: its contexts become user messages (and ``user/message`` events), in model order.

    ``calls`` and ``results`` are what :meth:`ToolRuntime.execute_tool_calls` took and returned. Events
    are appended only when ``agent`` is an :class:`~codemode.runtime.Agent`, after the step's results.
    """
    if len(calls) != len(results):
        raise ValueError(f"deliver_results() needs one result per call ({len(calls)} calls, "
                         f"{len(results)} results)")
    messages: list[UserMessage] = []
    for call, result in zip(calls, results, strict=True):
        if not isinstance(result, ToolResult):
            raise TypeError(f"results must be ToolResult values, not {type(result).__name__}")
        messages.extend(UserMessage.from_context(context, call.call_id)
                        for context in result.additional_contexts)
    if isinstance(agent, Agent):
        for message in messages:
            agent.events.append(USER_MESSAGE, message.to_json())
    concludes = any(result.concludes_turn and not result.is_error for result in results)
    return Step(tuple(calls), tuple(results), tuple(messages), concludes)


class Turn:
    """One turn of an agent: the user speaks, the model calls tools until it answers or a tool ends it.

    ::

        turn = Turn(rt, agent)
        turn.user_message("Summarise the notes")       # turn/start, user/message; policies reset
        while not turn.over:
            reply = model(history)                      # your client, e.g. via codemode.tools.providers
            if not reply.calls:
                turn.end()                              # the model answered: turn/end "completed"
                break
            step = await turn.run(reply.calls)          # results, then contexts as user messages
            history += adapter.render_step(step)        # a concluding step still sends its results

    ``cancel`` is the turn's signal: once it fires no further call starts, the step's unstarted calls
    get ``ABORTED_BEFORE_DISPATCH`` results, and the turn ends as ``cancelled``.
    """

    def __init__(self, rt: ToolRuntime, agent: Agent, *, cancel: CancelSignal | None = None) -> None:
        if not isinstance(agent, Agent):
            raise TypeError(f"Turn needs a codemode.runtime.Agent (it owns the event log), not "
                            f"{type(agent).__name__}")
        if cancel is not None and not isinstance(cancel, CancelSignal):
            raise TypeError(f"cancel must be a codemode.runtime.CancelSignal or None, not "
                            f"{type(cancel).__name__}")
        self.runtime = rt
        self.agent = agent
        self.cancel = cancel
        self.number: int | None = None
        self.steps = 0
        self.end_reason: str | None = None

    @property
    def started(self) -> bool:
        """True once the turn's ``turn/start`` event is logged."""
        return self.number is not None

    @property
    def over(self) -> bool:
        """True once the turn ended (a concluding step, :meth:`end`, or cancellation)."""
        return self.end_reason is not None

    @property
    def concluded(self) -> bool:
        """True when a tool ended the turn (``concludes_turn``)."""
        return self.end_reason == "concluded"

    def _start(self) -> None:
        if self.end_reason is not None:
            raise TurnOverError(self.end_reason)
        if self.number is None:
            self.number = 1 + len(self.agent.events.of_type(TURN_START))
            self.agent.events.append(TURN_START, {"turn": self.number})

    def user_message(self, content: str | Sequence[Mapping[str, Any]]) -> Event:
        """Log a message the user wrote (text, or content blocks) and reset per-conversation policies.

        Starts the turn if it has not started. Returns the ``user/message`` event.
        """
        message = _user_message(content)
        self._start()
        event = self.agent.events.append(USER_MESSAGE, message.to_json())
        self.runtime.note_user_message(self.agent)
        return event

    async def run(self, calls: Sequence[ToolCallRequest]) -> Step:
        """Execute one assistant message's tool calls and deliver them (see :func:`deliver_results`).

        A step with a concluding result ends the turn (``turn/end`` with reason ``concluded``); a
        cancelled one ends it as ``cancelled``. Raises :class:`~codemode.runtime.errors.TurnOverError`
        when the turn is already over.
        """
        self._start()
        calls = tuple(calls)
        results = await self.runtime.execute_tool_calls(calls, agent=self.agent, cancel=self.cancel)
        self.steps += 1
        step = deliver_results(self.agent, calls, results)
        if step.concludes_turn:
            self.end("concluded")
        elif self.cancel is not None and self.cancel.cancelled:
            self.end("cancelled")
        return step

    def end(self, reason: str = "completed") -> None:
        """End the turn (idempotent): log ``turn/end`` with ``reason`` if it started."""
        if not isinstance(reason, str) or not reason:
            raise ValueError("a turn's end reason must be a non-empty string")
        if self.end_reason is not None:
            return
        self.end_reason = reason
        if self.number is not None:
            self.agent.events.append(TURN_END, {"turn": self.number, "reason": reason})

    def __repr__(self) -> str:
        state = "over" if self.over else ("running" if self.started else "new")
        return f"<Turn {self.number} of {self.agent.name!r}: {state}, {self.steps} step(s)>"
