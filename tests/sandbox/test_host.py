"""The host side: lifecycle, reaping, faults, tool calls, cancellation and misuse."""

from __future__ import annotations

import errno
import math
import os
import resource
import signal
import socket
import time
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codemode.sandbox import (
    HealthEvent,
    RestartPolicy,
    RunResult,
    Sandbox,
    SandboxClosedError,
    SandboxLimits,
    SandboxUsageError,
)
from codemode.sandbox.errors import SandboxStartError
from codemode.sandbox.host import HOST, TEMPLATE, WorkerHandle, describe_os_error
from codemode.sandbox.lossless import JsonValue
from tests.reliability._support import wait_until
from tests.sandbox._support import (
    STANDIN,
    CallbackCancel,
    Cancel,
    ShortSend,
    echo_tool,
    open_fds,
    pid_alive,
    run,
    typed_equal,
    worker_dirs,
)

pytestmark = pytest.mark.anyio

#: A plain-CPython program learns its worker's pid as the host sees it (its own pid namespace differs).
HOST_PID = "from codemode.sandbox.worker import host_pid\n"


@pytest.fixture(scope="module")
async def sandbox() -> AsyncIterator[Sandbox]:
    async with Sandbox(executor=STANDIN, warm=2) as box:
        yield box




async def test_replies_larger_than_the_socket_buffer_go_out_whole_and_one_at_a_time(
        sandbox: Sandbox) -> None:
    """Concurrent replies that each fill the channel many times over arrive intact (none interleaved).

    The first reply that cannot go out in one ``send`` takes the run's send lock (made then); the
    others queue on it instead of writing into the middle of its frame.
    """
    async def big(name: str, args: JsonValue) -> JsonValue:
        assert isinstance(args, dict)
        return str(args["c"]) * (3 << 20)

    program = """
import asyncio
texts = await asyncio.gather(*[tools.big({'c': c}) for c in 'abcd'])
return [[len(t), t.count(t[0])] for t in texts]
"""
    with anyio.fail_after(60):
        result = await run(sandbox, program, tools=("big",), call_tool=big,
                           limits=SandboxLimits(wall_seconds=30.0, cpu_seconds=20.0, memory_bytes=1 << 30))
    assert result.error is None, result.error
    assert result.value == [[3 << 20, 3 << 20]] * 4


async def test_no_call_handler_outlives_its_run(sandbox: Sandbox) -> None:
    """Handlers still running when the run ends (done, or the caller's cancellation) have ended,
    cancelled, by the time the run returns or its cancellation propagates."""
    ended: list[str] = []

    async def slow(name: str, args: JsonValue) -> JsonValue:
        try:
            if name == "fast":
                return "first"
            await anyio.sleep(30)
            return None
        finally:
            ended.append(name)

    program = ("import asyncio\n"
               "for next_done in asyncio.as_completed([tools.slow(), tools.fast()]):\n"
               "    return await next_done")
    with anyio.fail_after(20):
        result = await run(sandbox, program, tools=("slow", "fast"), call_tool=slow)
    assert result.value == "first" and sorted(ended) == ["fast", "slow"]
    ended.clear()
    with anyio.fail_after(20):
        with anyio.move_on_after(1) as scope:
            await run(sandbox, "await tools.slow()", tools=("slow",), call_tool=slow)
    assert scope.cancelled_caught and ended == ["slow"]


async def test_a_run_returns_its_value_logs_and_stats(sandbox: Sandbox) -> None:
    """It returns the value, the logs in order and the measured stats."""
    with anyio.fail_after(20):
        result = await run(sandbox, "print('a')\nprint('b')\nreturn {'n': 2**80, 'f': 0.5, 's': 'é'}")
    assert result.ok and result.has_value and result.value == {"n": 2**80, "f": 0.5, "s": "é"}
    assert result.logs == ("a", "b")
    assert result.stats.wall_ms > 0 and result.stats.tool_calls == 0 and result.stats.worker_pid


async def test_no_return_and_none_are_distinguished(sandbox: Sandbox) -> None:
    """It reports has_value=False for no return and has_value=True for an explicit None."""
    with anyio.fail_after(20):
        nothing = await run(sandbox, "x = 1")
        none = await run(sandbox, "return None")
    assert (nothing.has_value, nothing.value) == (False, None)
    assert (none.has_value, none.value) == (True, None)


async def test_no_state_survives_between_runs(sandbox: Sandbox) -> None:
    """It runs each program in a fresh process: module state set by one run is gone in the next."""
    with anyio.fail_after(20):
        first = await run(sandbox, "import json\njson.leak = 1\nreturn hasattr(json, 'leak')")
        second = await run(sandbox, "import json\nreturn hasattr(json, 'leak')")
    assert (first.value, second.value) == (True, False)
    assert first.stats.worker_pid != second.stats.worker_pid


async def test_tool_calls_cross_losslessly_and_concurrently(sandbox: Sandbox) -> None:
    """It serves concurrent calls, and their arguments and values keep exact types."""
    started: list[float] = []

    async def slow(name: str, args: JsonValue) -> JsonValue:
        started.append(time.perf_counter())
        await anyio.sleep(0.3)
        return {"args": args, "name": name}

    program = """
import asyncio
args = [{'i': i, 'big': 2**100, 'f': 1.25, 'l': [True, None]} for i in range(4)]
return await asyncio.gather(*(tools.echo(a) for a in args))
"""
    with anyio.fail_after(20):
        result = await run(sandbox, program, call_tool=slow)
    assert result.ok, result.error
    assert result.value == [{"args": {"i": i, "big": 2**100, "f": 1.25, "l": [True, None]}, "name": "echo"}
                            for i in range(4)]
    assert result.stats.tool_calls == 4 and max(started) - min(started) < 0.25


@pytest.mark.parametrize(
    ("program", "expected"),
    [
        ("try:\n    await tools.fail({})\nexcept Exception as e:\n    return [str(e), e.code]",
         ["the tool failed on purpose", "E_PURPOSE"]),
        ("try:\n    await tools.boom({})\nexcept Exception as e:\n    return [str(e), e.code]",
         ["the tool handler failed (RuntimeError)", "TOOL_FAILED"]),
        ("try:\n    await tools['undeclared']({})\nexcept Exception as e:\n    return [str(e), e.code]",
         ["unknown tool 'undeclared'; declared tools: boom, echo, fail", "UNKNOWN_TOOL"]),
    ],
    ids=["tool-failure", "handler-crash", "undeclared"],
)
async def test_failed_calls_reach_the_program_as_errors(sandbox: Sandbox, program: str,
                                                        expected: list[str]) -> None:
    """It turns ToolCallFailure, handler crashes and undeclared names into errors the program sees."""
    with anyio.fail_after(20):
        result = await run(sandbox, program)
    assert result.value == expected
    assert "secret" not in repr(result)


def _deep(levels: int) -> JsonValue:
    value: JsonValue = 1
    for _ in range(levels):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"s": {1, 2}}, "the tool's result is not lossless JSON: result.s: set is not a JSON value"),
        (_deep(5000), "the tool's result nests deeper than 398 levels"),
    ],
    ids=["lossy", "too-deep"],
)
async def test_an_unsendable_tool_result_is_refused(sandbox: Sandbox, value: Any, message: str) -> None:
    """It refuses to send a tool value the worker could not decode, and says why."""
    async def handler(name: str, args: JsonValue) -> Any:
        return value

    program = "try:\n    await tools.echo({})\nexcept Exception as e:\n    return [str(e), e.code]"
    with anyio.fail_after(20):
        result = await run(sandbox, program, call_tool=handler)
    assert result.value == [message, "INVALID_TOOL_OUTPUT"]


_finite = st.floats(allow_nan=False, allow_infinity=False).filter(lambda f: f != 0.0 or str(f) == "0.0")
_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**200), max_value=2**200) | _finite | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=_values)
async def test_lossless_values_round_trip_exactly_through_a_worker(sandbox: Sandbox, value: Any) -> None:
    """It carries a value program -> host (args) -> program (reply) -> host (result) unchanged."""
    received: list[JsonValue] = []

    async def mirror(name: str, args: JsonValue) -> JsonValue:
        received.append(args)
        return args

    with anyio.fail_after(20):
        result = await run(sandbox, f"return await tools.echo({value!r})", call_tool=mirror)
    assert result.ok, result.error
    assert typed_equal(received[0], value) and typed_equal(result.value, value)


async def test_concurrent_runs_each_get_their_own_worker(sandbox: Sandbox) -> None:
    """It runs several programs at once, each in a separate worker, with the right results."""
    results: dict[int, RunResult] = {}

    async def one(i: int) -> None:
        results[i] = await run(sandbox, f"import asyncio\nawait asyncio.sleep(0.2)\nreturn {i}")

    with anyio.fail_after(20):
        async with anyio.create_task_group() as group:
            for i in range(5):
                group.start_soon(one, i)
    assert {i: r.value for i, r in results.items()} == {i: i for i in range(5)}
    assert len({r.stats.worker_pid for r in results.values()}) == 5


async def test_a_worker_killed_mid_run_is_a_worker_exit(sandbox: Sandbox) -> None:
    """It reports worker-exit when the worker dies from SIGKILL it did not get from the host."""
    async def assassin(name: str, args: JsonValue) -> JsonValue:
        assert isinstance(args, dict)
        os.kill(int(args["pid"]), signal.SIGKILL)
        await anyio.sleep(5)
        return None

    with anyio.fail_after(20):
        result = await run(sandbox, f"{HOST_PID}print('before')\nawait tools.echo({{'pid': host_pid()}})",
                           call_tool=assassin)
    assert result.error is not None and result.error.kind == "worker-exit"
    assert "SIGKILL" in result.error.message and result.logs == ("before",)


async def test_a_worker_that_stops_answering_times_out(sandbox: Sandbox) -> None:
    """It kills a worker that blocks without answering at the wall deadline, keeping earlier logs."""
    limits = SandboxLimits(wall_seconds=1.0, cpu_seconds=5.0)
    with anyio.fail_after(20):
        result = await run(sandbox, "import time\nprint('started')\ntime.sleep(60)", limits=limits)
    assert result.error is not None and result.error.kind == "timeout"
    assert "1 s (wall_seconds)" in result.error.message and result.logs == ("started",)
    assert 900 <= result.stats.wall_ms < 5000
    assert not pid_alive(result.stats.worker_pid or 0)


@pytest.mark.parametrize("kind", ["awaitable", "callback", "broken-callback"])
async def test_a_cancel_signal_aborts_and_kills_the_worker(sandbox: Sandbox, kind: str) -> None:
    """It aborts on the cancel signal, kills the worker that ignores it and keeps earlier output.

    A signal with ``on_cancel`` is observed by a callback (disposed of after the run); one whose
    ``on_cancel`` raises, or one without it, by a watcher task: all three end the run alike.
    """
    cancel = Cancel() if kind == "awaitable" else CallbackCancel(broken=kind == "broken-callback")
    pids: list[int] = []

    async def record(name: str, args: JsonValue) -> JsonValue:
        assert isinstance(args, dict)
        pids.append(int(args["pid"]))
        if isinstance(cancel, CallbackCancel):
            cancel.fire()
        else:
            cancel.event.set()
        return None

    program = """
import time
from codemode.sandbox.worker import host_pid
print('working')
await tools.echo({'pid': host_pid()})
while True:
    try:
        time.sleep(1)
    except BaseException:
        pass
"""
    with anyio.fail_after(20):
        result = await run(sandbox, program, call_tool=record, cancel=cancel)
    assert result.error is not None and result.error.kind == "aborted"
    assert result.logs == ("working",) and not pid_alive(pids[0])
    if isinstance(cancel, CallbackCancel):
        # (one subscription per run, and one more if the run had to wait for a worker)
        assert cancel.subscriptions >= 1 and cancel.subscribed == 0


@pytest.mark.parametrize("kind", ["awaitable", "callback", "broken-callback"])
async def test_a_cancel_signal_aborts_a_run_that_makes_no_calls(sandbox: Sandbox, kind: str) -> None:
    """A run that never calls a tool has no task group of its own; the signal still ends it."""
    cancel = Cancel() if kind == "awaitable" else CallbackCancel(broken=kind == "broken-callback")

    def fire(line: str) -> None:
        if isinstance(cancel, CallbackCancel):
            cancel.fire()
        else:
            cancel.event.set()

    program = "import time\nprint('working')\nwhile True:\n    time.sleep(1)"
    with anyio.fail_after(20):
        result = await run(sandbox, program, cancel=cancel, on_log=fire)
    assert result.error is not None and result.error.kind == "aborted"
    assert result.logs == ("working",) and not pid_alive(result.stats.worker_pid or 0)
    if isinstance(cancel, CallbackCancel):
        assert cancel.subscribed == 0


async def test_a_run_that_makes_no_calls_times_out_at_its_deadline(sandbox: Sandbox) -> None:
    """The wall-clock deadline holds before any task group exists (a busy loop, no calls)."""
    limits = SandboxLimits(wall_seconds=0.5, cpu_seconds=5.0)
    with anyio.fail_after(20):
        result = await run(sandbox, "while True:\n    pass", limits=limits)
    assert result.error is not None and result.error.kind == "timeout"
    assert not pid_alive(result.stats.worker_pid or 0)


async def test_a_program_larger_than_the_socket_buffer_arrives_whole(sandbox: Sandbox) -> None:
    """The run frame is sent at once where the socket takes it, and the rest within the deadline."""
    size = 3 << 20  # several times a Unix socket's buffer
    program = f"text = '{'x' * size}'\nreturn [len(text), text[:3]]"
    with anyio.fail_after(30):
        result = await run(sandbox, program, limits=SandboxLimits(wall_seconds=20.0, cpu_seconds=10.0))
    assert result.error is None and result.value == [size, "xxx"]


async def test_a_call_after_a_quiet_start_is_served(sandbox: Sandbox) -> None:
    """Logs first, then calls: the run opens its task group at its first call and serves them all."""
    program = ("print('a')\nprint('b')\nx = await tools.echo({'n': 1})\n"
               "y = await tools.echo({'n': 2})\nreturn [x, y]")
    with anyio.fail_after(20):
        result = await run(sandbox, program)
    assert result.error is None and result.logs == ("a", "b")
    assert result.value == [{"tool": "echo", "args": {"n": n}} for n in (1, 2)]
    assert result.stats.tool_calls == 2


async def test_prewake_leaves_the_next_runs_unchanged(sandbox: Sandbox) -> None:
    """``wake`` frames queued ahead of a run are read and ignored by the worker."""
    await sandbox.wait_warm()
    sandbox.prewake()
    sandbox.prewake()
    with anyio.fail_after(20):
        first = await run(sandbox, "return 41 + 1")
        second = await run(sandbox, "return await tools.echo({'k': 'v'})")
    assert first.value == 42 and first.error is None
    assert second.value == {"tool": "echo", "args": {"k": "v"}}


async def test_prewake_without_a_warm_worker_does_nothing() -> None:
    """Outside ``async with`` (or with no worker warm) there is nobody to wake, and no error."""
    box = Sandbox(executor=STANDIN, warm=0)
    box.prewake()
    async with box:
        box.prewake()
        with anyio.fail_after(20):
            result = await run(box, "return 'cold'")
    assert result.value == "cold"


async def test_prewake_of_a_dead_warm_worker_is_harmless(sandbox: Sandbox) -> None:
    """A warm worker that died is not an error for ``prewake``; the next run takes another worker."""
    await sandbox.wait_warm()
    victim = sandbox._ready[0]  # (white box: the worker prewake writes to)
    os.kill(victim.pid, signal.SIGKILL)
    with anyio.fail_after(5):
        await victim.exited.wait()  # (the template reported the death)
    sandbox.prewake()
    with anyio.fail_after(20):
        result = await run(sandbox, "return 5")
    assert result.value == 5 and result.stats.worker_pid != victim.pid


async def test_a_partly_sent_wake_frame_retires_the_worker(sandbox: Sandbox) -> None:
    """A worker whose channel took only part of the frame is never used for a run; it is killed."""
    await sandbox.wait_warm()
    victim = sandbox._ready[0]
    victim.channel = ShortSend(victim.channel)  # type: ignore[assignment]
    sandbox.prewake()
    assert victim not in sandbox._ready
    with anyio.fail_after(10):
        await victim.exited.wait()  # (the reaper killed it)
        result = await run(sandbox, "return 6")
    assert result.value == 6 and result.stats.worker_pid != victim.pid


async def test_a_callback_signal_is_released_after_every_run(sandbox: Sandbox) -> None:
    """Runs that finish normally leave no callback behind on a long-lived signal."""
    cancel = CallbackCancel()
    for _ in range(3):
        result = await run(sandbox, "return 7", cancel=cancel)
        assert result.value == 7 and result.error is None
    assert cancel.subscriptions >= 3 and cancel.subscribed == 0  # (+1 for a run that waited for a worker)


async def test_a_cancel_signal_set_before_the_run_aborts_at_once(sandbox: Sandbox) -> None:
    """It returns aborted without starting anything when the signal is already set."""
    cancel = Cancel()
    cancel.event.set()
    with anyio.fail_after(5):
        result = await run(sandbox, "return 1", cancel=cancel)
    assert result.error is not None and result.error.kind == "aborted" and result.stats.worker_pid is None


async def test_caller_cancellation_kills_and_reaps_the_worker_then_propagates(sandbox: Sandbox) -> None:
    """It kills and reaps the worker under a shield when the caller's scope is cancelled."""
    pids: list[int] = []

    async def record(name: str, args: JsonValue) -> JsonValue:
        assert isinstance(args, dict)
        pids.append(int(args["pid"]))
        return None

    with anyio.fail_after(20):
        with anyio.move_on_after(1.0) as scope:
            program = f"import time\n{HOST_PID}await tools.echo({{'pid': host_pid()}})\ntime.sleep(60)"
            await run(sandbox, program, call_tool=record)
        assert scope.cancelled_caught
    assert pids and not pid_alive(pids[0])
    assert pids[0] not in sandbox.live_worker_pids


async def test_no_process_descriptor_or_directory_leaks(sandbox: Sandbox) -> None:
    """It leaves no worker, template, descriptor or working directory behind after closing."""
    with anyio.fail_after(30):
        await sandbox.wait_warm()  # the module's shared sandbox opens no descriptor during the count
    fds_before = open_fds()
    with anyio.fail_after(30):
        async with Sandbox(executor=STANDIN, warm=2) as box:
            template = box.template_pid
            await run(box, "return 1")
            await run(box, "import time\ntime.sleep(60)", limits=SandboxLimits(wall_seconds=0.5))
            await run(box, "raise ValueError('x')")
            assert template is not None and pid_alive(template)
            # The warm supply refills at a quiet moment; wait for it rather than racing the reaper.
            for _ in range(2000):
                if worker_dirs(template):
                    break
                await anyio.sleep(0.01)
            pids = list(box.live_worker_pids)
            assert pids
    assert not pid_alive(template) and not any(pid_alive(pid) for pid in pids)
    assert open_fds() == fds_before
    assert worker_dirs(template) == set()


async def test_finished_workers_are_reaped_promptly(sandbox: Sandbox) -> None:
    """It lets no finished one-shot worker linger beyond a short grace period."""
    with anyio.fail_after(20):
        result = await run(sandbox, "return 1")
        pid = result.stats.worker_pid or 0
        for _ in range(500):
            if not pid_alive(pid):
                break
            await anyio.sleep(0.01)
    assert not pid_alive(pid)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"program": b"return 1"}, "program must be a str"),
        ({"tool_names": "echo"}, "tool_names must be a sequence of str"),
        ({"tool_names": ["echo", 3]}, "tool_names must contain only str"),
        ({"tool_names": ["echo", "\ud800"]}, "a name holds a lone surrogate"),
        ({"call_tool": "not callable"}, "call_tool must be"),
        ({"limits": {"wall_seconds": 1}}, "limits must be a SandboxLimits"),
        ({"cancel": object()}, "cancel must have"),
        ({"on_log": 5}, "on_log must be callable"),
        ({"session": object()}, "session must come from"),
    ],
)
async def test_misuse_raises_a_usage_error(sandbox: Sandbox, kwargs: dict[str, Any], message: str) -> None:
    """It raises SandboxUsageError naming the bad argument, without starting anything."""
    arguments: dict[str, Any] = {"program": "return 1", "tool_names": (), "call_tool": echo_tool, **kwargs}
    program = arguments.pop("program")
    with pytest.raises(SandboxUsageError, match=message):
        await sandbox.run(program, **arguments)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"warm": -1}, "warm must be"),
        ({"layers": ["bogus"]}, "unknown isolation layers"),
        ({"limits": 3}, "limits must be"),
        ({"max_workers": 0}, "max_workers must be"),
        ({"max_workers": 2.0}, "max_workers must be"),
        ({"warm": 3, "max_workers": 2}, "must not exceed max_workers"),
        ({"restart_policy": {"max_failures": 3}}, "restart_policy must be"),
    ],
)
def test_bad_construction_raises_a_usage_error(kwargs: dict[str, Any], message: str) -> None:
    """It validates its own configuration."""
    with pytest.raises(SandboxUsageError, match=message):
        Sandbox(**kwargs)


@pytest.mark.parametrize(
    "kwargs",
    [{"max_failures": 0}, {"window_seconds": 0}, {"backoff_seconds": -1.0}, {"hang_seconds": math.inf},
     {"max_backoff_seconds": math.nan}, {"max_failures": True}],
)
def test_a_meaningless_restart_policy_is_refused(kwargs: dict[str, Any]) -> None:
    """It refuses counts below one and seconds that are not finite and positive."""
    with pytest.raises(SandboxUsageError, match="RestartPolicy"):
        RestartPolicy(**kwargs)


def test_the_restart_backoff_doubles_up_to_its_bound() -> None:
    """It pauses not at all before the first restart, then doubles from backoff_seconds to the bound."""
    policy = RestartPolicy(backoff_seconds=0.1, max_backoff_seconds=0.5)
    assert [policy.backoff(n) for n in range(6)] == [0.0, 0.1, 0.2, 0.4, 0.5, 0.5]


async def test_a_closed_sandbox_refuses_runs() -> None:
    """It raises SandboxClosedError before it is entered and after it is closed."""
    box = Sandbox(executor=STANDIN, warm=0)
    with pytest.raises(SandboxClosedError):
        await run(box, "return 1")
    with anyio.fail_after(20):
        async with box:
            assert (await run(box, "return 1")).value == 1
    with pytest.raises(SandboxClosedError):
        await run(box, "return 1")


async def test_on_log_streams_output_as_it_happens(sandbox: Sandbox) -> None:
    """It calls on_log for every entry before the run ends, and survives an observer that raises."""
    seen: list[str] = []

    async def observer(text: str) -> None:
        seen.append(text)
        if text == "two":
            raise RuntimeError("observer bug")

    async def check(name: str, args: JsonValue) -> JsonValue:
        return list(seen)

    with anyio.fail_after(20):
        result = await run(sandbox, "print('one')\nprint('two')\nreturn await tools.echo({})",
                           call_tool=check, on_log=observer)
    assert result.value == ["one", "two"] and result.logs == ("one", "two")


async def test_a_dead_template_takes_its_workers_along_and_is_replaced() -> None:
    """It kills every worker of a dead template, removes their directories and serves the next run from
    a replacement."""
    with anyio.fail_after(30):
        async with Sandbox(executor=STANDIN, warm=2) as box:
            await box.wait_warm()
            warm = list(box.live_worker_pids)
            old = box.template_pid
            assert old is not None
            os.kill(old, signal.SIGKILL)
            assert await wait_until(lambda: not any(pid_alive(pid) for pid in warm), 5)
            result = await run(box, "return 1")
            assert result.error is None and result.value == 1
            assert box.template_pid not in (None, old) and result.stats.worker_pid not in warm
            assert worker_dirs(old) == set()  # the host removed what the dead template left


async def test_grandchildren_die_with_their_worker() -> None:
    """It kills what a worker managed to fork (here: root, no seccomp) when the worker ends."""
    program = """
import os, time
pid = os.fork()
if pid == 0:
    time.sleep(60)
    os._exit(0)
return pid
"""
    with anyio.fail_after(30):
        async with Sandbox(executor=STANDIN, warm=0, layers=()) as box:
            result = await run(box, program)
            grandchild = result.value
            assert isinstance(grandchild, int) and grandchild > 0
            for _ in range(300):
                if not pid_alive(grandchild):
                    break
                await anyio.sleep(0.01)
            assert not pid_alive(grandchild)


class _NoTemplate:
    """Just enough of a template for a WorkerHandle that is never spawned."""

    def __init__(self) -> None:
        self._open_channels: set[Any] = set()


async def test_closing_a_channel_under_a_waiting_start_frees_its_descriptor() -> None:
    """It wakes a start that waits on a channel being closed, so the descriptor number is reusable.

    Closing a socket under a waiting ``anyio.wait_readable`` used to leave the waiter behind; the next
    socket given the same number was then refused as busy (a worker start failing at random).
    """
    host_end, worker_end = socket.socketpair()
    host_end.setblocking(False)
    number = host_end.fileno()
    handle = WorkerHandle(_NoTemplate(), 0, host_end)  # type: ignore[arg-type]
    failures: list[BaseException] = []

    async def start() -> None:
        try:
            await handle.wait_ready()
        except SandboxStartError as exc:
            failures.append(exc)

    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(start)
            await anyio.sleep(0.05)
            handle.close_channel()
        assert failures and "closed during its start" in str(failures[0])
        reused, other = socket.socketpair()
        try:
            if reused.fileno() == number:  # the lowest free number: usually the one just closed
                other.send(b"x")
                await anyio.wait_readable(reused)  # not refused as busy
        finally:
            reused.close()
            other.close()
            worker_end.close()


# -- the cap on live workers ---------------------------------------------------------------------

SLEEPER = "import time\ntime.sleep({seconds})\nreturn {value}"


async def test_live_workers_never_exceed_max_workers() -> None:
    """It runs six concurrent runs on at most two workers (warm ones included); every run succeeds."""
    peak = 0
    results: dict[int, RunResult] = {}
    with anyio.fail_after(60):
        async with Sandbox(executor=STANDIN, warm=1, max_workers=2) as box:
            await box.wait_warm()

            async def one(value: int) -> None:
                results[value] = await run(box, SLEEPER.format(seconds=0.3, value=value),
                                           limits=SandboxLimits(wall_seconds=30.0))

            async with anyio.create_task_group() as group:
                for value in range(6):
                    group.start_soon(one, value)
                while len(results) < 6:
                    peak = max(peak, len(box.live_worker_pids), box.health().live_workers)
                    await anyio.sleep(0.005)
            assert box.health().waiting == 0
    assert {value: result.value for value, result in results.items()} == {v: v for v in range(6)}
    assert all(result.error is None for result in results.values())
    assert peak == 2


async def test_a_run_waiting_at_the_cap_fails_at_its_own_deadline_saying_why() -> None:
    """It ends a run that found every worker busy at its own wall budget, naming max_workers."""
    with anyio.fail_after(30):
        async with Sandbox(executor=STANDIN, warm=0, max_workers=1) as box, \
                anyio.create_task_group() as group:
            busy: list[RunResult] = []

            async def hold() -> None:
                busy.append(await run(box, SLEEPER.format(seconds=2, value=1),
                                      limits=SandboxLimits(wall_seconds=20.0)))

            group.start_soon(hold)
            assert await wait_until(lambda: box.live_worker_pids, 10)
            started = time.monotonic()
            waited = await run(box, "return 2", limits=SandboxLimits(wall_seconds=0.5))
            elapsed = time.monotonic() - started
            assert box.health().waiting == 0
    assert waited.error is not None and waited.error.kind == "timeout"
    assert "while it waited for a worker" in waited.error.message and "max_workers" in waited.error.message
    assert 0.45 <= elapsed < 1.5
    assert busy[0].value == 1  # (the run holding the only worker is not disturbed)


@pytest.mark.parametrize("kind", ["event", "callback"])
async def test_a_cancel_signal_ends_the_wait_for_a_worker(kind: str) -> None:
    """It aborts a run whose cancel signal fires while the run waits for a worker."""
    cancel = CallbackCancel() if kind == "callback" else Cancel()
    with anyio.fail_after(30):
        async with Sandbox(executor=STANDIN, warm=0, max_workers=1) as box, \
                anyio.create_task_group() as group:
            group.start_soon(run, box, SLEEPER.format(seconds=1.5, value=1))
            assert await wait_until(lambda: box.live_worker_pids, 10)

            async def fire() -> None:
                await anyio.sleep(0.2)
                if isinstance(cancel, CallbackCancel):
                    cancel.fire()
                else:
                    cancel.event.set()

            group.start_soon(fire)
            started = time.monotonic()
            result = await run(box, "return 2", cancel=cancel, limits=SandboxLimits(wall_seconds=20.0))
            elapsed = time.monotonic() - started
    assert result.error is not None and result.error.kind == "aborted" and "waited for a worker" in \
        result.error.message
    assert elapsed < 1.2
    if isinstance(cancel, CallbackCancel):
        assert cancel.subscribed == 0


# -- an OSError at spawn -------------------------------------------------------------------------

def _lowest_free_fd(pid: int | str = "self") -> int:
    used = {int(name) for name in os.listdir(f"/proc/{pid}/fd")}
    return min(set(range(max(used) + 2)) - used)


async def test_descriptor_exhaustion_in_the_host_is_a_worker_exit_naming_it() -> None:
    """It turns EMFILE at a worker's start in the host into worker-exit saying descriptors ran out."""
    seen: list[HealthEvent] = []
    with anyio.fail_after(30):
        async with Sandbox(executor=STANDIN, warm=0) as box:
            box.on_health(seen.append)
            soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            resource.setrlimit(resource.RLIMIT_NOFILE, (_lowest_free_fd(), hard))  # no new descriptor
            try:
                starved = await run(box, "return 1")
            finally:
                resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
            after = await run(box, "return 2")
            health = box.health()
    assert starved.error is not None and starved.error.kind == "worker-exit"
    assert "host process ran out of file descriptors (EMFILE" in starved.error.message
    assert after.value == 2 and health.spawn_failures == 1 and health.template_restarts == 0
    assert [event.kind for event in seen] == ["spawn-failed"]


async def test_descriptor_exhaustion_in_the_template_is_a_worker_exit_naming_it() -> None:
    """It turns a template that cannot take the worker's channel into worker-exit saying so."""
    with anyio.fail_after(30):
        async with Sandbox(executor=STANDIN, warm=0) as box:
            template = box.template_pid
            assert template is not None
            limits = resource.prlimit(template, resource.RLIMIT_NOFILE)
            resource.prlimit(template, resource.RLIMIT_NOFILE, (_lowest_free_fd(template), limits[1]))
            try:
                starved = await run(box, "return 1")
            finally:
                resource.prlimit(template, resource.RLIMIT_NOFILE, limits)
            after = await run(box, "return 2")
            assert box.template_pid == template  # (not taken for hung: it answered)
    assert starved.error is not None and starved.error.kind == "worker-exit"
    assert "sandbox template ran out of file descriptors (EMFILE" in starved.error.message
    assert after.value == 2


@pytest.mark.parametrize(
    ("number", "who", "expected"),
    [
        (errno.EMFILE, HOST, "the host process ran out of file descriptors (EMFILE: its open-file limit of "),
        (errno.EMFILE, TEMPLATE, "the sandbox template ran out of file descriptors (EMFILE"),
        (errno.ENFILE, HOST, "the system ran out of file descriptors (ENFILE"),
        (errno.ENOMEM, TEMPLATE, "the sandbox template ran out of memory (ENOMEM)"),
        (errno.EAGAIN, TEMPLATE, "the sandbox template reached its process limit (EAGAIN"),
        (errno.ENOSPC, TEMPLATE, "file system is full (ENOSPC)"),
        (errno.EPERM, HOST, "the host process could not start a worker: [Errno 1] nope"),
        (None, TEMPLATE, "the sandbox template could not start a worker: [Errno 1] nope"),
    ],
)
def test_an_os_error_at_spawn_says_what_ran_out(number: int | None, who: str, expected: str) -> None:
    """It names the exhausted resource for the errno values a start can meet, else quotes the error."""
    assert expected in describe_os_error(number, "[Errno 1] nope", who)


# -- health --------------------------------------------------------------------------------------

async def test_health_reports_the_supply_and_observers_can_go() -> None:
    """It reports the warm level, the cap and the serving template; a disposed or raising observer
    changes nothing."""
    seen: list[HealthEvent] = []

    def broken(event: HealthEvent) -> None:
        raise RuntimeError("observer bug")

    with anyio.fail_after(30):
        async with Sandbox(executor=STANDIN, warm=2, max_workers=5) as box:
            box.on_health(broken)
            dispose = box.on_health(seen.append)
            await box.wait_warm()
            health = box.health()
            assert (health.warm, health.warm_target, health.live_workers, health.max_workers) == (2, 2, 2, 5)
            assert health.serving and health.template_pid == box.template_pid and health.breaker == "closed"
            assert (health.template_restarts, health.template_failures, health.spawn_failures) == (0, 0, 0)
            assert health.to_json()["warm"] == 2 and health.retry_at is None
            dispose()
            dispose()  # (idempotent)
            template = box.template_pid
            assert template is not None
            os.kill(template, signal.SIGKILL)
            assert await wait_until(lambda: box.health().template_restarts == 1, 10)
            assert (await run(box, "return 3")).value == 3
    assert seen == []
