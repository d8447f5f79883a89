"""RaySandbox on a one-node local Ray instance: results like a local sandbox's, child calls served on the
host, budgets, cancellation, persistent sessions, and an actor killed under its runs.

The module starts Ray once (``ray.init``) and shares one ``RaySandbox`` and one local ``Sandbox``; the tests
that kill an actor use a sandbox of their own.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import pytest
import ray

from codemode.runtime import Agent, ToolRuntime
from codemode.sandbox import HealthEvent, RestartPolicy, RunResult, Sandbox, SandboxLimits, SandboxUsageError
from codemode.sandbox.limits import MIB
from codemode.sandbox.ray import RaySandbox
from codemode.tools.demo import demo_tools
from codemode.tools.run_code import PythonCodeRuntime
from tests.reliability._chaos_tools import template_pids
from tests.reliability._support import wait_until
from tests.sandbox._ray_support import CALLS, NAMES, CallbackCancel, Cancel, run, tools
from tests.sandbox._support import pid_alive

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def ray_instance() -> Iterator[None]:
    """A local one-node Ray instance for the module (about 3 s to start)."""
    ray.init(num_cpus=2, include_dashboard=False, logging_level="warning", log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()


@pytest.fixture(scope="module")
async def remote(ray_instance: None) -> AsyncIterator[RaySandbox]:
    async with RaySandbox(warm=2) as box:
        yield box


@pytest.fixture(scope="module")
async def local() -> AsyncIterator[Sandbox]:
    async with Sandbox(warm=1) as box:
        yield box


def _key(result: RunResult) -> tuple[Any, ...]:
    return (result.value, result.has_value, result.logs, result.error.kind if result.error else None,
            result.stats.tool_calls)


@pytest.mark.parametrize("program", [
    "return 1 + 1",
    "print('hello', 3)\nreturn {'a': [1, 2.5, None, True]}",
    CALLS,
    "try:\n    await tools.fail({'why': 'x'})\nexcept ToolCallError as err:\n    return [err.code, str(err)]",
    "try:\n    await tools.bad({})\nexcept ToolCallError as err:\n    return err.code",
    "try:\n    await tools.nope({})\nexcept Exception as err:\n    return type(err).__name__",
    "raise ValueError('boom')",
    "return (",
    "import os",
    "print('x' * 10)\nreturn None",
])
async def test_a_program_gives_the_same_result_as_in_a_local_sandbox(remote: RaySandbox, local: Sandbox,
                                                                     program: str) -> None:
    """It returns the same value, logs, error kind and call count through Ray as a local sandbox does."""
    with anyio.fail_after(60):
        here = await run(local, program)
        there = await run(remote, program)
    assert _key(there) == _key(here)
    assert there.error is None or there.error.message == here.error.message  # type: ignore[union-attr]
    assert there.stats.isolation == here.stats.isolation


@pytest.mark.parametrize(("program", "budget", "kind"), [
    (CALLS, {"max_tool_calls": 3}, "call-limit"),
    ("return 'x' * 100", {"result_bytes": 50}, "output-limit"),
    ("data = 'a' * (400 * 1024 * 1024)\nreturn len(data)", {"memory_bytes": 64 * MIB}, "memory-limit"),
    ("for i in range(100):\n    print('line', i)\nreturn 'done'", {"log_bytes": 64}, None),
])
async def test_a_budget_ends_a_program_as_in_a_local_sandbox(remote: RaySandbox, local: Sandbox,
                                                             program: str, budget: dict[str, int],
                                                             kind: str | None) -> None:
    """It enforces each budget on the node with the same kind, message and kept logs as a local sandbox."""
    limits = SandboxLimits(wall_seconds=20.0, **budget)  # type: ignore[arg-type]
    with anyio.fail_after(60):
        here = await local.run(program, tool_names=NAMES, call_tool=tools, limits=limits)
        there = await remote.run(program, tool_names=NAMES, call_tool=tools, limits=limits)
    assert (there.error.kind if there.error else None) == kind
    assert _key(there) == _key(here)
    assert there.error is None or there.error.message == here.error.message  # type: ignore[union-attr]


async def test_twenty_concurrent_programs_with_child_calls_return_the_right_values(
        remote: RaySandbox) -> None:
    """It serves each program's ten child calls on the host and returns each program's own total."""
    served: list[int] = []

    async def counting(name: str, args: Any) -> Any:
        served.append(os.getpid())
        return await tools(name, args)

    results: dict[int, RunResult] = {}

    async def one(k: int) -> None:
        program = CALLS.replace("return total", f"return total + {k} * 1000")
        results[k] = await remote.run(program, tool_names=NAMES, call_tool=counting,
                                      limits=SandboxLimits(wall_seconds=30))

    with anyio.fail_after(60):
        async with anyio.create_task_group() as group:
            for k in range(20):
                group.start_soon(one, k)
    assert {k: r.value for k, r in results.items()} == {k: 90 + k * 1000 for k in range(20)}
    assert all(r.stats.tool_calls == 10 for r in results.values())
    assert served == [os.getpid()] * 200  # every call ran here, in the host process


@pytest.mark.parametrize(("program", "kinds", "cpu"), [
    ("while True:\n    pass", {"cpu-limit", "timeout"}, 0.5),
    ("await tools.hang({})", {"timeout"}, 5.0),
    ("x = 0\nwhile True:\n    x += 1", {"timeout"}, 30.0),
])
async def test_a_runaway_program_ends_within_its_budget(remote: RaySandbox, program: str, kinds: set[str],
                                                        cpu: float) -> None:
    """It ends a program that spins or waits forever with ``timeout`` or ``cpu-limit``, near the deadline."""
    started = time.monotonic()
    with anyio.fail_after(30):
        result = await run(remote, program, wall=2.0, cpu=cpu)
    elapsed = time.monotonic() - started
    assert result.error is not None and result.error.kind in kinds
    if result.error.kind == "timeout":
        assert "budget of 2 s (wall_seconds)" in result.error.message
    assert elapsed < 2.0 + 1.0 + 1.5  # the budget, the hop's grace, slack for a loaded machine


@pytest.mark.parametrize("signal_type", [Cancel, CallbackCancel])
async def test_a_cancel_signal_aborts_the_run_on_its_node(remote: RaySandbox,
                                                          signal_type: type[Cancel]) -> None:
    """It ends a run blocked on a tool call with ``aborted`` when the caller's signal fires (observed by a
    watcher task, or by the signal's ``on_cancel`` callback)."""
    cancel = signal_type()
    results: list[RunResult] = []

    logged = anyio.Event()

    async def go() -> None:
        results.append(await run(remote, "print('before')\nawait tools.hang({})", cancel=cancel,
                                 on_log=lambda line: logged.set()))

    with anyio.fail_after(30):
        async with anyio.create_task_group() as group:
            group.start_soon(go)
            await logged.wait()
            await anyio.sleep(0.2)  # (the call is on its way to the host, or served there)
            cancel.fire()
    assert results[0].error is not None and results[0].error.kind == "aborted"
    assert results[0].logs == ("before",)


async def test_an_anyio_cancellation_stops_the_run_on_its_node(remote: RaySandbox) -> None:
    """It propagates the caller's cancellation and stops the node's run (its worker is killed)."""
    with anyio.fail_after(30):
        with anyio.move_on_after(1.0) as scope:
            await run(remote, "while True:\n    pass", cpu=20.0)
        assert scope.cancelled_caught
        for _ in range(100):
            healths = await remote.node_health()
            if all(h is not None and h.live_workers <= h.warm_target for h in healths):
                break
            await anyio.sleep(0.1)
        after = await run(remote, "return 'next'")
    assert all(h is not None and h.live_workers <= h.warm_target for h in healths)
    assert after.value == "next"


async def test_a_persistent_session_keeps_its_globals(remote: RaySandbox) -> None:
    """It runs successive programs of one session in one worker on one actor."""
    with anyio.fail_after(30):
        async with remote.open_session() as session:
            first = await run(remote, "state = [1]\nstate.append(await tools.double({'n': 2}))",
                              session=session)
            second = await run(remote, "state.append(3)\nreturn state", session=session)
        assert first.ok and second.value == [1, {"n": 4}, 3]
        assert first.stats.worker_pid == second.stats.worker_pid
        assert not second.stats.session_restarted


async def test_python_code_runtime_takes_a_ray_sandbox(remote: RaySandbox) -> None:
    """It runs ``run_code`` through a RaySandbox: the child calls go through the host's pipeline, whose
    guards apply."""
    agent = Agent("ray")

    def no_devil(call: Any) -> str | None:
        return "not that number" if call.name == "add" and call.arguments.get("a") == 666 else None

    with anyio.fail_after(60):
        async with PythonCodeRuntime(remote, persistent_sessions=True) as code_runtime, \
                ToolRuntime("code", code_runtime=code_runtime) as rt:
            for definition in demo_tools():
                rt.register(definition)
            rt.guard(no_devil)
            program = "try:\n    await tools.add(a=666, b=1)\nexcept ToolCallError as e:\n    return str(e)"
            guarded = await rt.execute("run_code", {"code": program, "description": "guarded"}, agent=agent)
            first = await rt.execute("run_code", {"code": "n = (await tools.add(a=2, b=3))['sum']",
                                                  "description": "add"}, agent=agent)
            second = await rt.execute("run_code", {"code": "print(n)\nreturn (await tools.echo(text='hi'))",
                                                   "description": "echo"}, agent=agent)
            failed = await rt.execute("run_code", {"code": "await tools.fail(message='no')",
                                                   "description": "fail"}, agent=agent)
    assert "not that number" in guarded.value["result"]
    assert not first.is_error and second.value == {"logs": ["5"], "result": {"text": "hi"}}
    assert failed.is_error and "no" in failed.error.message  # type: ignore[union-attr]
    children = [event.type for event in agent.events if event.type.startswith("tool/")]
    assert children  # the child dispatches were logged on the host's side


async def test_a_killed_actor_fails_its_runs_and_the_next_run_succeeds(ray_instance: None) -> None:
    """It fails the runs in flight on a killed actor with ``worker-exit``, replaces the actor and runs the
    next program; a session on it restarts on the replacement."""
    events: list[HealthEvent] = []
    with anyio.fail_after(90):
        async with RaySandbox(warm=1) as box:
            box.on_health(events.append)
            victim = box.actors()[0]
            assert victim.pid is not None
            templates = template_pids(victim.pid)
            async with box.open_session() as session:
                kept = await run(box, "secret = 42", session=session)
                results: list[RunResult] = []

                started: list[str] = []

                async def blocked() -> None:
                    results.append(await run(box, "print('started')\nawait tools.hang({})", wall=60.0,
                                             on_log=started.append))

                async with anyio.create_task_group() as group:
                    for _ in range(3):
                        group.start_soon(blocked)
                    assert await wait_until(lambda: len(started) == 3, 30)  # (each reached its worker)
                    os.kill(victim.pid, signal.SIGKILL)
                after = await run(box, CALLS, wall=60.0)
                probe = await run(box, "try:\n    return secret\nexcept NameError:\n    return 'gone'",
                                  session=session, wall=60.0)
            replacement = box.actors()[0]
            health = box.health()
    assert kept.ok and len(templates) == 1
    assert await wait_until(lambda: not pid_alive(templates[0]), 10)  # (nothing outlives the actor)
    assert [r.error.kind if r.error else None for r in results] == ["worker-exit"] * 3
    assert all("died" in r.error.message for r in results if r.error)
    assert after.value == 90
    assert probe.value == "gone" and probe.stats.session_restarted
    assert replacement.alive and replacement.pid != victim.pid
    assert health.template_restarts == 1
    assert [e.kind for e in events][:2] == ["template-lost", "template-restarted"]


async def test_a_run_whose_deadline_passes_waiting_for_a_replacement_times_out(ray_instance: None) -> None:
    """It bounds the wait for a replacement actor by the run's own budget (the host never hangs)."""
    with anyio.fail_after(60):
        async with RaySandbox(warm=0) as box:
            victim = box.actors()[0]
            assert victim.pid is not None
            os.kill(victim.pid, signal.SIGKILL)
            assert await wait_until(lambda: not box.actors()[0].alive, 30)
            started = time.monotonic()
            result = await run(box, "return 1", wall=0.2)
            elapsed = time.monotonic() - started
    assert result.error is not None and result.error.kind == "timeout"
    assert elapsed < 1.5


async def test_a_stopped_actor_is_taken_for_hung_and_replaced(ray_instance: None) -> None:
    """It times out a run on an actor that stopped answering (SIGSTOP), kills that actor after
    ``hang_seconds`` of silence, and runs the next program on its replacement."""
    events: list[str] = []
    with anyio.fail_after(60):
        async with RaySandbox(warm=0, restart_policy=RestartPolicy(hang_seconds=1.0)) as box:
            box.on_health(lambda event: events.append(event.kind))
            victim = box.actors()[0]
            assert victim.pid is not None
            os.kill(victim.pid, signal.SIGSTOP)
            try:
                started = time.monotonic()
                stuck = await run(box, "return 1", wall=1.0)
                elapsed = time.monotonic() - started
                assert await wait_until(lambda: box.actors()[0].pid != victim.pid, 30)
            finally:
                os.kill(victim.pid, signal.SIGCONT)  # (a no-op once it is killed)
            after = await run(box, "return 2", wall=30.0)
    assert stuck.error is not None and stuck.error.kind == "timeout" and elapsed < 1.0 + 1.0 + 1.5
    assert after.value == 2
    assert events[:2] == ["template-lost", "template-restarted"]


async def test_runs_go_to_the_live_actor_while_a_lost_one_is_replaced(ray_instance: None) -> None:
    """It places runs over two actors by load, and on the one left while the other is replaced."""
    with anyio.fail_after(90):
        async with RaySandbox(actors=2, warm=1) as box:
            first, second = box.actors()
            assert first.node_id == second.node_id and first.pid != second.pid
            results = [await run(box, "return 1") for _ in range(4)]
            spread = [actor.runs for actor in box.actors()]
            assert second.pid is not None
            os.kill(second.pid, signal.SIGKILL)
            assert await wait_until(lambda: not box.actors()[1].alive, 30)
            during = [await run(box, "return 2") for _ in range(3)]
            on_first = box.actors()[0].runs
    assert [r.value for r in results] == [1] * 4 and spread == [2, 2]
    assert [r.value for r in during] == [2] * 3 and on_first == 2 + 3


def test_bad_arguments_are_refused() -> None:
    """It refuses bad actor counts and options before touching Ray."""
    for kwargs in ({"actors": 0}, {"actors_per_node": 0}, {"address": 3}, {"actor_options": [1]},
                   {"warm": 3, "max_workers": 2}):
        with pytest.raises(SandboxUsageError):
            RaySandbox(**kwargs)


def test_entering_it_without_a_ray_instance_says_how_to_start_one() -> None:
    """It refuses to start without ``ray.init()`` or ``address=``, saying which to do (and starts no Ray)."""
    script = (
        "import anyio, ray\n"
        "from codemode.sandbox import SandboxStartError\n"
        "from codemode.sandbox.ray import RaySandbox\n"
        "async def main():\n"
        "    async with RaySandbox():\n"
        "        pass\n"
        "try:\n"
        "    anyio.run(main)\n"
        "except SandboxStartError as exc:\n"
        "    print(exc)\n"
        "assert not ray.is_initialized()\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "ray.init()" in out.stdout and "address=" in out.stdout


def test_importing_it_without_ray_names_the_extra() -> None:
    """``import codemode`` and ``codemode.sandbox`` load no Ray; ``codemode.sandbox.ray`` without Ray says
    to install ``codemode[ray]``."""
    script = (
        "import sys\n"
        "import codemode, codemode.sandbox\n"
        "assert 'ray' not in sys.modules, 'ray was imported'\n"
        "sys.modules['ray'] = None\n"
        "try:\n"
        "    import codemode.sandbox.ray\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "codemode[ray]" in out.stdout
