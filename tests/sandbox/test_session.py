"""Persistent sessions: shared globals between runs, isolation between sessions, restart after death."""

from __future__ import annotations

import math
import os
import signal
import time
from collections.abc import AsyncIterator

import anyio
import pytest

from codemode.sandbox import RunResult, Sandbox, SandboxLimits, SessionClosedError
from tests.reliability._support import wait_until
from tests.sandbox._support import ShortSend, pid_alive, run

pytestmark = pytest.mark.anyio

PROBE_STATE = "try:\n    return state\nexcept NameError:\n    return False"
PROBE_SECRET = "try:\n    return secret\nexcept NameError:\n    return False"


@pytest.fixture(scope="module")
async def sandbox() -> AsyncIterator[Sandbox]:
    async with Sandbox(warm=1) as box:
        yield box


async def test_successive_runs_share_globals_in_one_worker(sandbox: Sandbox) -> None:
    """It keeps top-level names between runs of one session, in the same worker process."""
    with anyio.fail_after(30):
        async with sandbox.open_session() as session:
            first = await run(sandbox, "counter = 1\nitems = ['a']", session=session)
            second = await run(sandbox, "counter += 1\nitems.append('b')\nreturn [counter, items]",
                               session=session)
            failed = await run(sandbox, "raise ValueError('oops')", session=session)
            third = await run(sandbox, "return counter", session=session)
    assert first.ok and second.value == [2, ["a", "b"]]
    assert failed.error is not None and failed.error.kind == "exception"
    assert third.value == 2  # an exception does not cost the session its state
    pids = {r.stats.worker_pid for r in (first, second, failed, third)}
    assert len(pids) == 1 and not any(r.stats.session_restarted for r in (first, second, third))


async def test_sessions_are_isolated_from_each_other_and_from_one_shot_runs(sandbox: Sandbox) -> None:
    """It gives each session its own worker and globals; one-shot runs see none of them."""
    with anyio.fail_after(30):
        async with sandbox.open_session() as left, sandbox.open_session() as right:
            await run(sandbox, "secret = 'left'", session=left)
            seen = await run(sandbox, PROBE_SECRET, session=right)
            plain = await run(sandbox, PROBE_SECRET)
            mine = await run(sandbox, "return secret", session=left)
            assert left.worker_pid != right.worker_pid
    assert (seen.value, plain.value, mine.value) == (False, False, "left")


async def test_a_dead_session_worker_is_reported_and_replaced(sandbox: Sandbox) -> None:
    """It reports the kill, then starts a fresh worker (with empty globals) and says so."""
    short = SandboxLimits(wall_seconds=1.0, cpu_seconds=5.0)
    with anyio.fail_after(30):
        async with sandbox.open_session(limits=short) as session:
            await run(sandbox, "state = 41", session=session, limits=short)
            old = session.worker_pid
            dead = await run(sandbox, "while True:\n    pass", session=session, limits=short)
            fresh = await run(sandbox, PROBE_STATE, session=session, limits=short)
            assert old is not None and not pid_alive(old)
            assert session.restarts == 1
    assert dead.error is not None and dead.error.kind == "timeout"
    assert fresh.ok and fresh.value is False and fresh.stats.session_restarted
    assert fresh.stats.worker_pid != old


async def test_a_prewoken_session_keeps_its_worker_and_globals(sandbox: Sandbox) -> None:
    """``prewake`` before the first run does nothing; later the worker reads the wake frame and goes on."""
    with anyio.fail_after(30):
        async with sandbox.open_session() as session:
            session.prewake()  # (no worker yet)
            first = await run(sandbox, "state = 41", session=session)
            session.prewake()
            session.prewake()
            second = await run(sandbox, "return state + 1", session=session)
    assert first.ok and second.value == 42
    assert second.stats.worker_pid == first.stats.worker_pid and not second.stats.session_restarted


async def test_a_partly_sent_wake_frame_gives_the_worker_up(sandbox: Sandbox) -> None:
    """Framing lost on the session's channel: the next run kills that worker and starts afresh."""
    with anyio.fail_after(30):
        async with sandbox.open_session() as session:
            first = await run(sandbox, "state = 1", session=session)
            worker = session._worker  # (white box: the worker prewake writes to)
            assert worker is not None
            worker.channel = ShortSend(worker.channel)  # type: ignore[assignment]
            session.prewake()
            assert session.worker_pid is None
            fresh = await run(sandbox, PROBE_STATE, session=session)
            assert not pid_alive(first.stats.worker_pid or 0)
    assert fresh.ok and fresh.value is False and fresh.stats.session_restarted
    assert fresh.stats.worker_pid != first.stats.worker_pid


async def test_a_closed_session_refuses_runs_and_its_worker_is_gone(sandbox: Sandbox) -> None:
    """It kills the session's worker on close and refuses later runs."""
    with anyio.fail_after(30):
        session = sandbox.open_session()
        async with session:
            await run(sandbox, "x = 1", session=session)
            pid = session.worker_pid
        assert pid is not None and not pid_alive(pid)
        with pytest.raises(SessionClosedError):
            await run(sandbox, "return x", session=session)


async def test_each_run_of_a_session_gets_the_full_cpu_budget(sandbox: Sandbox) -> None:
    """It measures the CPU budget per run, not per session.

    The budget is calibrated from a measured spin, so the test holds on fast and slow machines: each
    run fits the budget, the three together exceed it. The spin is first scaled to at least 0.15 s of
    CPU, so three of them exceed even the least budget the CPU poll can enforce (0.3 s).
    """
    loose = SandboxLimits(wall_seconds=20.0, cpu_seconds=10.0)
    with anyio.fail_after(60):
        first = await run(sandbox, "return sum(range(8 * 10**6))", limits=loose)
        assert first.ok and first.stats.cpu_ms
        scale = max(1, math.ceil(150 / first.stats.cpu_ms))
        spin = f"return sum(range({scale} * 8 * 10**6))"
        probe = await run(sandbox, spin, limits=loose)
        assert probe.ok and probe.stats.cpu_ms
        budget_s = max(0.3, 1.6 * probe.stats.cpu_ms / 1000)
        limits = SandboxLimits(wall_seconds=30.0, cpu_seconds=budget_s)
        async with sandbox.open_session(limits=limits) as session:
            results = [await run(sandbox, spin, session=session, limits=limits) for _ in range(3)]
    assert all(r.ok for r in results), [r.error for r in results]
    assert len({r.stats.worker_pid for r in results}) == 1
    assert sum(r.stats.cpu_ms or 0.0 for r in results) > budget_s * 1000  # together they exceed one budget


async def test_a_session_worker_killed_between_runs_is_restarted_and_reported(sandbox: Sandbox) -> None:
    """It notices a worker killed from outside before the next run and runs that run on a fresh worker,
    saying so; the run does not fail."""
    with anyio.fail_after(30):
        async with sandbox.open_session() as session:
            await run(sandbox, "state = 1", session=session)
            old = session.worker_pid
            assert old is not None
            os.kill(old, signal.SIGKILL)  # (no wait: the template may not have reported it yet)
            fresh = await run(sandbox, PROBE_STATE, session=session)
            kept = await run(sandbox, "state = 2\nreturn state", session=session)
            again = await run(sandbox, "return state", session=session)
            assert session.restarts == 1
    assert fresh.ok and fresh.value is False and fresh.stats.session_restarted
    assert fresh.stats.worker_pid != old
    assert kept.value == 2 and again.value == 2 and not again.stats.session_restarted


async def test_a_session_outlives_its_template() -> None:
    """It restarts on the replacement template after the one that forked its worker died."""
    with anyio.fail_after(30):
        async with Sandbox(warm=1) as box, box.open_session() as session:
            await run(box, "state = 1", session=session)
            template, old = box.template_pid, session.worker_pid
            assert template is not None and old is not None
            os.kill(template, signal.SIGKILL)
            assert await wait_until(lambda: not pid_alive(old), 5)
            fresh = await run(box, PROBE_STATE, session=session)
            assert box.template_pid not in (None, template)
    assert fresh.ok and fresh.value is False and fresh.stats.session_restarted


async def test_a_session_run_waits_for_the_previous_one_within_its_budget(sandbox: Sandbox) -> None:
    """It ends a run that waits for its session's run in flight at its own wall budget, saying so."""
    with anyio.fail_after(30):
        async with sandbox.open_session() as session, anyio.create_task_group() as group:
            first: list[RunResult] = []

            async def nap(name: str, args: object) -> int:
                await anyio.sleep(1.5)
                return 1

            async def slow() -> None:
                first.append(await run(sandbox, "return await tools.nap()", tools=("nap",), call_tool=nap,
                                       session=session))

            group.start_soon(slow)
            await anyio.sleep(0.2)
            started = time.monotonic()
            waited = await run(sandbox, "return 2", session=session, limits=SandboxLimits(wall_seconds=0.4))
            elapsed = time.monotonic() - started
    assert waited.error is not None and waited.error.kind == "timeout"
    assert "waited for the session's previous run" in waited.error.message and 0.35 <= elapsed < 1.2
    assert first[0].value == 1
