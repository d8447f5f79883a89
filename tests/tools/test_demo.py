"""The demo tools: behaviour, classification, per-runtime state, failures, cancellation."""

from __future__ import annotations

import time
from typing import Any

import anyio
import pytest

from codemode.runtime import CancelSource, ToolResult, ToolRuntime
from codemode.tools.demo import demo_tools

pytestmark = pytest.mark.anyio


def _runtime() -> ToolRuntime:
    rt = ToolRuntime()
    for definition in demo_tools():
        rt.register(definition)
    return rt


async def _call(rt: ToolRuntime, name: str, args: Any, **kw: Any) -> ToolResult:
    with anyio.fail_after(5):
        return await rt.execute(name, args, **kw)


@pytest.mark.parametrize(("name", "args", "value", "text"), [
    ("echo", {"text": "héllo"}, {"text": "héllo"}, "héllo"),
    ("add", {"a": 2, "b": 3.5}, {"sum": 5.5}, "5.5"),
    ("add", {"a": -1, "b": 1}, {"sum": 0}, "0"),
    ("sleep", {"ms": 1}, {"slept_ms": 1}, "slept 1 ms"),
])
async def test_tools_return_their_documented_values(name: str, args: Any, value: Any, text: str) -> None:
    """It returns each tool's documented value and renders it as text."""
    result = await _call(_runtime(), name, args)
    assert (result.value, result.text) == (value, text)


@pytest.mark.parametrize(("name", "mode"), [("echo", "parallel"), ("add", "parallel"), ("sleep", "parallel"),
                                            ("counter_increment", "exclusive"), ("fail", "exclusive")])
def test_concurrency_classification(name: str, mode: str) -> None:
    """It marks echo, add and sleep concurrency-safe and the counter exclusive."""
    args = {"text": "x", "a": 1, "b": 2, "ms": 1, "by": 1, "message": "m"}
    definition = next(d for d in demo_tools() if d.name == name)
    valid = {k: args[k] for k in definition.parameters["properties"]}
    assert _runtime().execution_mode(name, valid) == mode


async def test_counter_state_is_per_runtime() -> None:
    """It keeps one counter per demo_tools() set, starting at 0."""
    first, second = _runtime(), _runtime()
    assert (await _call(first, "counter_increment", {"by": 2})).value == {"value": 2}
    assert (await _call(first, "counter_increment", {})).value == {"value": 3}
    assert (await _call(second, "counter_increment", {"by": -4})).value == {"value": -4}


async def test_fail_always_fails_with_the_message() -> None:
    """It fails with the given message."""
    result = await _call(_runtime(), "fail", {"message": "boom"})
    assert (result.code, result.error.message if result.error else None) == ("TOOL_FAILED", "boom")
    assert result.text == "Error: boom"


@pytest.mark.parametrize(("name", "args"), [("add", {"a": "1", "b": 2}), ("add", {"a": True, "b": 2}),
                                            ("sleep", {"ms": 1.5}), ("echo", {})])
async def test_bad_arguments_are_rejected(name: str, args: Any) -> None:
    """It rejects wrongly typed or missing arguments before the body runs."""
    assert (await _call(_runtime(), name, args)).code == "INVALID_ARGS"


async def test_sleep_bounds_and_cancellation() -> None:
    """It refuses out-of-range sleeps and stops early as ABORTED when cancelled."""
    rt = _runtime()
    assert (await _call(rt, "sleep", {"ms": -1})).code == "TOOL_FAILED"
    source = CancelSource()
    started = time.perf_counter()
    async with anyio.create_task_group() as tg:
        tg.start_soon(_cancel_soon, source)
        result = await _call(rt, "sleep", {"ms": 5000}, cancel=source.signal)
    assert result.code == "ABORTED"
    assert time.perf_counter() - started < 2


async def _cancel_soon(source: CancelSource) -> None:
    await anyio.sleep(0.02)
    source.cancel()


def test_descriptions_are_informative() -> None:
    """It gives every tool a description of at least a sentence."""
    assert all(len(d.description) > 25 for d in demo_tools())
    assert [d.name for d in demo_tools()] == ["echo", "add", "sleep", "counter_increment", "fail"]
