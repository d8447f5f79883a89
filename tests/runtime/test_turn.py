"""The delivery side of a turn: contexts become user messages, a conclusion ends the turn, a user message
resets per-conversation policies."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
import pytest

from codemode.runtime import (
    Accept,
    Agent,
    CancelSource,
    Scope,
    Step,
    ToolCall,
    ToolCallRequest,
    ToolContext,
    ToolResult,
    ToolRuntime,
    Turn,
    TurnOverError,
    UserMessage,
    deliver_results,
)

from .helpers import body_tool, echo_tool

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _finish(args: Any, ctx: ToolContext) -> Any:
    ctx.conclude_turn()
    if args.get("fail"):
        raise RuntimeError("could not finish")
    return "finished"


async def _note_echo(call: ToolCall, result: ToolResult, call_next: Callable[[], Awaitable[Any]]) -> Any:
    await call_next()
    if call.name != "echo":
        return Accept()
    return Accept(additional_contexts=[{"content": [{"type": "text", "text": f"note for {call.call_id}"}],
                                        "source": {"kind": "plugin", "plugin": "notes"}}])


@pytest.fixture
async def rt() -> AsyncIterator[ToolRuntime]:
    async with ToolRuntime() as runtime:
        runtime.register(echo_tool())
        runtime.register(body_tool("finish", _finish))
        runtime.on_post_execute(_note_echo)
        yield runtime


def calls(*specs: tuple[str, str, str]) -> list[ToolCallRequest]:
    return [ToolCallRequest(*spec) for spec in specs]


def log_of(agent: Agent) -> list[tuple[str, Any]]:
    """(type, the datum that identifies it) per event."""
    keys = {"tool/call": "call_id", "tool/result": "call_id", "turn/start": "turn", "turn/end": "reason",
            "user/message": "call_id"}
    return [(event.type, event.data.get(keys.get(event.type, ""))) for event in agent.events]


async def test_contexts_become_user_messages_after_the_steps_results(rt: ToolRuntime) -> None:
    """It appends each context as a user/message after the step's tool/result events, in model order."""
    agent = Agent("a")
    turn = Turn(rt, agent)
    turn.user_message("hello")
    with anyio.fail_after(10):
        step = await turn.run(calls(("c1", "echo", '{"text": "a"}'), ("c2", "echo", '{"text": "b"}')))
    assert [message.content[0]["text"] for message in step.messages] == ["note for c1", "note for c2"]
    assert [message.call_id for message in step.messages] == ["c1", "c2"]
    assert log_of(agent) == [
        ("turn/start", 1), ("user/message", None),
        ("tool/call", "c1"), ("tool/call", "c2"), ("tool/result", "c1"), ("tool/result", "c2"),
        ("user/message", "c1"), ("user/message", "c2"),
    ]
    delivered = agent.events[-1].data
    assert delivered["source"] == {"kind": "plugin", "plugin": "notes"}
    assert agent.events[1].data["source"] == {"kind": "user"}
    assert (step.concludes_turn, turn.over) == (False, False)


async def test_a_concluding_result_ends_the_turn(rt: ToolRuntime) -> None:
    """It ends the turn after the step whose result concludes it, and refuses another step."""
    agent = Agent("a")
    turn = Turn(rt, agent)
    turn.user_message("wrap up")
    step = await turn.run(calls(("c1", "finish", "{}"), ("c2", "echo", '{"text": "x"}')))
    assert (step.concludes_turn, turn.over, turn.concluded) == (True, True, True)
    assert [result.is_error for result in step.results] == [False, False]  # the batch still ran
    assert log_of(agent)[-2:] == [("user/message", "c2"), ("turn/end", "concluded")]
    with pytest.raises(TurnOverError, match=r"the turn is over \(concluded\)") as caught:
        await turn.run(calls(("c3", "echo", '{"text": "y"}')))
    assert caught.value.code == "TURN_OVER"


async def test_a_failed_call_never_ends_the_turn(rt: ToolRuntime) -> None:
    """It keeps the turn open when the concluding tool failed."""
    turn = Turn(rt, Agent("a"))
    step = await turn.run(calls(("c1", "finish", '{"fail": true}')))
    assert (step.results[0].is_error, step.concludes_turn, turn.over) == (True, False, False)


async def test_turns_are_numbered_and_ended_by_the_loop(rt: ToolRuntime) -> None:
    """It numbers each agent's turns from the log and logs the loop's own end reason once."""
    agent = Agent("a")
    first = Turn(rt, agent)
    first.user_message("one")
    first.end()
    first.end("ignored")
    second = Turn(rt, agent)
    second.user_message([{"type": "text", "text": "two"}])
    second.end("step-limit")
    assert [(e.type, dict(e.data)) for e in agent.events if e.type.startswith("turn/")] == [
        ("turn/start", {"turn": 1}), ("turn/end", {"turn": 1, "reason": "completed"}),
        ("turn/start", {"turn": 2}), ("turn/end", {"turn": 2, "reason": "step-limit"})]
    assert repr(second) == "<Turn 2 of 'a': over, 0 step(s)>"


async def test_a_cancelled_step_ends_the_turn_as_cancelled(rt: ToolRuntime) -> None:
    """It ends the turn as cancelled when the turn's signal fired; unstarted calls are paired as aborted."""
    source = CancelSource()
    source.cancel("user pressed stop")
    turn = Turn(rt, Agent("a"), cancel=source.signal)
    step = await turn.run(calls(("c1", "echo", '{"text": "x"}')))
    assert step.results[0].code == "ABORTED_BEFORE_DISPATCH"
    assert (turn.over, turn.end_reason) == (True, "cancelled")


async def test_a_user_message_tells_the_listeners_and_contexts_do_not(rt: ToolRuntime) -> None:
    """It notifies on_user_message listeners for the user's words only, scoped ones for their agents."""
    heard: list[str] = []
    team = Scope("team")
    mine, other = Agent("mine", team), Agent("other")
    rt.on_user_message(lambda agent: heard.append(f"all:{agent.name}"))
    rt.on_user_message(lambda agent: heard.append(f"team:{agent.name}"), scope=team)
    turn = Turn(rt, mine)
    turn.user_message("hi")
    await turn.run(calls(("c1", "echo", '{"text": "x"}')))  # delivers a context: no notification
    Turn(rt, other).user_message("hi")
    assert heard == ["all:mine", "team:mine", "all:other"]


async def test_a_failing_user_message_listener_is_contained(rt: ToolRuntime,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    """It logs a listener's failure and still tells the others."""
    heard: list[str] = []

    def broken(agent: Scope) -> None:
        raise RuntimeError("listener broke")

    rt.on_user_message(broken)
    rt.on_user_message(lambda agent: heard.append(agent.name))
    with caplog.at_level(logging.ERROR, logger="runtime"):
        rt.note_user_message(Agent("a"))
    assert heard == ["a"]
    assert any("on_user_message listener failed" in record.getMessage() for record in caplog.records)
    with pytest.raises(TypeError, match="needs the agent's Scope"):
        rt.note_user_message("a")  # type: ignore[arg-type]


async def test_deliver_results_works_with_a_loop_of_ones_own(rt: ToolRuntime) -> None:
    """It delivers the results of execute_tool_calls; a plain scope gets messages but no events."""
    requests = calls(("c1", "echo", '{"text": "a"}'), ("c2", "finish", "{}"))
    results = await rt.execute_tool_calls(requests, agent=Scope("plain"))
    step = deliver_results(Scope("plain"), requests, results)
    assert isinstance(step, Step)
    assert (len(step.messages), step.concludes_turn, step.calls) == (1, True, tuple(requests))
    with pytest.raises(ValueError, match="one result per call"):
        deliver_results(None, requests, results[:1])


@pytest.mark.parametrize(
    ("context", "content", "source"),
    [
        ({"content": [{"type": "text", "text": "t"}], "source": {"kind": "plugin", "plugin": "p"}},
         [{"type": "text", "text": "t"}], {"kind": "plugin", "plugin": "p"}),
        ({"content": "plain words"}, [{"type": "text", "text": "plain words"}], {"kind": "plugin"}),
        ({"content": [{"type": "text", "text": "t"}, 7, {"no": "type"}], "source": "who"},
         [{"type": "text", "text": "t"}, {"type": "text", "text": "7"},
          {"type": "text", "text": '{"no":"type"}'}],
         {"kind": "plugin"}),
        ({"text": "not a context"}, [{"type": "text", "text": '{"text":"not a context"}'}],
         {"kind": "plugin"}),
        ({"content": {"a": 1}}, [{"type": "text", "text": '{"a":1}'}], {"kind": "plugin"}),
    ],
)
def test_malformed_contexts_are_repaired_not_lost(context: Any, content: Any, source: Any) -> None:
    """It keeps every context's information, repairing content and source to the message shape."""
    message = UserMessage.from_context(context, "c1")
    assert (message.content, message.source, message.call_id) == (content, source, "c1")
    assert message.from_user is False


async def test_a_user_message_must_be_text_or_blocks(rt: ToolRuntime) -> None:
    """It refuses a user message that is neither a string nor content blocks, logging nothing."""
    agent = Agent("a")
    with pytest.raises(TypeError, match="a string or a list of content blocks"):
        Turn(rt, agent).user_message([{"text": "no type"}])
    with pytest.raises(TypeError, match=r"Turn needs a codemode\.runtime\.Agent"):
        Turn(rt, Scope("s"))  # type: ignore[arg-type]
    assert len(agent.events) == 0
