"""The repeat-call reminder: thresholds, keys, chains, resets and configuration."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codemode.runtime._runtime import ToolRuntime
from codemode.runtime.definitions import ToolOutput, define_tool
from codemode.runtime.errors import ConfigError
from codemode.runtime.hooks import Block, Deny
from codemode.runtime.results import ToolResult
from codemode.runtime.scheduler import ToolCallRequest
from codemode.runtime.scope import Agent
from codemode.runtime.turn import Turn
from codemode.tools.repeat_reminder import PLUGIN_NAME, install_repeat_reminder

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _echo(name: str) -> Any:
    async def execute(args: Any, ctx: Any) -> Any:
        return {"ok": True}

    return define_tool(name=name, description=f"{name} test tool", parameters={},
                       output=ToolOutput(schema={"type": "object"},
                                         render=lambda a, v: [{"type": "text", "text": "ok"}]),
                       execute=execute)


@pytest.fixture
async def rt() -> AsyncIterator[ToolRuntime]:
    async with ToolRuntime() as runtime:
        for name in ("read", "grep", "web_fetch", "web_search"):
            runtime.register(_echo(name))
        yield runtime


@pytest.fixture
def agent() -> Agent:
    return Agent("looper")


def _reminders(result: ToolResult) -> list[dict[str, Any]]:
    return [c for c in result.additional_contexts if c.get("source", {}).get("plugin") == PLUGIN_NAME]


async def _call(rt: ToolRuntime, agent: Agent | None, name: str = "read", args: Any = None,
                **identity: Any) -> list[dict[str, Any]]:
    with anyio.fail_after(5):
        result = await rt.execute(name, {"path": "a.txt"} if args is None else args, agent=agent, **identity)
    return _reminders(result)


async def test_thresholds_fire_exactly_at_3_5_8(rt: ToolRuntime, agent: Agent) -> None:
    """It adds a reminder on the 3rd, 5th and 8th identical call and on no other."""
    install_repeat_reminder(rt)
    fired = [n for n in range(1, 13) if await _call(rt, agent)]
    assert fired == [3, 5, 8]


async def test_first_reminder_is_gentle_later_ones_are_detailed(rt: ToolRuntime, agent: Agent) -> None:
    """It words the first threshold generally and lists tool, count and arguments afterwards."""
    install_repeat_reminder(rt)
    contexts = [await _call(rt, agent) for _ in range(5)]
    gentle, detailed = contexts[2][0], contexts[4][0]
    assert "3 times in a row" in gentle["content"][0]["text"]
    assert "consecutive_calls" not in gentle["content"][0]["text"]
    text = detailed["content"][0]["text"]
    assert "tool: read" in text and "consecutive_calls: 5" in text and 'arguments: {"path":"a.txt"}' in text
    assert detailed["source"] == {"kind": "plugin", "plugin": PLUGIN_NAME, "form": "notice",
                                  "summary": "read × 5"}


async def test_key_ignores_argument_key_order(rt: ToolRuntime, agent: Agent) -> None:
    """It treats arguments that differ only in key order (at any depth) as the same call."""
    install_repeat_reminder(rt)
    variants = [{"a": 1, "b": {"x": 1, "y": [1, 2]}}, {"b": {"y": [1, 2], "x": 1}, "a": 1},
                {"b": {"x": 1, "y": [1, 2]}, "a": 1}]
    fired = [bool(await _call(rt, agent, args=v)) for v in variants]
    assert fired == [False, False, True]


async def test_array_order_and_tool_name_matter(rt: ToolRuntime, agent: Agent) -> None:
    """It treats a different array order or another tool as a different call (the chain restarts)."""
    reminder = install_repeat_reminder(rt)
    await _call(rt, agent, args={"v": [1, 2]})
    await _call(rt, agent, args={"v": [1, 2]})
    await _call(rt, agent, args={"v": [2, 1]})
    assert reminder.count(agent) == 1
    await _call(rt, agent, "grep", args={"v": [2, 1]})
    assert reminder.count(agent) == 1


async def test_untracked_calls_neither_count_nor_reset(rt: ToolRuntime, agent: Agent) -> None:
    """It lets an excluded call pass without touching the chain."""
    install_repeat_reminder(rt, exclude=("web_*",))
    await _call(rt, agent)
    await _call(rt, agent)
    assert await _call(rt, agent, "web_fetch") == []
    assert await _call(rt, agent) != []  # still the third identical tracked call


async def test_include_patterns_are_anchored_wildcards(rt: ToolRuntime, agent: Agent) -> None:
    """It tracks only names matching an include pattern, ``*`` being the only wildcard."""
    reminder = install_repeat_reminder(rt, include=("web_*",))
    assert reminder.tracks("web_fetch") and reminder.tracks("web_search")
    assert not reminder.tracks("read") and not reminder.tracks("my_web_fetch")
    literal = install_repeat_reminder(rt, include=("a.c",))
    assert literal.tracks("a.c") and not literal.tracks("abc")


async def test_denied_calls_count(rt: ToolRuntime, agent: Agent) -> None:
    """It counts calls that a pre-execute policy denied (counting happens in post-execute)."""
    async def deny(call: Any, call_next: Callable[[], Awaitable[Any]]) -> Any:
        return Deny("not now")

    rt.on_pre_execute(deny)
    install_repeat_reminder(rt)
    fired = [bool(await _call(rt, agent)) for _ in range(3)]
    assert fired == [False, False, True]


async def test_reminder_rides_on_a_downstream_block(rt: ToolRuntime, agent: Agent) -> None:
    """It prepends its context to a Block decision too, never replacing the block."""
    install_repeat_reminder(rt, thresholds=(2,))

    async def block(call: Any, result: Any, call_next: Callable[[], Awaitable[Any]]) -> Any:
        return Block("blocked by policy", additional_contexts=({"content": [], "source": {"kind": "x"}},))

    rt.on_post_execute(block)
    await _call(rt, agent)
    with anyio.fail_after(5):
        result = await rt.execute("read", {"path": "a.txt"}, agent=agent)
    assert result.is_error and result.code == "DENIED"
    assert [c["source"].get("plugin") for c in result.additional_contexts] == [PLUGIN_NAME, None]


async def test_user_message_resets_the_chain(rt: ToolRuntime, agent: Agent) -> None:
    """It starts counting from zero after ``note_user_message`` (alias ``reset``)."""
    reminder = install_repeat_reminder(rt)
    await _call(rt, agent)
    await _call(rt, agent)
    reminder.note_user_message(agent)
    assert reminder.count(agent) == 0
    assert [bool(await _call(rt, agent)) for _ in range(3)] == [False, False, True]
    reminder.reset(agent)
    assert reminder.count(agent) == 0


async def test_a_turns_user_message_resets_the_chain_and_its_reminders_do_not(rt: ToolRuntime,
                                                                              agent: Agent) -> None:
    """It resets on the user's words (Turn.user_message, rt.note_user_message), never on the contexts a
    turn delivers as user messages (its own reminders included), and stops listening once uninstalled."""
    reminder = install_repeat_reminder(rt)
    turn = Turn(rt, agent)
    turn.user_message("read it")
    step = None
    for n in range(3):
        step = await turn.run([ToolCallRequest(f"c{n}", "read", '{"path": "a.txt"}')])
    assert step is not None and [m.source["plugin"] for m in step.messages] == [PLUGIN_NAME]
    assert reminder.count(agent) == 3  # the delivered reminder reset nothing
    Turn(rt, agent).user_message("try something else")
    assert reminder.count(agent) == 0
    await _call(rt, agent)
    reminder()
    rt.note_user_message(agent)
    assert reminder.count(agent) == 1


async def test_chains_are_per_agent_and_calls_without_agent_are_ignored(rt: ToolRuntime) -> None:
    """It keeps one chain per agent and ignores calls that have none."""
    reminder = install_repeat_reminder(rt)
    first, second = Agent("one"), Agent("two")
    await _call(rt, first)
    await _call(rt, second)
    await _call(rt, None)
    await _call(rt, first)
    assert reminder.count(first) == 2 and reminder.count(second) == 1


async def test_run_code_children_have_their_own_chain(rt: ToolRuntime, agent: Agent) -> None:
    """It keys child calls (with a parent token) apart from model-level calls (spec 13.10)."""
    reminder = install_repeat_reminder(rt)
    parent = rt.stages.create("run_code", {}, call_id="run-1", agent=agent).token
    await _call(rt, agent)
    await _call(rt, agent)
    for n in range(1, 5):  # identical child calls in between neither reset nor join the native chain
        await _call(rt, agent, parent=parent, call_id=f"run-1:code:{n}", root_call_id="run-1")
    assert reminder.count(agent, nested=True) == 4
    assert reminder.count(agent) == 2
    assert await _call(rt, agent) != []  # the third native call still fires the first threshold


async def test_uninstall_stops_counting(rt: ToolRuntime, agent: Agent) -> None:
    """It stops observing once the returned reminder is called (idempotently)."""
    reminder = install_repeat_reminder(rt)
    await _call(rt, agent)
    reminder()
    reminder()
    await _call(rt, agent)
    await _call(rt, agent)
    assert reminder.count(agent) == 1


async def test_arguments_preview_is_truncated(rt: ToolRuntime, agent: Agent) -> None:
    """It head-truncates the canonical arguments with a count of the omitted characters."""
    install_repeat_reminder(rt, thresholds=(2, 3), arguments_preview_chars=10)
    args = {"path": "x" * 40}
    await _call(rt, agent, args=args)
    await _call(rt, agent, args=args)
    detailed = await _call(rt, agent, args=args)
    canonical = '{"path":"' + "x" * 40 + '"}'
    expected = f"arguments: {canonical[:10]}… (+{len(canonical) - 10} more chars)"
    assert expected in detailed[0]["content"][0]["text"]


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"thresholds": []}, "thresholds must not be empty"),
    ({"thresholds": [1, 3]}, r"thresholds\[0\] must be an integer >= 2, not 1"),
    ({"thresholds": [3, 3]}, r"thresholds\[1\] repeats 3"),
    ({"thresholds": [True, 4]}, r"thresholds\[0\] must be an integer >= 2, not True"),
    ({"thresholds": [2.5]}, r"thresholds\[0\] must be an integer"),
    ({"thresholds": "358"}, "thresholds must be a sequence of integers"),
    ({"include": "read"}, "include must be a sequence of name patterns"),
    ({"exclude": [""]}, r"exclude\[0\] must be a non-empty string pattern"),
    ({"arguments_preview_chars": 0}, "arguments_preview_chars must be an integer >= 1"),
])
async def test_invalid_configuration_is_refused(rt: ToolRuntime, kwargs: dict[str, Any],
                                                message: str) -> None:
    """It refuses a bad configuration with a ConfigError naming the problem."""
    with pytest.raises(ConfigError, match=message):
        install_repeat_reminder(rt, **kwargs)


async def test_every_problem_is_reported_at_once(rt: ToolRuntime) -> None:
    """It lists all configuration problems in one error."""
    with pytest.raises(ConfigError) as caught:
        install_repeat_reminder(rt, thresholds=[1], exclude=[3], arguments_preview_chars=-1)
    assert str(caught.value).count(";") == 2


async def test_thresholds_are_sorted(rt: ToolRuntime, agent: Agent) -> None:
    """It accepts thresholds in any order and treats the lowest as the first."""
    reminder = install_repeat_reminder(rt, thresholds=[4, 2])
    assert reminder.thresholds == (2, 4)
    contexts = [await _call(rt, agent) for _ in range(4)]
    assert "2 times in a row" in contexts[1][0]["content"][0]["text"]
    assert "consecutive_calls: 4" in contexts[3][0]["content"][0]["text"]


@settings(max_examples=40, deadline=None)
@given(sequence=st.lists(st.sampled_from(["a", "b", "x"]), max_size=14),
       thresholds=st.lists(st.integers(min_value=2, max_value=6), min_size=1, max_size=3, unique=True))
def test_reminders_fire_exactly_when_a_run_reaches_a_threshold(sequence: list[str],
                                                               thresholds: list[int]) -> None:
    """It fires iff the current run of identical tracked calls has a threshold length (x untracked)."""
    reminder = install_repeat_reminder(ToolRuntime(), thresholds=thresholds, exclude=("x",),
                                       arguments_preview_chars=50)
    agent = Agent("p")
    last, run = None, 0
    for name in sequence:
        fired = reminder.observe(agent, name, {"k": 1}, nested=False) is not None
        if name == "x":
            assert not fired
            continue
        run = run + 1 if name == last else 1
        last = name
        assert fired == (run in thresholds)

