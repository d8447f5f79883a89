"""Load: 200 run_code calls from 20 concurrent agents, each run with child calls (issue 7).

Every result must be exactly right, every agent's event log paired and ordered, and after the runtime
closes nothing may be left: no descriptor, no process (template, worker or stray), no worker directory.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from codemode.runtime import Agent, ToolRuntime
from codemode.runtime.scheduler import ToolCallRequest
from codemode.sandbox import SandboxLimits
from codemode.tools.demo import demo_tools
from codemode.tools.run_code import PythonCodeRuntime
from tests.reliability._support import Resources, event_log_problems, settled_leaks

pytestmark = pytest.mark.anyio

AGENTS = 20
TURNS = 10
#: A wall budget well above any run's need here, so a run that hangs fails fast instead of at 30 s.
_LIMITS = SandboxLimits(wall_seconds=8.0)

_PROGRAM = """
import asyncio
first = await tools.add(a={agent}, b={turn})
echoed, three = await asyncio.gather(tools.echo(text="agent-{agent}"), tools.add(a=1, b=2))
print("turn", {turn})
return {{"agent": {agent}, "turn": {turn}, "sum": first["sum"], "echo": echoed["text"],
        "three": three["sum"]}}
"""


def _expected(agent: int, turn: int) -> dict[str, Any]:
    return {"agent": agent, "turn": turn, "sum": agent + turn, "echo": f"agent-{agent}", "three": 3}


async def _agent_session(rt: ToolRuntime, index: int, agent: Agent, failures: list[str]) -> None:
    for turn in range(TURNS):
        arguments = {"code": _PROGRAM.format(agent=index, turn=turn), "description": "load test turn"}
        call = ToolCallRequest(f"a{index}-t{turn}", "run_code", json.dumps(arguments))
        (result,) = await rt.execute_tool_calls([call], agent=agent)
        expected = {"logs": [f"turn {turn}"], "result": _expected(index, turn)}
        if result.is_error or result.value != expected:
            failures.append(f"agent {index} turn {turn}: {result.error or result.value}")


async def test_twenty_agents_two_hundred_runs_all_correct_paired_and_leak_free() -> None:
    """It completes 200 runs from 20 concurrent agents exactly right, logs paired, nothing leaked."""
    before = Resources.now()
    agents = [Agent(f"agent-{i}") for i in range(AGENTS)]
    failures: list[str] = []
    with anyio.fail_after(55):
        async with PythonCodeRuntime(limits=_LIMITS) as code_runtime, \
                ToolRuntime("code", code_runtime=code_runtime) as rt:
            for definition in demo_tools():
                rt.register(definition)
            template = code_runtime.sandbox.template_pid
            assert template is not None
            async with anyio.create_task_group() as group:
                for index, agent in enumerate(agents):
                    group.start_soon(_agent_session, rt, index, agent, failures)
        leaks = await settled_leaks(before, [template])
    assert failures == []
    for agent in agents:
        assert event_log_problems(agent.events) == []
        types = [event.type for event in agent.events]
        assert types.count("tool/call") == TURNS and types.count("tool/result") == TURNS
        assert types.count("tool/code-dispatch-start") == types.count("tool/code-dispatch") == 3 * TURNS
    assert leaks == {}
