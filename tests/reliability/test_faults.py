"""Faults: each yields a specific error, the runtime serves the next call, the event log stays paired.

One runtime serves the whole module, on a sandbox whose executor can be told to break the protocol
(:mod:`tests.reliability._hostile`), with the timeout policy installed and an approval service whose
behaviour each test chooses. After every fault the same runtime must run an ordinary program exactly
right, and the agent's log must pass :func:`event_log_problems`.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest

from codemode.runtime import (
    Agent,
    ApprovalRequest,
    Ask,
    CancelSource,
    ToolCall,
    ToolOutput,
    ToolRuntime,
    ToolStalledError,
    define_tool,
    text_block,
)
from codemode.runtime.hooks import Allow
from codemode.runtime.scheduler import ToolCallRequest
from codemode.sandbox import Sandbox, SandboxLimits
from codemode.tools.demo import demo_tools
from codemode.tools.run_code import PythonCodeRuntime
from codemode.tools.timeout_policy import install_timeout_policy
from tests.reliability._support import Resources, event_log_problems, settled_leaks, wait_until

pytestmark = pytest.mark.anyio

HOSTILE = "tests.reliability._hostile"
LIMITS = SandboxLimits(wall_seconds=2.0, cpu_seconds=2.0)


@dataclass
class Approvals:
    """An approval service whose answer the test picks: ``allow``, ``raise`` or ``never``.

    ``never`` ignores the request's cancel signal and answers nothing until the test sets ``release``
    (only so that a test can always clean up after asserting what happened in the meantime).
    """

    mode: str = "allow"
    asked: list[str] = field(default_factory=list)
    release: anyio.Event = field(default_factory=anyio.Event)

    async def request(self, request: ApprovalRequest) -> str:
        self.asked.append(request.tool_name)
        if self.mode == "raise":
            raise RuntimeError("the approval backend is down")
        if self.mode == "never":
            await self.release.wait()
            return "rejected"
        return "allowed-once"


@dataclass
class World:
    rt: ToolRuntime
    sandbox: Sandbox
    approvals: Approvals
    settled: list[str]
    killed: list[int]


def _tool(name: str, body: Any, *, timeout_ms: float | None = None) -> Any:
    return define_tool(name=name, description=f"fault-test tool {name}", parameters={},
                       output=ToolOutput(schema={"type": "object"}, render=lambda a, v: [text_block("ok")]),
                       execute=body, timeout_ms=timeout_ms, is_concurrency_safe=lambda args: True)


@pytest.fixture(scope="module")
async def world() -> AsyncIterator[World]:
    approvals = Approvals()
    settled: list[str] = []
    killed: list[int] = []
    sandbox = Sandbox(executor=HOSTILE)

    async def explode(args: Any, ctx: Any) -> Any:
        raise RuntimeError("kaboom: host-side detail")

    async def hang(args: Any, ctx: Any) -> Any:
        try:
            await anyio.sleep_forever()
        finally:
            settled.append("hang")

    async def stubborn(args: Any, ctx: Any) -> Any:
        with anyio.CancelScope(shield=True):
            await anyio.sleep(0.8)
        settled.append("stubborn")
        return {}

    async def gated(args: Any, ctx: Any) -> Any:
        return {"approved": True}

    async def assassinate(args: Any, ctx: Any) -> Any:
        for pid in sandbox.live_worker_pids:  # the running worker and the warm ones
            killed.append(pid)
            os.kill(pid, signal.SIGKILL)
        await anyio.sleep(10)
        return {}

    async def gate(call: ToolCall, call_next: Any) -> Any:
        return Ask("fault test") if call.name == "gated" else Allow()

    async with PythonCodeRuntime(sandbox, limits=LIMITS) as code_runtime, sandbox, \
            ToolRuntime("code", code_runtime=code_runtime, approval=approvals) as rt:
        for definition in demo_tools():
            rt.register(definition)
        rt.register(_tool("explode", explode))
        rt.register(_tool("hang", hang, timeout_ms=300))
        rt.register(_tool("stubborn", stubborn, timeout_ms=150))
        rt.register(_tool("gated", gated))
        rt.register(_tool("assassinate", assassinate))
        rt.on_pre_execute(gate)
        install_timeout_policy(rt, grace_ms=150)
        yield World(rt, sandbox, approvals, settled, killed)


async def run(world: World, agent: Agent, code: str, *, cancel: Any = None, call_id: str = "outer") -> Any:
    arguments = json.dumps({"code": code, "description": "fault test"})
    with anyio.fail_after(20):
        (result,) = await world.rt.execute_tool_calls([ToolCallRequest(call_id, "run_code", arguments)],
                                                      agent=agent, cancel=cancel)
    return result


async def assert_still_serves(world: World, agent: Agent) -> None:
    """The same runtime runs an ordinary program with child calls exactly right, log still paired."""
    result = await run(world, agent, "import asyncio\nr = await asyncio.gather(tools.add(a=2, b=3), "
                                     "tools.echo(text='ok'))\nreturn [r[0]['sum'], r[1]['text']]",
                       call_id="after")
    assert not result.is_error and result.value == {"logs": [], "result": [5, "ok"]}
    assert event_log_problems(agent.events) == []


def _dispatch_errors(agent: Agent) -> dict[str, str | None]:
    """``name -> the error text the model saw`` (None for a success) of every finished child call."""
    ends = [e for e in agent.events if e.type == "tool/code-dispatch"]
    return {e.data["name"]: " ".join(str(b.get("text", "")) for b in e.data["content"]) if e.data["is_error"]
            else None for e in ends}


async def test_a_worker_killed_mid_run_is_a_worker_exit(world: World) -> None:
    """It reports SIGKILL as worker-exit, settles the pending child call and serves the next run."""
    agent = Agent("killed")
    result = await run(world, agent, "await tools.add(a=1, b=1)\nawait tools.assassinate()\nreturn 1")
    assert result.is_error and result.error.code == "CODE_RUN_FAILED"
    assert "code run failed (worker-exit)" in result.error.message and "SIGKILL" in result.error.message
    assert _dispatch_errors(agent)["add"] is None and _dispatch_errors(agent)["assassinate"] is not None
    # a warm worker killed from outside is only known dead once reaped (else the next run gets it)
    assert await wait_until(lambda: not set(world.killed) & set(world.sandbox.live_worker_pids), 5)
    await assert_still_serves(world, agent)


@pytest.mark.parametrize(
    ("marker", "kind", "detail"),
    [
        ("garbage", "protocol", "not UTF-8"),
        ("oversized", "protocol", "exceeds the 16777216-byte frame budget"),
        ("bad-json", "protocol", "NaN"),
        ("unknown-type", "protocol", "unknown frame type 'shell'"),
        ("forged-done", "protocol", "which a worker may not report"),
        ("silent", "timeout", "wall-clock budget of 2 s"),
        ("half-frame", "timeout", "wall-clock budget of 2 s"),
    ],
)
async def test_a_worker_that_breaks_the_protocol_or_goes_silent_is_contained(
        world: World, marker: str, kind: str, detail: str) -> None:
    """It turns garbage, oversized, forged or missing frames into protocol/timeout errors."""
    agent = Agent(marker)
    result = await run(world, agent, f"#{marker}\nreturn 1")
    assert result.is_error and result.error.code == "CODE_RUN_FAILED"
    assert f"code run failed ({kind})" in result.error.message and detail in result.error.message
    await assert_still_serves(world, agent)


async def test_a_tool_that_raises_is_a_tool_failure_the_program_can_catch(world: World) -> None:
    """It hands the program a catchable ToolCallError with TOOL_FAILED naming the tool."""
    agent = Agent("raises")
    code = ("try:\n    await tools.explode()\nexcept ToolCallError as err:\n"
            "    return [err.tool_name, err.code]")
    result = await run(world, agent, code)
    assert not result.is_error and result.value["result"] == ["explode", "TOOL_FAILED"]
    assert _dispatch_errors(agent)["explode"] is not None
    await assert_still_serves(world, agent)


async def test_a_tool_that_hangs_times_out_and_is_cancelled(world: World) -> None:
    """It ends a hanging call at its timeout_ms with TOOL_TIMEOUT and runs the body's cleanup."""
    agent = Agent("hangs")
    code = "try:\n    await tools.hang()\nexcept ToolCallError as err:\n    return err.code"
    result = await run(world, agent, code)
    assert not result.is_error and result.value["result"] == "TOOL_TIMEOUT"
    assert "hang" in world.settled and "timed out after 300ms" in str(_dispatch_errors(agent)["hang"])
    await assert_still_serves(world, agent)


async def test_a_tool_that_ignores_cancellation_is_settled_as_stalled(world: World) -> None:
    """It settles a body that ignores cancellation as TOOL_STALLED after the grace period."""
    agent = Agent("stubborn")
    code = "try:\n    await tools.stubborn()\nexcept ToolCallError as err:\n    return err.code"
    with anyio.fail_after(5):
        result = await run(world, agent, code)
    assert not result.is_error and result.value["result"] == ToolStalledError.code
    assert any(e.type == "tool/stalled" for e in agent.events)
    await assert_still_serves(world, agent)
    assert await wait_until(lambda: "stubborn" in world.settled, 5)  # the adopted body still finishes


async def test_an_approval_service_that_raises_fails_closed(world: World) -> None:
    """It denies the call with POLICY_FAILED when the approval service raises."""
    agent = Agent("approval-raises")
    world.approvals.mode = "raise"
    try:
        code = "try:\n    await tools.gated()\nexcept ToolCallError as err:\n    return err.code"
        result = await run(world, agent, code)
    finally:
        world.approvals.mode = "allow"
    assert not result.is_error and result.value["result"] == "POLICY_FAILED"
    assert world.approvals.asked[-1] == "gated"
    await assert_still_serves(world, agent)


async def test_an_approval_that_never_answers_is_abandoned_at_the_run_deadline(world: World) -> None:
    """It ends the run at its wall budget although the approval service never answers."""
    agent = Agent("approval-never")
    world.approvals.mode = "never"
    outcome: list[Any] = []

    async def call() -> None:
        outcome.append(await world.rt.execute(
            "run_code", {"code": "await tools.gated()\nreturn 1", "description": "x"}, agent=agent))

    try:
        with anyio.fail_after(30):
            async with anyio.create_task_group() as group:
                group.start_soon(call)
                in_time = await wait_until(lambda: bool(outcome), LIMITS.wall_seconds + 3.0)
                world.approvals.release.set()  # always unwind, whatever happened meanwhile
    finally:
        world.approvals.mode = "allow"
        world.approvals.release = anyio.Event()
    assert in_time, "the run outlived its wall budget waiting for the approval"
    result = outcome[0]
    assert result.is_error and "code run failed (timeout)" in result.error.message
    await assert_still_serves(world, agent)


async def test_an_observer_that_raises_changes_nothing(world: World) -> None:
    """It contains a raising result observer: results and the log are as without it."""
    agent = Agent("observer")
    seen: list[str] = []

    def observer(call: ToolCall, result: Any) -> None:
        seen.append(call.name)
        raise RuntimeError("observer bug")

    dispose = world.rt.on_result(observer)
    try:
        result = await run(world, agent, "return (await tools.add(a=20, b=22))['sum']")
    finally:
        dispose()
    assert not result.is_error and result.value["result"] == 42
    assert {"add", "run_code"} <= set(seen)
    await assert_still_serves(world, agent)


async def test_the_host_cancelling_mid_gather_aborts_every_child(world: World) -> None:
    """It aborts the run and every in-flight child call on the caller's cancel, all paired."""
    agent = Agent("cancel")
    source = CancelSource()

    async def cancel_when_started() -> None:
        await wait_until(lambda: sum(1 for e in agent.events if e.type == "tool/code-dispatch-start") >= 5, 8)
        source.cancel("the user pressed stop")

    code = "import asyncio\nawait asyncio.gather(*[tools.sleep(ms=5000) for _ in range(5)])\nreturn 1"
    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            group.start_soon(cancel_when_started)
            result = await run(world, agent, code, cancel=source.signal)
    assert result.is_error and result.error.code in {"ABORTED", "CODE_RUN_FAILED"}
    ends = [e for e in agent.events if e.type == "tool/code-dispatch"]
    assert len(ends) == 5 and all(e.data["is_error"] for e in ends)
    assert event_log_problems(agent.events) == []
    await assert_still_serves(world, agent)


async def _cancel_scope_mid_gather(world: World, agent: Agent) -> None:
    code = "import asyncio\nawait asyncio.gather(*[tools.sleep(ms=5000) for _ in range(3)])\nreturn 1"
    with anyio.fail_after(10):
        with anyio.move_on_after(0.7) as scope:
            await run(world, agent, code)
    assert scope.cancelled_caught


async def test_a_host_scope_cancelled_mid_gather_propagates_and_leaves_the_runtime_usable(
        world: World) -> None:
    """It propagates an anyio cancellation of the caller, settles every child and keeps serving."""
    agent = Agent("scope")
    await _cancel_scope_mid_gather(world, agent)
    starts = [e for e in agent.events if e.type == "tool/code-dispatch-start"]
    ends = [e for e in agent.events if e.type == "tool/code-dispatch"]
    assert len(starts) == 3 and len(ends) == 3 and all(e.data["is_error"] for e in ends)
    result = await world.rt.execute("run_code", {"code": "return 5", "description": "x"}, agent=agent)
    assert result.value == {"logs": [], "result": 5}


async def test_a_host_scope_cancelled_mid_gather_still_pairs_the_model_level_call(world: World) -> None:
    """It commits an aborted tool/result for the model-level call the host tore down."""
    agent = Agent("scope-pairing")
    await _cancel_scope_mid_gather(world, agent)
    assert event_log_problems(agent.events) == []


async def test_faults_leave_no_process_descriptor_or_directory_behind(world: World) -> None:
    """It leaves nothing behind after a killed worker, garbage frames, a silent worker and a cancel."""
    with anyio.fail_after(30):
        await world.sandbox.wait_warm()  # the module's shared sandbox forks nothing during the count
    before = Resources.now()
    with anyio.fail_after(30):
        sandbox = Sandbox(executor=HOSTILE)
        async with PythonCodeRuntime(sandbox, limits=SandboxLimits(wall_seconds=1.0)) as code_runtime, \
                sandbox, ToolRuntime("code", code_runtime=code_runtime) as rt:
            for definition in demo_tools():
                rt.register(definition)
            agent = Agent("leaks")
            template = sandbox.template_pid
            assert template is not None
            for code in ("#garbage\nreturn 1", "#silent\nreturn 1", "#oversized\nreturn 1"):
                result = await rt.execute("run_code", {"code": code, "description": "x"}, agent=agent)
                assert result.is_error
            with anyio.move_on_after(0.5):
                await rt.execute("run_code", {"code": "await tools.sleep(ms=5000)", "description": "x"},
                                 agent=agent)
            killed = set(sandbox.live_worker_pids)
            for pid in killed:
                os.kill(pid, signal.SIGKILL)
            # a warm worker killed from outside is only known dead once the template has reaped it
            assert await wait_until(lambda: not killed & set(sandbox.live_worker_pids), 5)
            result = await rt.execute("run_code", {"code": "return 7", "description": "x"}, agent=agent)
            assert result.value == {"logs": [], "result": 7}
        leaks = await settled_leaks(before, [template])
    assert leaks == {}


async def test_a_warm_worker_that_died_unused_does_not_fail_the_next_run() -> None:
    """It runs the program on another worker when its warm worker was killed before the run."""
    async def no_tools(name: str, args: Any) -> Any:
        return None

    with anyio.fail_after(20):
        async with Sandbox() as sandbox:
            await sandbox.wait_warm()
            killed = sandbox.live_worker_pids
            for pid in killed:
                os.kill(pid, signal.SIGKILL)
            result = await sandbox.run("return 1", tool_names=(), call_tool=no_tools)
    # (every warm worker died: the retry goes to a worker forked after the first death was seen, not
    # to another warm one that may be dying too; under load that used to fail about one run in 20)
    assert result.error is None and result.value == 1 and result.stats.worker_pid not in killed
