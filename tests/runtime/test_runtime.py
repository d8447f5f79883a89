"""ToolRuntime construction, lifecycle, prompt sections and tool order."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from codemode.runtime import Agent, ConfigError, PromptError, Scope, ToolRuntime
from codemode.runtime.prompt import UNLISTED_TOOLS, wire_order_key

from .helpers import echo_tool

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(("options", "message"), [
    ({"max_parallel_tool_calls": 0}, "max_parallel_tool_calls must be a positive integer"),
    ({"max_parallel_tool_calls": "3"}, "max_parallel_tool_calls must be a positive integer"),
    ({"approval": object()}, "approval must have an async request"),
    ({"code_runtime": object()}, "code_runtime must provide language"),
])
def test_bad_options_are_config_errors(options: dict[str, Any], message: str) -> None:
    """It validates every option at construction with a specific message."""
    with pytest.raises(ConfigError, match=message):
        ToolRuntime(**options)


async def test_lifecycle_owns_background_tasks_and_contexts() -> None:
    """It runs start_soon tasks in its own task group and closes entered contexts on exit."""
    events: list[str] = []

    async def background() -> None:
        await anyio.sleep(0.01)
        events.append("background done")

    class Resource:
        async def __aenter__(self) -> Resource:
            events.append("enter")
            return self

        async def __aexit__(self, *exc: object) -> None:
            events.append("exit")

    rt = ToolRuntime()
    with pytest.raises(RuntimeError, match="needs the runtime to be entered"):
        rt.start_soon(background)
    with anyio.fail_after(5):
        async with rt:
            await rt.enter_async_context(Resource())
            rt.start_soon(background)
        assert events == ["enter", "background done", "exit"]
    assert rt.closed
    with pytest.raises(RuntimeError, match="entered once"):
        async with rt:
            pass


@pytest.mark.anyio
async def test_a_resource_with_its_own_task_group_can_be_tied_to_the_runtime() -> None:
    """It closes resources that own task groups (entered after the runtime) without a scope-order error."""
    events: list[str] = []

    class Service:
        async def __aenter__(self) -> Service:
            self.group = anyio.create_task_group()
            await self.group.__aenter__()
            self.group.start_soon(anyio.sleep_forever)
            events.append("service up")
            return self

        async def __aexit__(self, *exc: object) -> None:
            self.group.cancel_scope.cancel()
            await self.group.__aexit__(None, None, None)
            events.append("service down")

    async def background() -> None:
        await anyio.sleep(0.01)
        events.append("background done")

    with anyio.fail_after(5):
        async with ToolRuntime() as rt:
            await rt.enter_async_context(Service())
            rt.start_soon(background)
    assert events == ["service up", "background done", "service down"]


def test_sections_sorted_by_order_and_shadowed_by_scope() -> None:
    """It renders sections by order, a scoped section replacing a same-named global one."""
    rt = ToolRuntime()
    agent = Agent("a", Scope("preset"))
    rt.add_section("b", order=20, text="global b")
    rt.add_section("a", order=10, text=lambda scope: f"a for {scope.name if scope else 'everyone'}")
    rt.add_section("b", order=20, text="agent b", scope=agent)
    dispose = rt.add_section("empty", order=5, text="")
    prompt = rt.prompt(agent)
    assert [(s.name, s.text) for s in prompt.sections] == [("empty", ""), ("a", "a for a"), ("b", "agent b")]
    assert prompt.text() == "a for a\n\nagent b"
    assert [s.text for s in rt.prompt().sections][1:] == ["a for everyone", "global b"]
    dispose()
    assert rt.prompt().section("empty") is None
    with pytest.raises(ConfigError):
        rt.add_section("", order=1, text="x")
    with pytest.raises(ConfigError):
        rt.add_section("x", order=1.5, text="x")  # type: ignore[arg-type]


def test_a_section_producing_a_non_string_fails_assembly() -> None:
    """It reports a section callable that does not return text."""
    rt = ToolRuntime()
    rt.add_section("bad", order=1, text=lambda scope: 3)  # type: ignore[arg-type,return-value]
    with pytest.raises(PromptError, match='prompt section "bad" produced int'):
        rt.prompt()


def test_tool_order_and_wire_order() -> None:
    """It orders the wire list by UTF-16 code units, or by tool_order with the unlisted marker."""
    rt = ToolRuntime()
    for name in ("b", "a", "c", "\U0001f600", "\uff5e"):
        rt.register(echo_tool(name))
    assert rt.prompt().tool_names == ("a", "b", "c", "\U0001f600", "\uff5e")
    assert sorted(["\uff5e", "\U0001f600"], key=wire_order_key) == ["\U0001f600", "\uff5e"]
    assert rt.prompt(tool_order=["c", UNLISTED_TOOLS, "a"]).tool_names[::4] == ("c", "a")
    assert rt.prompt(tool_order=["c"]).tool_names[:2] == ("c", "a")
    with pytest.raises(PromptError, match='tool_order lists unregistered tool "zz"; known tools: a, b, c'):
        rt.prompt(tool_order=["zz"])
    with pytest.raises(PromptError, match="not a string"):
        rt.prompt(tool_order="abc")


def test_prompt_tools_are_the_model_facing_projection() -> None:
    """It offers exactly name, description and parameters for each tool."""
    rt = ToolRuntime()
    rt.register(echo_tool())
    (tool,) = rt.prompt().to_json()["tools"]
    assert set(tool) == {"name", "description", "parameters"}
    assert tool["parameters"] == {"type": "object", "properties": {"text": {"type": "string"}},
                                  "required": ["text"]}
