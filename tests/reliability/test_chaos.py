"""Chaos: 500 runs from 10 agents while the template and random workers are killed every ~50 runs.

Ten agents (five with one-shot runs, five with persistent sessions) each make 50 sequential ``run_code``
calls through one sandbox, every program making a child call. A chaos task counts finished runs and, every
20-30 of them, alternately SIGKILLs the template or one to three random live workers (warm, running or a
session's): about ten of each. Then:

- every run returns exactly the right value or fails with kind ``worker-exit``;
- every run that started at least 100 ms after the last fault and ended before the next one succeeded;
- a session's counter is kept between its runs unless the run reports ``session_restarted`` (and the agent's
  log ``code/session`` ``restarted``), and it always reports one after a failed run;
- the template was replaced once per kill, the breaker stayed closed, every agent's log is sound;
- afterwards no process, descriptor or worker directory (of any of the templates) is left behind.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import time
from dataclasses import dataclass
from typing import Any

import anyio
import pytest

from codemode.runtime import Agent, ToolRuntime
from codemode.sandbox import HealthEvent, RunResult, Sandbox, SandboxLimits
from codemode.tools.demo import demo_tools
from codemode.tools.run_code import PythonCodeRuntime
from tests.reliability._support import Resources, event_log_problems, settled_leaks

pytestmark = pytest.mark.anyio

AGENTS = 10
RUNS = 50
FAULT_GAP = (20, 30)  # finished runs between two faults; template and worker kills alternate
SETTLE = 0.1
LIMITS = SandboxLimits(wall_seconds=20.0, cpu_seconds=10.0)
ONE_SHOT = "r = await tools.add(a={a}, b={i})\nreturn r['sum']"
COUNTING = ("try:\n    count += 1\nexcept NameError:\n    count = 1\n"
            "r = await tools.add(a={a}, b={i})\nreturn [count, r['sum']]")


@dataclass
class Run:
    agent: int
    index: int
    start: float
    end: float
    value: Any
    outcome: RunResult
    restarted_in_log: bool


@dataclass
class Chaos:
    finished: int = 0
    done: bool = False


async def test_five_hundred_runs_survive_template_and_worker_kills() -> None:
    """It keeps every run right or a worker-exit, every run clear of a fault successful, leaks nothing."""
    rng = random.Random(20)
    before = Resources.now()
    runs: list[Run] = []
    faults: list[float] = []
    template_kills = 0
    templates: set[int] = set()
    observed: dict[str, RunResult] = {}
    chaos = Chaos()
    progress = anyio.Event()

    def note_template(event: HealthEvent) -> None:
        if event.health.template_pid is not None:
            templates.add(event.health.template_pid)

    def on_run(ctx: Any, outcome: RunResult) -> None:
        observed[ctx.agent.name] = outcome

    sandbox = Sandbox(warm=2)
    plain = PythonCodeRuntime(sandbox, limits=LIMITS, on_run=on_run)
    sessions = PythonCodeRuntime(sandbox, limits=LIMITS, persistent_sessions=True, on_run=on_run)
    with anyio.fail_after(120):
        async with plain, sessions, sandbox, ToolRuntime("code", code_runtime=plain) as rt_plain, \
                ToolRuntime("code", code_runtime=sessions) as rt_sessions:
            for rt in (rt_plain, rt_sessions):
                for definition in demo_tools():
                    rt.register(definition)
            sandbox.on_health(note_template)
            assert sandbox.template_pid is not None
            templates.add(sandbox.template_pid)
            agents = [Agent(f"agent-{n}") for n in range(AGENTS)]

            async def agent_loop(n: int) -> None:
                nonlocal progress
                rt, program = (rt_plain, ONE_SHOT) if n < AGENTS // 2 else (rt_sessions, COUNTING)
                agent = agents[n]
                for i in range(RUNS):
                    mark = len(agent.events)
                    start = time.monotonic()
                    arguments = {"code": program.format(a=n, i=i), "description": "chaos"}
                    result = await rt.execute("run_code", arguments, agent=agent)
                    end = time.monotonic()
                    restarted = any(e.type == "code/session" and e.data["event"] == "restarted"
                                    for e in agent.events.events[mark:])
                    value = None if result.is_error else result.value["result"]
                    runs.append(Run(n, i, start, end, value, observed.pop(agent.name), restarted))
                    chaos.finished += 1
                    woken, progress = progress, anyio.Event()
                    woken.set()

            async def inject() -> None:
                nonlocal template_kills
                due = rng.randint(*FAULT_GAP)
                kill_template = True
                while not chaos.done:
                    while chaos.finished < due and not chaos.done:
                        await progress.wait()
                    if chaos.done:
                        return
                    if kill_template:
                        pid = sandbox.template_pid
                        if pid is None:  # (still replacing the last one)
                            await anyio.sleep(0.01)
                            continue
                        os.kill(pid, signal.SIGKILL)  # (the sandbox reaps it before the pid could go)
                        template_kills += 1
                    else:
                        live = sandbox.live_worker_pids
                        for pid in rng.sample(live, min(len(live), rng.randint(1, 3))):
                            with contextlib.suppress(ProcessLookupError):  # (it may just have exited)
                                os.kill(pid, signal.SIGKILL)
                    faults.append(time.monotonic())
                    kill_template = not kill_template
                    due += rng.randint(*FAULT_GAP)

            async with anyio.create_task_group() as group:
                group.start_soon(inject)
                async with anyio.create_task_group() as agents_group:
                    for n in range(AGENTS):
                        agents_group.start_soon(agent_loop, n)
                chaos.done = True
                progress.set()
            assert await _restarted(sandbox, template_kills)
            health = sandbox.health()
            logs = {agent.name: event_log_problems(agent.events) for agent in agents}
            lost_seen = sum(1 for agent in agents for e in agent.events if e.type == "code/sandbox")
        leaks = await settled_leaks(before, templates)

    assert len(runs) == AGENTS * RUNS and template_kills >= 8 and len(faults) >= 16
    problems = _wrong_runs(runs, faults)
    assert problems == [], problems[:10]
    assert health.template_restarts == template_kills and health.breaker == "closed"
    assert all(problems == [] for problems in logs.values()), logs
    assert lost_seen > 0  # runs that saw a template die have it in their agent's log
    assert leaks == {}


async def _restarted(sandbox: Sandbox, kills: int) -> bool:
    with anyio.move_on_after(20):
        while sandbox.health().template_restarts < kills:  # noqa: ASYNC110 - health has no event to await
            await anyio.sleep(0.02)
    return sandbox.health().template_restarts == kills


def _wrong_runs(runs: list[Run], faults: list[float]) -> list[str]:
    """Every run that broke the rules (see the module docstring), as a sentence each."""
    problems: list[str] = []
    for run in runs:
        error = run.outcome.error
        where = f"agent {run.agent} run {run.index}"
        expected = run.agent + run.index
        clear = not any(run.start - SETTLE <= fault <= run.end for fault in faults)
        if error is not None:
            if error.kind != "worker-exit":
                problems.append(f"{where} failed with {error.kind}: {error.message}")
            elif clear:
                problems.append(f"{where} failed clear of any fault: {error.message}")
        elif run.agent < AGENTS // 2:
            if run.value != expected:
                problems.append(f"{where} returned {run.value!r}, expected {expected}")
        elif not isinstance(run.value, list) or run.value[1] != expected:
            problems.append(f"{where} returned {run.value!r}, expected [count, {expected}]")
    for agent in range(AGENTS // 2, AGENTS):
        problems += _session_problems([run for run in runs if run.agent == agent])
    return problems


def _session_problems(runs: list[Run]) -> list[str]:
    """A session's counter survives between runs exactly when no restart is reported."""
    problems: list[str] = []
    count: int | None = None
    failed_before = False
    for run in sorted(runs, key=lambda r: r.index):
        where = f"agent {run.agent} run {run.index}"
        restarted = run.outcome.stats.session_restarted
        if restarted != run.restarted_in_log and run.outcome.error is None:
            problems.append(f"{where}: session_restarted={restarted} but the log says {run.restarted_in_log}")
        if run.outcome.error is not None:
            failed_before = True
            continue
        if failed_before and run.index and not restarted:
            problems.append(f"{where}: the first success after a failure does not report a restart")
        want = 1 if restarted or count is None else count + 1
        if run.value[0] != want:
            problems.append(f"{where}: count {run.value[0]}, expected {want} (restarted={restarted})")
        count, failed_before = run.value[0], False
    return problems
