"""Registry layers, scope chains, restrict, guards and view resolution."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codemode.runtime import (
    Agent,
    DefinitionError,
    DuplicateToolError,
    ReservedNameError,
    RestrictionError,
    Scope,
    ToolCall,
    ToolRuntime,
)

from .helpers import echo_tool

pytestmark = pytest.mark.anyio


def test_register_get_and_idempotent_disposer() -> None:
    """It registers, resolves and removes a tool; disposing twice is harmless."""
    rt = ToolRuntime()
    tool = echo_tool()
    dispose = rt.register(tool)
    assert rt.get("echo") is tool
    dispose()
    dispose()
    assert rt.get("echo") is None
    rt.register(echo_tool())  # the name is free again


def test_duplicates_rejected_within_a_layer_shadowing_allowed_across() -> None:
    """It rejects a second tool of one name in a layer but lets a scope shadow a global."""
    rt = ToolRuntime()
    agent = Agent("a")
    rt.register(echo_tool())
    with pytest.raises(DuplicateToolError, match='tool "echo" is already registered globally'):
        rt.register(echo_tool())
    scoped = echo_tool(prefix="scoped:")
    rt.register(scoped, scope=agent)
    with pytest.raises(DuplicateToolError, match='tool "echo" is already registered in this scope'):
        rt.register(echo_tool(), scope=agent)
    assert rt.get("echo", agent) is scoped
    assert rt.get("echo") is not scoped


@pytest.mark.parametrize("mode", ["native", "code", "both"])
def test_run_code_is_reserved_in_every_mode(mode: str) -> None:
    """It refuses to register, shadow or restrict run_code whatever the mode."""
    rt = ToolRuntime(mode)
    agent = Agent("a")
    rt.register(echo_tool())
    with pytest.raises(ReservedNameError, match="is reserved"):
        rt.register(echo_tool("run_code"))
    with pytest.raises(ReservedNameError, match="is reserved"):
        rt.register(echo_tool("run_code"), scope=agent)
    for filters in ({"allow": ["run_code"]}, {"deny": ["run_code"]}):
        with pytest.raises(ReservedNameError, match="reserved Code Mode transport"):
            rt.restrict(agent, **filters)


def test_register_rejects_non_definitions() -> None:
    """It raises a clear error for something that is not a ToolDefinition."""
    with pytest.raises(DefinitionError, match="expected a ToolDefinition"):
        ToolRuntime().register({"name": "x"})  # type: ignore[arg-type]


def test_shadowing_keeps_the_original_position() -> None:
    """It lets a shadowing entry replace the value but keep the inherited position."""
    rt = ToolRuntime()
    parent = Scope("preset")
    agent = Agent("a", parent)
    for name in ("a", "b", "c"):
        rt.register(echo_tool(name))
    rt.register(echo_tool("b", prefix="p:"), scope=parent)
    rt.register(echo_tool("z"), scope=agent)
    assert [d.name for d in rt.definitions(agent)] == ["a", "b", "c", "z"]
    assert rt.get("b", agent) is rt.get("b", parent)


def test_restrict_validation_messages() -> None:
    """It needs a scope, a non-empty filter and currently inherited names."""
    rt = ToolRuntime()
    agent = Agent("a")
    rt.register(echo_tool("g"))
    rt.register(echo_tool("own"), scope=agent)
    with pytest.raises(RestrictionError, match="requires a scope"):
        rt.restrict(None, deny=["g"])
    with pytest.raises(RestrictionError, match="is a no-op"):
        rt.restrict(agent)
    with pytest.raises(RestrictionError,
                       match='unknown inherited tool "x"; known inherited tools: g'):
        rt.restrict(agent, deny=["x"])
    with pytest.raises(RestrictionError, match='unknown inherited tools "own", "x"'):
        rt.restrict(agent, allow=["own", "x"])
    with pytest.raises(RestrictionError, match="not a string"):
        rt.restrict(agent, deny="g")


def test_restrict_allow_deny_own_tools_and_later_globals() -> None:
    """It filters inherited tools only; deny admits later globals, allow excludes them."""
    rt = ToolRuntime()
    allow_agent, deny_agent = Agent("allow"), Agent("deny")
    rt.register(echo_tool("a"))
    rt.register(echo_tool("b"))
    rt.register(echo_tool("own"), scope=allow_agent)
    names = ["a"]
    lift = rt.restrict(allow_agent, allow=names)
    names.append("b")  # copied at call time
    rt.restrict(deny_agent, deny=["a"])
    rt.register(echo_tool("later"))
    assert [d.name for d in rt.definitions(allow_agent)] == ["a", "own"]
    assert [d.name for d in rt.definitions(deny_agent)] == ["b", "later"]
    lift()
    assert [d.name for d in rt.definitions(allow_agent)] == ["a", "b", "later", "own"]
    everything = Agent("none")
    rt.restrict(everything, allow=[])
    assert rt.definitions(everything) == ()


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.sets(st.sampled_from("abcdef"))), min_size=1, max_size=4))
def test_restrictions_intersect_along_the_chain(filters: list[tuple[bool, set[str]]]) -> None:
    """It shows exactly the names every restriction on the chain admits."""
    rt = ToolRuntime()
    for name in "abcdef":
        rt.register(echo_tool(name))
    scope: Scope | None = None
    expected = set("abcdef")
    for is_allow, names in filters:
        scope = Scope(f"s{len(expected)}", scope)
        if is_allow:
            rt.restrict(scope, allow=names)
            expected &= names
        else:
            rt.restrict(scope, deny=names)
            expected -= names
    assert {d.name for d in rt.definitions(scope)} == expected


def _call(rt: ToolRuntime, agent: Agent | None = None) -> ToolCall:
    return rt.stages.create("echo", {"text": "x"}, agent=agent).call


@settings(max_examples=50, deadline=None)
@given(st.lists(st.one_of(st.none(), st.text(min_size=1, max_size=3)), max_size=6), st.booleans())
def test_guards_are_monotonic(reasons: list[str | None], scoped: bool) -> None:
    """It denies with the first reason; adding guards can never turn a denial into an allow."""
    rt = ToolRuntime()
    agent = Agent("a")
    rt.register(echo_tool())
    call = _call(rt, agent)
    denied_before = False
    for reason in reasons:
        rt.guard(lambda c, r=reason: r, scope=agent if scoped else None)
        outcome = rt.stages._run_guards(call)
        if denied_before:
            assert outcome is not None
        denied_before = outcome is not None
    first = next((r for r in reasons if r is not None), None)
    assert rt.stages._run_guards(call) == first


def test_guard_order_global_then_chain_farthest_first() -> None:
    """It evaluates global guards, then each layer from the farthest ancestor; first reason wins."""
    rt = ToolRuntime()
    preset = Scope("preset")
    agent = Agent("a", preset)
    order: list[str] = []

    def guard(label: str, reason: str | None = None) -> Any:
        def fn(call: ToolCall) -> str | None:
            order.append(label)
            return reason
        return fn

    rt.guard(guard("agent", "agent says no"), scope=agent)
    rt.guard(guard("preset"), scope=preset)
    rt.guard(guard("global"))
    assert rt.stages._run_guards(_call(rt, agent)) == "agent says no"
    assert order == ["global", "preset", "agent"]
    order.clear()
    assert rt.stages._run_guards(_call(rt)) is None
    assert order == ["global"]


def test_guard_added_during_evaluation_is_seen_in_the_same_pass() -> None:
    """It iterates the live table: a guard registered by an earlier guard runs in the same pass."""
    rt = ToolRuntime()

    def first(call: ToolCall) -> None:
        rt.guard(lambda c: "late guard")

    rt.guard(first)
    assert rt.stages._run_guards(_call(rt)) == "late guard"


def test_guard_replacing_the_last_guard_lands_in_a_fresh_generation() -> None:
    """It only sees a replacement for the removed last guard on the next call."""
    rt = ToolRuntime()
    disposers: list[Any] = []

    def only(call: ToolCall) -> None:
        disposers[0]()
        rt.guard(lambda c: "replacement")

    disposers.append(rt.guard(only))
    assert rt.stages._run_guards(_call(rt)) is None
    assert rt.stages._run_guards(_call(rt)) == "replacement"


async def test_guards_receive_frozen_arguments() -> None:
    """It hands guards the frozen execution: arguments cannot be mutated."""
    rt = ToolRuntime()
    rt.register(echo_tool())
    seen: list[Any] = []

    def guard(call: ToolCall) -> None:
        seen.append(call)
        with pytest.raises(TypeError):
            call.arguments["text"] = "changed"

    rt.guard(guard)
    with anyio.fail_after(5):
        result = await rt.execute("echo", {"text": "same"})
    assert result.value == {"text": "same"}
    assert len(seen) == 1


def test_schemas_follow_the_view_and_are_detached() -> None:
    """It projects the visible set (with scoped tools and restrictions) as detached copies."""
    rt = ToolRuntime()
    agent = Agent("a")
    rt.register(echo_tool("g"))
    rt.register(echo_tool("h"))
    rt.register(echo_tool("own"), scope=agent)
    rt.restrict(agent, deny=["h"])
    schemas = rt.schemas(agent)
    assert [s["name"] for s in schemas] == ["g", "own"]
    schemas[0]["name"] = "mutated"
    assert rt.schemas(agent)[0]["name"] == "g"


def test_change_listeners_see_changes_and_can_veto_additions() -> None:
    """It notifies listeners of every change; a raising listener rolls the addition back."""
    rt = ToolRuntime()
    agent = Agent("a")
    seen: list[int] = []
    dispose_listener = rt.on_change(lambda: seen.append(1))
    dispose = rt.register(echo_tool())
    rt.restrict(agent, deny=["echo"])
    dispose()
    assert len(seen) == 3

    def veto() -> None:
        raise RuntimeError("listener broke")

    rt.on_change(veto)
    with pytest.raises(RuntimeError, match="listener broke"):
        rt.register(echo_tool("vetoed"))
    assert rt.get("vetoed") is None
    dispose_listener()
    with pytest.raises(RuntimeError):
        rt.present_as(agent, "code")
    assert rt.mode_for(agent) == "native"  # the declaration was rolled back
    with pytest.raises(RuntimeError):
        rt.register(echo_tool("vetoed"))
