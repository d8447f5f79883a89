"""Self-healing: a template that dies, hangs or cannot start never takes the sandbox down for good.

Each test injects one fault into a sandbox of its own (through ``ToolRuntime`` + ``PythonCodeRuntime`` where
an agent's log is involved, else through ``Sandbox`` directly): SIGKILL of the template between runs and
during a run, SIGSTOP of the template (cleared, or detected and replaced), SIGKILL of a warm worker and of
a session's worker, a template that dies at every start (the restart breaker opens, then closes), and the
CLI's and the MCP server's reports of a restart.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from codemode.runtime import Agent, ToolRuntime
from codemode.sandbox import HealthEvent, RestartPolicy, RunResult, Sandbox, SandboxLimits
from codemode.tools.run_code import PythonCodeRuntime
from tests.reliability._chaos_tools import toolset
from tests.reliability._flaky_template import flag_path
from tests.reliability._support import event_log_problems, wait_until, worker_dirs
from tests.sandbox._support import pid_alive

pytestmark = pytest.mark.anyio

REPO = Path(__file__).resolve().parents[2]
FLAKY = "tests.reliability._flaky_template"


async def no_tools(name: str, args: Any) -> Any:
    return None


async def run(box: Sandbox, program: str = "return 1", wall: float = 10.0) -> RunResult:
    return await box.run(program, tool_names=(), call_tool=no_tools, limits=SandboxLimits(wall_seconds=wall))


@asynccontextmanager
async def runtime(sandbox: Sandbox, *, sessions: bool = False) -> AsyncIterator[ToolRuntime]:
    async with PythonCodeRuntime(sandbox, persistent_sessions=sessions) as code_runtime, sandbox, \
            ToolRuntime("code", code_runtime=code_runtime) as rt:
        for definition in toolset():
            rt.register(definition)
        yield rt


async def run_code(rt: ToolRuntime, agent: Agent, code: str) -> Any:
    return await rt.execute("run_code", {"code": code, "description": "supervision test"}, agent=agent)


def sandbox_events(agent: Agent) -> list[str]:
    return [event.data["event"] for event in agent.events if event.type == "code/sandbox"]


@pytest.fixture
def stopped() -> Any:
    """Pids the test SIGSTOPped; each gets a SIGCONT afterwards, whatever happened."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)


async def test_a_template_killed_between_runs_is_replaced_and_the_next_run_succeeds() -> None:
    """It replaces the template at once (no backoff, no failure counted) and serves the next run."""
    seen: list[HealthEvent] = []
    with anyio.fail_after(30):
        sandbox = Sandbox(warm=2)
        async with runtime(sandbox) as rt:
            sandbox.on_health(seen.append)
            agent = Agent("between")
            assert (await run_code(rt, agent, "return 1")).value == {"logs": [], "result": 1}
            await sandbox.wait_warm()
            old, warm = sandbox.template_pid, sandbox.live_worker_pids
            assert old is not None
            os.kill(old, signal.SIGKILL)
            assert await wait_until(lambda: not any(pid_alive(pid) for pid in warm), 5)
            after = await run_code(rt, agent, "return (await tools.add(a=2, b=3))['sum']")
            assert after.value == {"logs": [], "result": 5}
            assert await wait_until(lambda: sandbox.health().warm == 2, 10)  # the warm supply is back
            health = sandbox.health()
            assert event_log_problems(agent.events) == []
    assert sandbox.template_pid is None or sandbox.template_pid != old
    assert (health.template_restarts, health.template_failures, health.breaker) == (1, 0, "closed")
    assert [event.kind for event in seen] == ["template-lost", "template-restarted"]
    assert "died" in seen[0].message and "signal SIGKILL" in seen[1].message
    assert worker_dirs([old]) == []


async def test_a_template_killed_during_a_run_ends_it_with_worker_exit_and_the_log_says_why() -> None:
    """It ends the run in flight with worker-exit naming the template's death, records the loss in the
    agent's log, and serves the next run."""
    with anyio.fail_after(30):
        sandbox = Sandbox(warm=1)
        async with runtime(sandbox) as rt:
            agent = Agent("during")
            started = time.monotonic()
            result = await run_code(rt, agent, "await tools.kill_template()\nawait tools.sleep(ms=10000)")
            elapsed = time.monotonic() - started
            after = await run_code(rt, agent, "return 7")
    assert result.is_error and "code run failed (worker-exit)" in result.error.message
    assert "died with its sandbox template" in result.error.message and elapsed < 5
    assert after.value == {"logs": [], "result": 7}
    assert "template-lost" in sandbox_events(agent)
    assert event_log_problems(agent.events) == []


async def test_a_stopped_template_costs_a_waiting_run_no_more_than_its_budget(stopped: list[int]) -> None:
    """It fails a run that waits on a stopped template at its own wall budget, saying what it waited
    for; the template is then found hung, killed and replaced, and the next run succeeds."""
    with anyio.fail_after(30):
        async with Sandbox(warm=0, restart_policy=RestartPolicy(hang_seconds=2.0)) as box:
            old = box.template_pid
            assert old is not None
            stopped.append(old)
            os.kill(old, signal.SIGSTOP)
            started = time.monotonic()
            waited = await run(box, wall=1.0)
            elapsed = time.monotonic() - started
            after = await run(box, "return 2", wall=5.0)
            health = box.health()
    assert waited.error is not None and waited.error.kind == "timeout"
    assert "ran out while it waited for a worker" in waited.error.message
    assert "has not answered a request to start a worker" in waited.error.message
    assert 0.95 <= elapsed < 1.75
    assert after.error is None and after.value == 2
    assert health.template_restarts == 1 and health.template_pid != old and not pid_alive(old)
    assert health.last_error is not None and "did not answer" in health.last_error


async def test_a_run_that_outlasts_the_hang_detection_is_served_by_the_replacement(
        stopped: list[int]) -> None:
    """It serves a run that waited on a stopped template from the replacement, within its budget."""
    with anyio.fail_after(30):
        async with Sandbox(warm=0, restart_policy=RestartPolicy(hang_seconds=1.0)) as box:
            old = box.template_pid
            assert old is not None
            stopped.append(old)
            os.kill(old, signal.SIGSTOP)
            started = time.monotonic()
            result = await run(box, "return 3", wall=8.0)
            elapsed = time.monotonic() - started
    assert result.error is None and result.value == 3 and 0.95 <= elapsed < 5


async def test_a_hang_that_clears_before_it_is_detected_needs_no_restart(stopped: list[int]) -> None:
    """It keeps a template that answers again after SIGCONT: the next run succeeds on it."""
    with anyio.fail_after(30):
        async with Sandbox(warm=0) as box:
            template = box.template_pid
            assert template is not None
            stopped.append(template)
            os.kill(template, signal.SIGSTOP)
            waited = await run(box, wall=0.5)
            os.kill(template, signal.SIGCONT)
            after = await run(box, "return 4")
            health = box.health()
    assert waited.error is not None and waited.error.kind == "timeout"
    assert after.value == 4 and health.template_pid == template and health.template_restarts == 0


async def test_a_host_loop_blocked_past_the_hang_bound_does_not_retire_a_healthy_template() -> None:
    """It keeps a template that answered while the host's event loop was blocked (a slow host is not a
    hung template): the run succeeds and nothing is restarted."""
    with anyio.fail_after(30):
        async with Sandbox(warm=0, restart_policy=RestartPolicy(hang_seconds=0.3)) as box, \
                anyio.create_task_group() as group:
            results: list[RunResult] = []

            async def one() -> None:
                results.append(await run(box, "return 8"))

            group.start_soon(one)
            template = box._supply._template  # (white box: block only once the request is out)
            assert template is not None
            for _ in range(1000):
                if template.oldest_request is not None:
                    break
                await anyio.lowlevel.checkpoint()
            assert template.oldest_request is not None
            time.sleep(0.8)  # noqa: ASYNC251 - blocks the host's event loop on purpose
        health = box.health()
    assert results[0].value == 8 and health.template_restarts == 0 and health.template_failures == 0


async def test_a_warm_worker_killed_unseen_is_replaced_without_waiting_for_a_run() -> None:
    """It drops a warm worker the template reports dead and forks its replacement at once."""
    with anyio.fail_after(30):
        async with Sandbox(warm=2) as box:
            await box.wait_warm()
            victim = box.live_worker_pids[0]
            os.kill(victim, signal.SIGKILL)
            refilled = await wait_until(
                lambda: box.health().warm == 2 and victim not in box.live_worker_pids, 10)
            result = await run(box)
    assert refilled and result.value == 1 and result.stats.worker_pid != victim


async def test_a_dead_session_worker_is_restarted_and_the_agent_log_records_it() -> None:
    """It restarts an agent's session whose worker was killed, says so in the run's stats and the
    agent's log (``code/session`` ``restarted``)."""
    outcomes: list[RunResult] = []
    with anyio.fail_after(30):
        sandbox = Sandbox(warm=1)
        async with runtime(sandbox, sessions=True) as rt:
            assert isinstance(rt.code_runtime, PythonCodeRuntime)
            rt.code_runtime.on_run = lambda ctx, outcome: outcomes.append(outcome)
            agent = Agent("session")
            await run_code(rt, agent, "state = 41")
            worker = outcomes[-1].stats.worker_pid
            assert worker is not None
            os.kill(worker, signal.SIGKILL)
            fresh = await run_code(rt, agent, "try:\n    return state\nexcept NameError:\n    return 'fresh'")
            kept = await run_code(rt, agent, "state = 1\nreturn state")
    assert fresh.value == {"logs": [], "result": "fresh"} and outcomes[1].stats.session_restarted
    assert kept.value == {"logs": [], "result": 1} and not outcomes[2].stats.session_restarted
    sessions = [event.data["event"] for event in agent.events if event.type == "code/session"]
    assert sessions == ["opened", "restarted"]
    assert event_log_problems(agent.events) == []


async def test_a_template_that_dies_at_every_start_opens_the_breaker_then_closes_it() -> None:
    """It opens the breaker after max_failures failed starts, fails runs at once naming the cause and
    the next attempt, reopens after a failed trial, and closes once a trial template starts a worker."""
    seen: list[HealthEvent] = []
    flag = flag_path(os.getpid())
    policy = RestartPolicy(max_failures=2, window_seconds=1.0, backoff_seconds=0.05)
    try:
        with anyio.fail_after(60):
            async with Sandbox(warm=1, executor=FLAKY, restart_policy=policy) as box:
                box.on_health(seen.append)
                await box.wait_warm()
                template = box.template_pid
                assert template is not None
                os.close(os.open(flag, os.O_CREAT | os.O_WRONLY))  # every later template fails to start
                os.kill(template, signal.SIGKILL)
                assert await wait_until(lambda: box.health().breaker == "open", 15)
                started = time.monotonic()
                refused = await run(box)
                elapsed = time.monotonic() - started
                health, now = box.health(), time.time()
                # the first trial (a window later) fails too: the breaker opens again
                assert await wait_until(lambda: "breaker-opened" in [e.kind for e in seen[4:]], 15)
                os.unlink(flag)
                assert await wait_until(lambda: box.health().breaker == "closed", 15)
                healed = await run(box, "return 5")
                final = box.health()
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(flag)
    assert refused.error is not None and refused.error.kind == "worker-exit" and elapsed < 0.5
    message = refused.error.message
    assert "restart breaker is open" in message and "broken on purpose" in message
    assert "next attempt in" in message and "2 failures within 1 s" in message
    assert health.breaker == "open" and health.template_pid is None and health.retry_at is not None
    assert health.template_failures == 2 and now < health.retry_at < now + 1.0
    assert healed.value == 5 and final.template_failures == 3 and final.template_restarts == 1
    assert [event.kind for event in seen] == [
        "template-lost", "template-start-failed", "template-start-failed", "breaker-opened",
        "template-start-failed", "breaker-opened", "template-restarted", "breaker-closed"]
    assert "trial start after the last pause failed too" in seen[5].message


def test_the_cli_reports_a_lost_template_on_stderr_and_in_its_event_log(tmp_path: Path) -> None:
    """It prints the sandbox's health events on the progress stream and logs the run's in --events."""
    program = tmp_path / "kill.py"
    program.write_text("await tools.kill_template()\nawait tools.sleep(ms=10000)\n")
    events = tmp_path / "events.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", "codemode", "run", str(program), "--toolset",
         "tests.reliability._chaos_tools:toolset", "--events", str(events)],
        cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stderr
    assert "code run failed (worker-exit)" in done.stderr
    assert "! sandbox template-lost: the sandbox template" in done.stderr
    logged = [json.loads(line) for line in events.read_text().splitlines()]
    lost = [record["data"] for record in logged if record["type"] == "code/sandbox"]
    assert lost and lost[0]["event"] == "template-lost" and lost[0]["health"]["template_pid"] is None


async def test_the_mcp_server_logs_a_template_restart(tmp_path: Path) -> None:
    """It logs the loss and the restart on the server's stderr and keeps serving run_code."""
    from mcp import ClientSession, StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "codemode", "serve", "--mode", "code",
              "--toolset", "tests.reliability._chaos_tools:toolset"],
        env={"PYTHONPATH": str(REPO), "PATH": os.environ.get("PATH", "")}, cwd=tmp_path)
    errlog = tmp_path / "serve.log"
    with anyio.fail_after(60), errlog.open("w") as log:
        async with stdio_client(params, errlog=log) as (read, write), ClientSession(read, write) as client:
            await client.initialize()
            killed = await client.call_tool("run_code", {
                "code": "await tools.kill_template()\nawait tools.sleep(ms=10000)",
                "description": "kill the template"})
            after = await client.call_tool("run_code", {"code": "return 6", "description": "run again"})
    text = errlog.read_text()
    assert killed.is_error and after.structured_content == {"logs": [], "result": 6}
    assert "codemode serve: sandbox template-lost: the sandbox template" in text
    assert "codemode serve: sandbox template-restarted: a new sandbox template" in text
