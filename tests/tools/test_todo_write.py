"""The ``todo_write`` tool and the ``latest_todos`` projection."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codemode.runtime._runtime import ToolRuntime
from codemode.runtime.events import EventLog
from codemode.runtime.scope import Agent, Scope
from codemode.tools.todo_write import latest_todos, todo_write_tool

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=[False, True], ids=["single", "parallel"])
def allow_parallel(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


@pytest.fixture
async def rt(allow_parallel: bool) -> AsyncIterator[ToolRuntime]:
    async with ToolRuntime() as runtime:
        runtime.register(todo_write_tool(allow_parallel_in_progress=allow_parallel))
        yield runtime


@pytest.fixture
def agent() -> Agent:
    return Agent("planner")


def _todos(*items: tuple[str, str]) -> dict[str, Any]:
    return {"todos": [{"content": content, "status": status} for content, status in items]}


async def test_write_returns_the_list_counts_and_content(rt: ToolRuntime, agent: Agent) -> None:
    """It returns the trimmed list with counts, renders the summary and logs a todo/write event."""
    with anyio.fail_after(5):
        result = await rt.execute("todo_write", _todos(("  plan  ", "completed"), ("build", "in_progress"),
                                                       ("test", "pending"), ("ship", "pending")), agent=agent)
    assert not result.is_error
    assert result.value["counts"] == {"pending": 2, "in_progress": 1, "completed": 1}
    assert result.value["todos"][0] == {"content": "plan", "status": "completed"}
    assert result.text == "Updated todo list: 2 pending, 1 in progress, 1 completed."
    events = agent.events.of_type("todo/write")
    assert len(events) == 1
    assert events[0].data["todos"][0]["content"] == "plan"
    assert latest_todos(agent.events) == [
        {"content": "plan", "status": "completed"}, {"content": "build", "status": "in_progress"},
        {"content": "test", "status": "pending"}, {"content": "ship", "status": "pending"}]


@pytest.mark.parametrize(("items", "message"), [
    ((("   ", "pending"),), "invalid todo: `content` must be a non-empty string"),
    ((("a", "pending"), (" a ", "completed")), 'invalid todos: duplicate content "a"'),
])
async def test_invalid_lists_fail_with_the_spec_messages(rt: ToolRuntime, agent: Agent,
                                                         items: tuple[tuple[str, str], ...],
                                                         message: str) -> None:
    """It rejects empty and duplicate contents with INVALID_ARGS and logs nothing."""
    with anyio.fail_after(5):
        result = await rt.execute("todo_write", _todos(*items), agent=agent)
    assert result.code == "INVALID_ARGS"
    assert result.error is not None and result.error.message == message
    assert agent.events.of_type("todo/write") == ()


async def test_parallel_in_progress_follows_the_flag(rt: ToolRuntime, agent: Agent,
                                                     allow_parallel: bool) -> None:
    """It allows several in_progress items only with allow_parallel_in_progress=True."""
    with anyio.fail_after(5):
        result = await rt.execute("todo_write", _todos(("a", "in_progress"), ("b", "in_progress"),
                                                       ("c", "in_progress")), agent=agent)
    if allow_parallel:
        assert not result.is_error
        assert result.value["counts"]["in_progress"] == 3
    else:
        assert result.code == "INVALID_ARGS"
        assert result.error is not None
        assert result.error.message == "invalid todos: at most one task may be in_progress (got 3)"


@pytest.mark.parametrize("owner", [None, Scope("not-an-agent")], ids=["no-agent", "plain-scope"])
async def test_write_requires_an_owning_agent(rt: ToolRuntime, owner: Scope | None) -> None:
    """It fails with TOOL_FAILED when the call has no agent session to log into."""
    with anyio.fail_after(5):
        result = await rt.execute("todo_write", _todos(("a", "pending")), agent=owner)
    assert result.code == "TOOL_FAILED"
    assert result.error is not None and result.error.message == "todo_write requires an owning agent session"


async def test_validation_wins_over_the_missing_agent(rt: ToolRuntime) -> None:
    """It reports a bad list before complaining about the missing agent."""
    with anyio.fail_after(5):
        result = await rt.execute("todo_write", _todos(("", "pending")))
    assert result.code == "INVALID_ARGS"


@pytest.mark.parametrize("arguments", [
    {"todos": [{"content": "a", "status": "pending", "id": 1}]},
    {"todos": [{"content": "a", "status": "done"}]},
    {"todos": [{"content": "a"}]},
    {"todos": "a, b"},
    {},
])
async def test_argument_validation_rejects_bad_shapes(rt: ToolRuntime, agent: Agent,
                                                      arguments: dict[str, Any]) -> None:
    """It rejects extra item keys, unknown statuses, missing fields and non-lists before the body runs."""
    with anyio.fail_after(5):
        result = await rt.execute("todo_write", arguments, agent=agent)
    assert result.code == "INVALID_ARGS"
    assert agent.events.of_type("todo/write") == ()


async def test_empty_list_is_a_valid_snapshot(rt: ToolRuntime, agent: Agent) -> None:
    """It accepts an empty list, which clears the plan."""
    with anyio.fail_after(5):
        await rt.execute("todo_write", _todos(("a", "pending")), agent=agent)
        result = await rt.execute("todo_write", {"todos": []}, agent=agent)
    assert result.value["counts"] == {"pending": 0, "in_progress": 0, "completed": 0}
    assert latest_todos(agent.events) == []


async def test_the_tool_is_exclusive_and_has_no_timeout(rt: ToolRuntime) -> None:
    """It declares no concurrency classifier and no timeout."""
    assert rt.execution_mode("todo_write", _todos(("a", "pending"))) == "exclusive"
    definition = rt.get("todo_write")
    assert definition is not None and definition.timeout_ms is None
    assert definition.present_call is not None
    card = definition.present_call(_todos(("a", "pending")))
    assert card == {"title": "Update todo list", "kind": "other",
                    "raw_input": [{"content": "a", "status": "pending"}]}


def test_description_depends_on_the_flag() -> None:
    """It tells the model how many tasks may be in progress, per the flag."""
    single = todo_write_tool(allow_parallel_in_progress=False).description
    parallel = todo_write_tool(allow_parallel_in_progress=True).description
    assert "never more than one" in single
    assert "several at once" in parallel
    assert single != parallel


@pytest.mark.parametrize("flag", [None, 1, "yes"])
def test_the_flag_is_required_and_boolean(flag: Any) -> None:
    """It refuses a flag that is not a real bool."""
    with pytest.raises(TypeError, match="must be True or False"):
        todo_write_tool(allow_parallel_in_progress=flag)


def test_latest_todos_replays_last_write_and_resets_on_turn_start() -> None:
    """It returns None before any write, the latest write after, and None again after turn/start."""
    log = EventLog()
    assert latest_todos(log) is None
    log.append("todo/write", {"todos": [{"content": "a", "status": "pending"}]})
    log.append("tool/call", {"call_id": "x", "name": "n", "arguments": ""})
    log.append("todo/write", {"todos": [{"content": "b", "status": "completed"}]})
    assert latest_todos(log) == [{"content": "b", "status": "completed"}]
    log.append("turn/end", {})
    assert latest_todos(log) == [{"content": "b", "status": "completed"}]
    log.append("turn/start", {})
    assert latest_todos(log) is None
    copy = latest_todos(log.events[:3])
    assert copy == [{"content": "b", "status": "completed"}]
    copy[0]["status"] = "pending"  # a detached copy: the log is untouched
    assert latest_todos(log.events[:3]) == [{"content": "b", "status": "completed"}]


_items = st.lists(st.tuples(st.text(alphabet="abc ", min_size=1, max_size=4),
                            st.sampled_from(["pending", "in_progress", "completed"])), max_size=5)


@settings(max_examples=30, deadline=None)
@given(batches=st.lists(_items, min_size=1, max_size=4))
def test_latest_todos_equals_the_last_accepted_write(batches: list[list[tuple[str, str]]]) -> None:
    """It replays, from the event log alone, exactly the list the last accepted write returned."""

    async def scenario() -> None:
        agent = Agent("a")
        last: Any = None
        async with ToolRuntime() as runtime:
            runtime.register(todo_write_tool(allow_parallel_in_progress=True))
            for batch in batches:
                result = await runtime.execute("todo_write", _todos(*batch), agent=agent)
                if not result.is_error:
                    last = [dict(item) for item in result.value["todos"]]
        replayed = latest_todos(EventLog.from_jsonl(agent.events.to_jsonl()))
        assert replayed == last

    anyio.run(scenario)
