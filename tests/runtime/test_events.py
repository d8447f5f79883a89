"""The event log: append-only, lossless, JSON-lines round trip, replayable projection."""

from __future__ import annotations

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codemode.runtime import Agent, EventLog, EventLogError, ToolResult, ToolRuntime, project_tool_history

from .helpers import echo_tool

pytestmark = pytest.mark.anyio


def test_append_numbers_and_freezes() -> None:
    """It numbers events from 1 and freezes their data."""
    log = EventLog()
    first = log.append("todo/write", {"todos": [{"content": "a"}]})
    second = log.append("todo/write", {"todos": []})
    assert (first.seq, second.seq, len(log)) == (1, 2, 2)
    with pytest.raises(TypeError):
        first.data["todos"].append(1)


@pytest.mark.parametrize(("type_", "data"), [("", {}), ("x", []), ("x", {"n": float("nan")})])
def test_append_rejects_bad_events(type_: str, data: object) -> None:
    """It refuses empty types, non-object data and lossy data."""
    with pytest.raises(EventLogError):
        EventLog().append(type_, data)  # type: ignore[arg-type]


@pytest.mark.parametrize("text", [
    "not json\n",
    '{"seq": 2, "type": "x", "data": {}}\n',
    '{"seq": 1, "type": "x"}\n',
    '{"seq": 1, "type": 3, "data": {}}\n',
])
def test_import_rejects_malformed_exports(text: str) -> None:
    """It reports a malformed export line instead of guessing."""
    with pytest.raises(EventLogError):
        EventLog.from_jsonl(text)


def test_projection_rejects_dangling_and_double_results() -> None:
    """It refuses results that link to no call, or settle one call twice."""
    log = EventLog()
    call = log.append_tool_call("c1", "echo", "{}")
    result = ToolResult.failure("X", "y")
    log.append_tool_result(call, result)
    log.append_tool_result(call, result)
    with pytest.raises(EventLogError, match="more than one"):
        project_tool_history(log)
    dangling = EventLog()
    dangling.append("tool/result", {"call_seq": 9})
    with pytest.raises(EventLogError, match="unknown tool/call"):
        project_tool_history(dangling)


async def test_replay_rebuilds_the_same_projection() -> None:
    """It rebuilds an identical tool history from the JSON-lines export of a live session."""
    rt = ToolRuntime()
    rt.register(echo_tool())
    agent = Agent("a")
    with anyio.fail_after(5):
        for index, args_text in enumerate(['{"text": "one"}', '{"text": 2}', '{"text": "three"}']):
            call = agent.events.append_tool_call(f"c{index}", "echo", args_text)
            result = await rt.execute("echo", __import__("json").loads(args_text), call_id=f"c{index}",
                                      agent=agent)
            agent.events.append_tool_result(call, result)
    agent.events.append_tool_call("c9", "echo", "{}")  # a call that never settled
    live = project_tool_history(agent.events)
    replayed_log = EventLog.from_jsonl(agent.events.to_jsonl())
    assert project_tool_history(replayed_log) == live
    assert replayed_log.to_jsonl() == agent.events.to_jsonl()
    assert [(x.call_id, x.settled, x.is_error, x.error_code) for x in live] == [
        ("c0", True, False, None), ("c1", True, True, "INVALID_ARGS"), ("c2", True, False, None),
        ("c9", False, False, None)]
    assert live[0].content == [{"type": "text", "text": "one"}]


json_data = st.dictionaries(st.text(max_size=5), st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5)
    | st.floats(allow_nan=False, allow_infinity=False).filter(lambda f: not (f == 0 and str(f)[0] == "-")),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=3), c, max_size=3), max_leaves=10),
    max_size=4)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["todo/write", "tool/code-dispatch"]), json_data), max_size=6))
def test_jsonl_round_trip_is_lossless(events: list[tuple[str, dict[str, object]]]) -> None:
    """It re-imports any export to an equal log."""
    log = EventLog()
    for type_, data in events:
        log.append(type_, data)
    again = EventLog.from_jsonl(log.to_jsonl())
    assert [(e.seq, e.type, e.data) for e in again] == [(e.seq, e.type, e.data) for e in log]


def test_on_append_listeners_see_each_event_until_removed() -> None:
    """A listener sees every event appended after it was added, in order, until its remover is called
    (which may be called again without effect)."""
    log = EventLog()
    log.append("a/before", {})
    seen: list[tuple[int, str]] = []
    remove = log.on_append(lambda event: seen.append((event.seq, event.type)))
    log.append("b/one", {"x": 1})
    log.append_tool_call("c-1", "echo", "{}")
    remove()
    remove()
    log.append("d/after", {})
    assert seen == [(2, "b/one"), (3, "tool/call")]
