"""The ordered lane and the two schedulers built on it (model turns and ``run_code`` child calls)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codemode.runtime._lane import EXCLUSIVE, NOTHING, PARALLEL, Footprint, OrderedLane
from codemode.runtime._runtime import ToolRuntime
from codemode.runtime.cancel import CancelSource
from codemode.runtime.definitions import ResourceClaims, ToolDefinition, ToolOutput, define_tool
from codemode.runtime.errors import AbortedBeforeDispatchError, ToolArgsError, ToolError
from codemode.runtime.events import project_tool_history
from codemode.runtime.results import ToolResult
from codemode.runtime.scheduler import ToolCallRequest, execute_tool_calls, open_sub_lane, parse_arguments
from codemode.runtime.scope import Agent
from codemode.sandbox.calls import CallAbandonment
from tests.runtime.helpers import outer_call


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# ---------------------------------------------------------------------------------------------------------
# fake jobs for the lane core


@dataclass
class _Cancel:
    cancelled: bool = False
    reason: str | None = None


@dataclass
class _Board:
    """Shared record of what the fake jobs did, in order."""

    log: list[str] = field(default_factory=list)
    running: int = 0
    peak: int = 0
    gates: dict[int, anyio.Event] = field(default_factory=dict)

    def gate(self, index: int) -> anyio.Event:
        return self.gates.setdefault(index, anyio.Event())


@dataclass
class _Job:
    index: int
    board: _Board
    classify: Callable[[], Footprint] = lambda: PARALLEL
    gated: bool = False
    delay: float = 0.0
    needs_run: bool = True
    classified: int = 0
    on_start: Callable[[], None] | None = None

    def footprint(self) -> Footprint:
        self.classified += 1
        return self.classify()

    async def start(self) -> bool:
        self.board.log.append(f"start:{self.index}")
        if self.on_start is not None:
            self.on_start()
        await anyio.lowlevel.checkpoint()
        return self.needs_run

    async def run(self) -> None:
        self.board.running += 1
        self.board.peak = max(self.board.peak, self.board.running)
        self.board.log.append(f"run:{self.index}")
        try:
            if self.gated:
                await self.board.gate(self.index).wait()
            await anyio.sleep(self.delay)
        finally:
            self.board.running -= 1
        self.board.log.append(f"settle:{self.index}")

    async def commit(self) -> None:
        self.board.log.append(f"commit:{self.index}")
        await anyio.lowlevel.checkpoint()

    async def abandon(self, reason: str) -> None:
        self.board.log.append(f"abandon:{self.index}:{reason}")


def _events(board: _Board, kind: str) -> list[int]:
    return [int(entry.split(":")[1]) for entry in board.log if entry.startswith(kind + ":")]


async def _wait_for(predicate: Callable[[], bool]) -> None:
    """Poll a condition on the fake board (the tests bound every wait with ``fail_after``)."""
    while not predicate():  # noqa: ASYNC110 - polling shared test state, no event to wait on
        await anyio.sleep(0.001)


@pytest.mark.anyio
async def test_lane_commits_in_order_when_bodies_finish_in_reverse() -> None:
    """It commits in submission order although the bodies settle last-first."""
    board = _Board()
    jobs = [_Job(i, board, gated=True) for i in range(5)]
    lane = OrderedLane(max_parallel=10)
    for job in jobs:
        lane.submit(job)
    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: lane.drive(until_idle=True))
            await _wait_for(lambda: board.running == 5)
            for index in reversed(range(5)):
                board.gate(index).set()
                await _wait_for(lambda index=index: f"settle:{index}" in board.log)
    assert _events(board, "settle") == [4, 3, 2, 1, 0]
    assert _events(board, "commit") == [0, 1, 2, 3, 4]
    assert _events(board, "start") == [0, 1, 2, 3, 4]
    assert board.peak == 5


@dataclass
class _SlowCommitJob(_Job):
    """A job whose commit waits for the board's gate ``-1 - index``."""

    async def commit(self) -> None:
        self.board.log.append(f"commit:{self.index}")
        await self.board.gate(-1 - self.index).wait()
        self.board.log.append(f"committed:{self.index}")


@pytest.mark.anyio
async def test_lane_starts_nothing_while_a_commit_is_in_progress() -> None:
    """A slow commit of the head (done in its worker) delays the start of a job submitted meanwhile."""
    board = _Board()
    lane = OrderedLane(max_parallel=10)
    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: lane.drive(until_idle=False))
            lane.submit(_SlowCommitJob(0, board))
            await _wait_for(lambda: "commit:0" in board.log)
            lane.submit(_Job(1, board))
            for _ in range(20):
                await anyio.lowlevel.checkpoint()
            assert "start:1" not in board.log
            board.gate(-1).set()
            await _wait_for(lambda: "commit:1" in board.log)
            lane.close("done")
    assert board.log.index("committed:0") < board.log.index("start:1")
    assert _events(board, "commit") == [0, 1]


@pytest.mark.anyio
@pytest.mark.parametrize("cap", [1, 2, 3, 7])
async def test_lane_pool_never_exceeds_the_cap(cap: int) -> None:
    """It keeps at most ``max_parallel`` bodies running and reaches the cap."""
    board = _Board()
    lane = OrderedLane(max_parallel=cap)
    for i in range(12):
        lane.submit(_Job(i, board, delay=0.002 * (i % 3 + 1)))
    with anyio.fail_after(5):
        await lane.drive(until_idle=True)
    assert board.peak == cap
    assert lane.peak_running == cap
    assert _events(board, "commit") == list(range(12))


@pytest.mark.anyio
async def test_lane_exclusive_job_is_a_barrier() -> None:
    """It runs an exclusive job alone: after earlier jobs commit and before later ones start."""
    board = _Board()
    kinds = [PARALLEL, PARALLEL, EXCLUSIVE, PARALLEL, PARALLEL]
    lane = OrderedLane(max_parallel=10)
    for i, kind in enumerate(kinds):
        lane.submit(_Job(i, board, classify=lambda kind=kind: kind, delay=0.005))
    with anyio.fail_after(5):
        await lane.drive(until_idle=True)
    log = board.log
    assert log.index("start:2") > log.index("commit:1")
    assert log.index("start:3") > log.index("commit:2")
    assert log.index("run:1") < log.index("settle:0")  # the parallel prefix overlapped
    assert log.index("run:4") < log.index("settle:3")  # and so did the suffix
    assert board.peak == 2


@pytest.mark.anyio
async def test_lane_reclassifies_right_before_start() -> None:
    """It asks for the footprint when the job is about to start, not when it was submitted."""
    board = _Board()
    switch = {"mode": PARALLEL}
    first = _Job(0, board, delay=0.005, on_start=lambda: switch.update(mode=EXCLUSIVE))
    second = _Job(1, board, classify=lambda: switch["mode"], delay=0.005)
    third = _Job(2, board, delay=0.005)
    lane = OrderedLane(max_parallel=10)
    for job in (first, second, third):
        lane.submit(job)
    with anyio.fail_after(5):
        await lane.drive(until_idle=True)
    # job 1 became exclusive once job 0 started: it waited for job 0's commit and job 2 waited for it
    assert board.log.index("start:1") > board.log.index("commit:0")
    assert board.log.index("start:2") > board.log.index("commit:1")
    assert board.peak == 1


@pytest.mark.anyio
async def test_lane_broken_classifier_runs_exclusively() -> None:
    """It treats a classifier that raises as exclusive instead of failing the lane."""
    board = _Board()

    def broken() -> Footprint:
        raise RuntimeError("classifier broke")

    lane = OrderedLane(max_parallel=10)
    lane.submit(_Job(0, board, delay=0.005))
    lane.submit(_Job(1, board, classify=broken, delay=0.005))
    lane.submit(_Job(2, board, delay=0.005))
    with anyio.fail_after(5):
        await lane.drive(until_idle=True)
    assert board.log.index("start:1") > board.log.index("commit:0")
    assert board.log.index("start:2") > board.log.index("commit:1")


@pytest.mark.anyio
async def test_lane_claims_overlap_unless_they_conflict() -> None:
    """It overlaps writes to different keys and serialises a write with a read of the same key."""
    board = _Board()
    claims = [
        Footprint(reads=frozenset(), writes=frozenset({"a.txt"})),
        Footprint(reads=frozenset(), writes=frozenset({"b.txt"})),
        Footprint(reads=frozenset({"a.txt"}), writes=frozenset()),
        Footprint(reads=frozenset({"c.txt"}), writes=frozenset()),
    ]
    lane = OrderedLane(max_parallel=10)
    for i, claim in enumerate(claims):
        lane.submit(_Job(i, board, classify=lambda claim=claim: claim, delay=0.01))
    with anyio.fail_after(5):
        await lane.drive(until_idle=True)
    log = board.log
    assert log.index("run:1") < log.index("settle:0")  # two different files written at once
    assert log.index("start:2") > log.index("commit:0")  # reading a.txt waits for its writer
    assert log.index("start:3") > log.index("start:2")  # starts stay in order behind the blocked one


@pytest.mark.anyio
async def test_lane_cancellation_drains_started_and_abandons_the_rest() -> None:
    """It stops starting on cancel, commits started jobs in order, then abandons the rest in order."""
    board = _Board()
    cancel = _Cancel()
    lane = OrderedLane(max_parallel=2, cancel=cancel)
    for i in range(6):
        lane.submit(_Job(i, board, gated=True))
    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: lane.drive(until_idle=True))
            await _wait_for(lambda: board.running == 2)
            cancel.cancelled, cancel.reason = True, "user pressed stop"
            lane.notify()
            board.gate(1).set()
            board.gate(0).set()
    assert _events(board, "commit") == [0, 1]
    assert [e for e in board.log if e.startswith("abandon")] == [
        f"abandon:{i}:user pressed stop" for i in range(2, 6)
    ]
    assert board.log.index("abandon:2:user pressed stop") > board.log.index("commit:1")


@pytest.mark.anyio
async def test_lane_close_abandons_and_waits_for_submissions_otherwise() -> None:
    """It keeps waiting for submissions until closed, then abandons what never started."""
    board = _Board()
    lane = OrderedLane(max_parallel=1)
    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: lane.drive(until_idle=False))
            lane.submit(_Job(0, board, gated=True))
            await _wait_for(lambda: board.running == 1)
            lane.submit(_Job(1, board))
            await anyio.sleep(0.01)
            assert "start:1" not in board.log
            lane.close("run settled")
            board.gate(0).set()
    assert board.log[-2:] == ["commit:0", "abandon:1:run settled"]


@pytest.mark.anyio
async def test_lane_pre_settled_jobs_commit_without_running() -> None:
    """It commits a job whose start settled it without launching its run stage."""
    board = _Board()
    lane = OrderedLane(max_parallel=3)
    lane.submit(_Job(0, board, delay=0.01))
    lane.submit(_Job(1, board, classify=lambda: NOTHING, needs_run=False))
    lane.submit(_Job(2, board, delay=0.001))
    with anyio.fail_after(5):
        await lane.drive(until_idle=True)
    assert "run:1" not in board.log
    assert _events(board, "commit") == [0, 1, 2]


@pytest.mark.anyio
async def test_lane_stage_failure_stops_and_reraises() -> None:
    """It re-raises the first internal stage failure after running bodies finished, abandoning nothing."""
    board = _Board()

    class Broken(_Job):
        async def start(self) -> bool:
            raise RuntimeError("prepare invariant broke")

    lane = OrderedLane(max_parallel=4)
    lane.submit(_Job(0, board, delay=0.01))
    lane.submit(Broken(1, board))
    lane.submit(_Job(2, board))
    with anyio.fail_after(5), pytest.raises(RuntimeError, match="prepare invariant broke"):
        await lane.drive(until_idle=True)
    assert "settle:0" in board.log
    assert "start:2" not in board.log
    assert not any(entry.startswith("abandon") for entry in board.log)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "3"])
def test_lane_rejects_a_bad_cap(bad: object) -> None:
    """It refuses a cap that is not a positive integer."""
    with pytest.raises(ValueError, match="max_parallel must be a positive integer"):
        OrderedLane(max_parallel=bad)  # type: ignore[arg-type]


_keys = st.frozensets(st.sampled_from("abc"), max_size=2)
_footprints = st.one_of(
    st.just(EXCLUSIVE),
    st.just(PARALLEL),
    st.builds(lambda r, w: Footprint(reads=r, writes=w), _keys, _keys),
)


@given(a=_footprints, b=_footprints)
def test_footprint_conflict_is_symmetric_and_matches_the_rule(a: Footprint, b: Footprint) -> None:
    """It calls two footprints conflicting exactly when one writes what the other reads or writes."""
    assert a.conflicts_with(b) == b.conflicts_with(a)
    if a.exclusive or b.exclusive:
        assert a.conflicts_with(b)
        return

    def touches(fp: Footprint, key: str) -> bool:
        return fp.reads is None or key in fp.reads or key in fp.writes

    expected = any(touches(b, k) for k in a.writes) or any(touches(a, k) for k in b.writes)
    assert a.conflicts_with(b) == expected


@settings(max_examples=25, deadline=None)
@given(
    kinds=st.lists(st.sampled_from(["p", "x"]), min_size=1, max_size=8),
    cap=st.integers(min_value=1, max_value=4),
    order=st.randoms(use_true_random=False),
)
def test_lane_order_and_cap_hold_for_any_mix(kinds: list[str], cap: int, order: object) -> None:
    """It starts and commits in order, never overlaps an exclusive job, and respects the cap."""
    import random

    assert isinstance(order, random.Random)
    delays = [order.random() * 0.002 for _ in kinds]

    async def scenario() -> None:
        board = _Board()
        overlap_with_exclusive: list[int] = []

        class Watched(_Job):
            async def run(self) -> None:
                if kinds[self.index] == "x" and board.running:
                    overlap_with_exclusive.append(self.index)
                await super().run()

        lane = OrderedLane(max_parallel=cap)
        for i, kind in enumerate(kinds):
            footprint = EXCLUSIVE if kind == "x" else PARALLEL
            lane.submit(Watched(i, board, classify=lambda fp=footprint: fp, delay=delays[i]))
        with anyio.fail_after(5):
            await lane.drive(until_idle=True)
        assert _events(board, "start") == list(range(len(kinds)))
        assert _events(board, "commit") == list(range(len(kinds)))
        assert board.peak <= cap
        assert overlap_with_exclusive == []

    anyio.run(scenario)


@pytest.mark.anyio
async def test_lane_starts_nothing_while_an_inline_job_starts() -> None:
    """A job queued while an inline job is in its start stage starts only after that stage, then
    overlaps its body; both commit in order."""
    board = _Board()
    release = anyio.Event()

    class SlowStart(_Job):
        async def start(self) -> bool:
            self.board.log.append(f"start:{self.index}")
            await release.wait()
            self.board.log.append(f"started:{self.index}")
            return True

    lane = OrderedLane(max_parallel=4)
    first = SlowStart(0, board, gated=True)
    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: lane.drive(until_idle=False))

            async def inline() -> None:
                with anyio.CancelScope(shield=True):
                    await lane.run_inline(first)

            group.start_soon(inline)
            try:
                await _wait_for(lambda: board.log == ["start:0"])
                lane.submit(_Job(1, board))
                for _ in range(10):
                    await anyio.lowlevel.checkpoint()
                assert board.log == ["start:0"]  # (job 1 waits for job 0's start)
                release.set()
                await _wait_for(lambda: "settle:1" in board.log)
                assert "commit:1" not in board.log  # (it ran beside job 0's body but commits after it)
                board.gate(0).set()
                await _wait_for(lambda: _events(board, "commit") == [0, 1])
            finally:  # (the inline job is shielded: let it end whatever failed)
                release.set()
                board.gate(0).set()
                lane.close("done")
    assert board.log.index("started:0") < board.log.index("start:1")


@settings(max_examples=30, deadline=None)
@given(
    jobs=st.lists(st.tuples(st.sampled_from(["p", "x"]), st.booleans(),
                            st.sampled_from([0.0, 0.0005, 0.002])), min_size=1, max_size=8),
    cap=st.integers(min_value=1, max_value=3),
)
def test_lane_inline_and_queued_jobs_keep_the_contract(jobs: list[tuple[str, bool, float]], cap: int) -> None:
    """Jobs driven by their submitters (when they find the lane idle) and jobs the driver runs mix
    freely: starts are in order and one at a time, commits in order, no overlap with an exclusive
    job, the cap holds."""

    async def scenario() -> None:
        board = _Board()
        problems: list[str] = []
        starting: list[int] = []
        inline_ran: list[int] = []

        class Watched(_Job):
            async def start(self) -> bool:
                if starting:
                    problems.append(f"start {self.index} during start {starting[0]}")
                starting.append(self.index)
                try:
                    await anyio.sleep(0.0005)  # (a start that takes a while: nothing may start meanwhile)
                    return await super().start()
                finally:
                    starting.remove(self.index)

            async def run(self) -> None:
                if jobs[self.index][0] == "x" and board.running:
                    problems.append(f"exclusive {self.index} overlapped")
                await super().run()

            async def commit(self) -> None:
                await super().commit()
                if len(_events(board, "commit")) == len(jobs):
                    all_committed.set()

        lane = OrderedLane(max_parallel=cap)
        all_committed = anyio.Event()

        async def submit(index: int, job: Watched, inline: bool) -> None:
            if inline and lane.idle():
                inline_ran.append(index)
                with anyio.CancelScope(shield=True):
                    await lane.run_inline(job)
            else:
                lane.submit(job)

        async def close_when_done() -> None:
            await all_committed.wait()
            lane.close("done")

        with anyio.fail_after(10):
            async with anyio.create_task_group() as group:
                group.start_soon(lambda: lane.drive(until_idle=False))
                group.start_soon(close_when_done)
                for index, (kind, inline, gap) in enumerate(jobs):
                    footprint = EXCLUSIVE if kind == "x" else PARALLEL
                    job = Watched(index, board, classify=lambda fp=footprint: fp, delay=0.001)
                    group.start_soon(submit, index, job, inline)
                    if gap:
                        await anyio.sleep(gap)
        assert problems == []
        assert _events(board, "start") == list(range(len(jobs)))
        assert _events(board, "commit") == list(range(len(jobs)))
        assert board.peak <= cap
        if jobs[0][1]:
            assert inline_ran[:1] == [0]  # (the first job always finds the lane idle)

    anyio.run(scenario)


# ---------------------------------------------------------------------------------------------------------
# the model-turn scheduler over the real pipeline


@dataclass
class _Probe:
    """Records what the tools of one test did (body start/end, hook stages) and the peak overlap."""

    log: list[str] = field(default_factory=list)
    running: int = 0
    peak: int = 0
    flags: dict[str, bool] = field(default_factory=dict)


def _render(args: Any, value: Any) -> list[dict[str, Any]]:
    return [{"type": "text", "text": f"{value}"}]


def _tool(probe: _Probe, name: str, *, safe: bool | Callable[[Any], bool] = True,
          claims: Callable[[Any], ResourceClaims | None] | None = None,
          timeout_ms: float | None = None) -> ToolDefinition:
    """A tool sleeping ``args["ms"]`` milliseconds while the probe counts overlapping bodies."""

    async def execute(args: Any, ctx: Any) -> dict[str, Any]:
        tag = args.get("tag", ctx.call_id)
        probe.running += 1
        probe.peak = max(probe.peak, probe.running)
        probe.log.append(f"body:{tag}")
        try:
            await anyio.sleep(args.get("ms", 0) / 1000)
        finally:
            probe.running -= 1
        probe.log.append(f"done:{tag}")
        return {"tag": tag}

    always: Callable[[Any], bool] = lambda args: True  # noqa: E731 - a named constant classifier
    classify = safe if callable(safe) else (always if safe else None)
    return define_tool(
        name=name, description=f"test tool {name}",
        parameters={"ms": {"type": "integer"}, "tag": {"type": "string"}, "path": {"type": "string"},
                    "mode": {"type": "string"}},
        output=ToolOutput(schema={"type": "object"}, render=_render), execute=execute,
        is_concurrency_safe=classify, claims=claims, timeout_ms=timeout_ms)


def _calls(*specs: tuple[str, dict[str, Any]]) -> list[ToolCallRequest]:
    return [ToolCallRequest(f"c{i}", name, json.dumps(args)) for i, (name, args) in enumerate(specs)]


@pytest.fixture
async def rt() -> AsyncIterator[ToolRuntime]:
    async with ToolRuntime(max_parallel_tool_calls=10, max_parallel_sub_calls=10) as runtime:
        yield runtime


@pytest.fixture
def probe() -> _Probe:
    return _Probe()


@pytest.fixture
def agent() -> Agent:
    return Agent("tester")


def _hook_order(rt: ToolRuntime, probe: _Probe) -> None:
    async def pre(call: Any, call_next: Callable[[], Awaitable[Any]]) -> Any:
        probe.log.append(f"pre:{call.call_id}")
        await anyio.lowlevel.checkpoint()
        return await call_next()

    async def post(call: Any, result: Any, call_next: Callable[[], Awaitable[Any]]) -> Any:
        probe.log.append(f"post:{call.call_id}")
        await anyio.lowlevel.checkpoint()
        return await call_next()

    rt.on_pre_execute(pre)
    rt.on_post_execute(post)


def _tagged(probe: _Probe, prefix: str) -> list[str]:
    return [entry.split(":", 1)[1] for entry in probe.log if entry.startswith(prefix + ":")]


@pytest.mark.anyio
async def test_turn_commits_in_model_order_when_bodies_finish_in_reverse(
        rt: ToolRuntime, probe: _Probe, agent: Agent) -> None:
    """It returns results, runs post-execute and appends events in model order under reverse completion."""
    rt.register(_tool(probe, "sleep"))
    _hook_order(rt, probe)
    calls = _calls(*[("sleep", {"ms": 40 - 10 * i, "tag": f"c{i}"}) for i in range(4)])
    with anyio.fail_after(5):
        results = await execute_tool_calls(rt, calls, agent=agent)
    assert [r.value["tag"] for r in results] == ["c0", "c1", "c2", "c3"]
    assert _tagged(probe, "done") == ["c3", "c2", "c1", "c0"]
    assert _tagged(probe, "pre") == ["c0", "c1", "c2", "c3"]
    assert _tagged(probe, "post") == ["c0", "c1", "c2", "c3"]
    assert probe.peak == 4
    types = [event.type for event in agent.events]
    assert types == ["tool/call"] * 4 + ["tool/result"] * 4
    history = project_tool_history(agent.events)
    assert [(h.call_id, h.settled, h.is_error) for h in history] == [(f"c{i}", True, False) for i in range(4)]
    results_events = agent.events.of_type("tool/result")
    assert [e.data["call_seq"] for e in results_events] == [1, 2, 3, 4]


@pytest.mark.anyio
async def test_turn_pre_execute_never_overlaps(rt: ToolRuntime, probe: _Probe) -> None:
    """It awaits each call's pre-execute before the next call's pre-execute starts."""
    rt.register(_tool(probe, "sleep"))
    active: list[str] = []
    overlaps: list[str] = []

    async def slow_pre(call: Any, call_next: Callable[[], Awaitable[Any]]) -> Any:
        if active:
            overlaps.append(call.call_id)
        active.append(call.call_id)
        await anyio.sleep(0.01 if call.call_id == "c0" else 0)
        active.remove(call.call_id)
        return await call_next()

    rt.on_pre_execute(slow_pre)
    with anyio.fail_after(5):
        await execute_tool_calls(rt, _calls(*[("sleep", {"ms": 1})] * 4))
    assert overlaps == []


@pytest.mark.anyio
async def test_turn_exclusive_call_is_a_barrier(rt: ToolRuntime, probe: _Probe, agent: Agent) -> None:
    """It runs an exclusive call alone, after earlier calls committed and before later ones start."""
    rt.register(_tool(probe, "sleep"))
    rt.register(_tool(probe, "write", safe=False))
    _hook_order(rt, probe)
    calls = _calls(("sleep", {"ms": 20, "tag": "a"}), ("sleep", {"ms": 5, "tag": "b"}),
                   ("write", {"ms": 5, "tag": "x"}), ("sleep", {"ms": 5, "tag": "c"}),
                   ("sleep", {"ms": 5, "tag": "d"}))
    with anyio.fail_after(5):
        results = await execute_tool_calls(rt, calls, agent=agent)
    log = probe.log
    assert [r.value["tag"] for r in results] == ["a", "b", "x", "c", "d"]
    assert log.index("body:x") > log.index("post:c1")  # waited for the parallel prefix to commit
    assert log.index("pre:c3") > log.index("post:c2")  # later calls wait for the barrier's commit
    assert log.index("body:b") < log.index("done:a")  # the prefix overlapped
    assert log.index("body:d") < log.index("done:c")  # and so did the suffix
    assert probe.peak == 2


@pytest.mark.anyio
@pytest.mark.parametrize("cap", [1, 3, 5])
async def test_turn_pool_is_capped_by_max_parallel_tool_calls(probe: _Probe, cap: int) -> None:
    """It never runs more than ``max_parallel_tool_calls`` bodies at once, and reaches the cap."""
    async with ToolRuntime(max_parallel_tool_calls=cap) as runtime:
        runtime.register(_tool(probe, "sleep"))
        calls = _calls(*[("sleep", {"ms": 3 + i % 4}) for i in range(16)])
        with anyio.fail_after(5):
            results = await execute_tool_calls(runtime, calls)
    assert probe.peak == cap
    assert all(not r.is_error for r in results)


@pytest.mark.anyio
async def test_turn_reclassifies_each_call_right_before_it_starts(rt: ToolRuntime, probe: _Probe) -> None:
    """It asks the classifier when a call is about to start, so an earlier call can change the answer."""
    switch = {"safe": True}

    async def flip(args: Any, ctx: Any) -> dict[str, Any]:
        switch["safe"] = False
        return {"tag": "flip"}

    rt.register(define_tool(name="flip", description="flips the switch", parameters={},
                            output=ToolOutput(schema={"type": "object"}, render=_render), execute=flip,
                            is_concurrency_safe=lambda args: True))
    rt.register(_tool(probe, "maybe", safe=lambda args: switch["safe"]))
    _hook_order(rt, probe)
    calls = _calls(("flip", {}), ("maybe", {"ms": 10, "tag": "m1"}), ("maybe", {"ms": 10, "tag": "m2"}))
    with anyio.fail_after(5):
        await execute_tool_calls(rt, calls)
    # "maybe" was parallel when the batch was built; c2 is classified when it starts, after flip ran
    assert probe.log.index("pre:c2") > probe.log.index("post:c1")
    assert probe.peak == 1


@pytest.mark.anyio
async def test_turn_resource_claims_overlap_disjoint_writes_and_serialise_conflicts(
        rt: ToolRuntime, probe: _Probe) -> None:
    """It overlaps writes to different files and serialises a write and a read of the same file."""

    def file_claims(args: Any) -> ResourceClaims:
        path = args.get("path", "")
        if args.get("mode") == "read":
            return ResourceClaims(reads=frozenset({path}))
        return ResourceClaims(writes=frozenset({path}))

    rt.register(_tool(probe, "fs", safe=False, claims=file_claims))
    calls = _calls(("fs", {"ms": 20, "tag": "w-a", "path": "a.txt"}),
                   ("fs", {"ms": 20, "tag": "w-b", "path": "b.txt"}),
                   ("fs", {"ms": 5, "tag": "r-a", "path": "a.txt", "mode": "read"}),
                   ("fs", {"ms": 5, "tag": "w-b2", "path": "b.txt"}))
    with anyio.fail_after(5):
        results = await execute_tool_calls(rt, calls)
    log = probe.log
    assert [r.value["tag"] for r in results] == ["w-a", "w-b", "r-a", "w-b2"]
    assert log.index("body:w-b") < log.index("done:w-a")  # disjoint writes overlapped
    assert log.index("body:r-a") > log.index("done:w-a")  # the reader waited for the writer of a.txt
    assert log.index("body:w-b2") > log.index("done:w-b")  # two writers of b.txt never overlap


@pytest.mark.anyio
async def test_turn_undeclared_tool_stays_exclusive_next_to_claims(rt: ToolRuntime, probe: _Probe) -> None:
    """It keeps a tool with neither claims nor a concurrency classifier exclusive."""
    rt.register(_tool(probe, "fs", safe=False,
                      claims=lambda args: ResourceClaims(writes=frozenset({args.get("path", "")}))))
    rt.register(_tool(probe, "plain", safe=False))
    calls = _calls(("fs", {"ms": 10, "tag": "w", "path": "a"}), ("plain", {"ms": 1, "tag": "p"}))
    with anyio.fail_after(5):
        await execute_tool_calls(rt, calls)
    assert probe.log.index("body:p") > probe.log.index("done:w")


@pytest.mark.anyio
async def test_turn_argument_text_parsing(rt: ToolRuntime, probe: _Probe, agent: Agent) -> None:
    """It treats empty text as {}, parses JSON, and fails only the call whose text is not JSON."""
    rt.register(_tool(probe, "sleep"))
    calls = [ToolCallRequest("e", "sleep", ""), ToolCallRequest("bad", "sleep", '{"ms": 1,'),
             ToolCallRequest("ok", "sleep", '{"tag": "fine"}'),
             ToolCallRequest("nan", "sleep", '{"ms": NaN}')]
    with anyio.fail_after(5):
        results = await execute_tool_calls(rt, calls, agent=agent)
    assert results[0].value == {"tag": "e"}
    assert results[1].code == "INVALID_ARGS"
    assert "argument text is not valid JSON" in results[1].error.message  # type: ignore[union-attr]
    assert results[2].value == {"tag": "fine"}
    assert results[3].code == "INVALID_ARGS"
    calls_logged = agent.events.of_type("tool/call")
    assert [e.data["arguments"] for e in calls_logged] == ["", '{"ms": 1,', '{"tag": "fine"}', '{"ms": NaN}']
    assert [h.error_code for h in project_tool_history(agent.events)] == [None, "INVALID_ARGS", None,
                                                                          "INVALID_ARGS"]


@pytest.mark.anyio
async def test_turn_cancellation_drains_started_and_pairs_the_unstarted(
        probe: _Probe, agent: Agent) -> None:
    """It stops starting on cancel, commits started calls, then records aborted pairs for the rest."""
    async with ToolRuntime(max_parallel_tool_calls=2) as runtime:
        runtime.register(_tool(probe, "sleep"))
        source = CancelSource()
        calls = _calls(*[("sleep", {"ms": 2000, "tag": f"t{i}"}) for i in range(5)])
        with anyio.fail_after(5):
            async with anyio.create_task_group() as group:
                box: list[list[ToolResult]] = []

                async def run() -> None:
                    box.append(await execute_tool_calls(runtime, calls, agent=agent, cancel=source.signal))

                group.start_soon(run)
                await _wait_for(lambda: probe.running == 2)
                source.cancel("user interrupted")
    results = box[0]
    assert [r.code for r in results] == ["ABORTED", "ABORTED"] + ["ABORTED_BEFORE_DISPATCH"] * 3
    assert results[2].error.message == "tool call aborted before dispatch"  # type: ignore[union-attr]
    assert _tagged(probe, "body") == ["t0", "t1"]
    types = [e.type for e in agent.events]
    assert types == (["tool/call", "tool/call", "tool/result", "tool/result"]
                     + ["tool/call", "tool/result"] * 3)
    history = project_tool_history(agent.events)
    assert [h.call_id for h in history] == ["c0", "c1", "c2", "c3", "c4"]
    assert all(h.settled for h in history)


@pytest.mark.anyio
async def test_turn_pre_cancelled_batch_starts_nothing(rt: ToolRuntime, probe: _Probe, agent: Agent) -> None:
    """It records an aborted pair for every call when the signal fired before the turn."""
    rt.register(_tool(probe, "sleep"))
    source = CancelSource()
    source.cancel("too late")
    with anyio.fail_after(5):
        results = await execute_tool_calls(rt, _calls(("sleep", {}), ("sleep", {})), agent=agent,
                                           cancel=source.signal)
    assert [r.code for r in results] == ["ABORTED_BEFORE_DISPATCH"] * 2
    assert probe.log == []
    assert [e.type for e in agent.events] == ["tool/call", "tool/result"] * 2


@pytest.mark.anyio
async def test_turn_through_the_runtime_method(rt: ToolRuntime, probe: _Probe) -> None:
    """It is reachable as ``rt.execute_tool_calls`` and returns [] for an empty batch."""
    rt.register(_tool(probe, "sleep"))
    with anyio.fail_after(5):
        assert await rt.execute_tool_calls([]) == []
        results = await rt.execute_tool_calls(_calls(("sleep", {"tag": "x"})))
    assert results[0].value == {"tag": "x"}


@pytest.mark.anyio
@pytest.mark.parametrize(("calls", "kwargs", "message"), [
    ("not a list", {}, "calls must be a sequence"),
    ([("c", "sleep", "{}")], {}, r"calls\[0\] must be a ToolCallRequest"),
    ([], {"agent": "me"}, "agent must be"),
    ([], {"cancel": True}, "cancel must be"),
])
async def test_turn_rejects_bad_input_clearly(rt: ToolRuntime, calls: Any, kwargs: dict[str, Any],
                                              message: str) -> None:
    """It raises a TypeError naming the bad parameter."""
    with pytest.raises(TypeError, match=message):
        await execute_tool_calls(rt, calls, **kwargs)


@pytest.mark.parametrize(("fields", "message"), [
    (("", "n", "{}"), "call_id must be a non-empty string"),
    ((1, "n", "{}"), "call_id must be a str"),
    (("c", None, "{}"), "name must be a str"),
    (("c", "n", {}), "arguments_text must be a str"),
])
def test_tool_call_request_validates_its_fields(fields: tuple[Any, Any, Any], message: str) -> None:
    """It refuses a malformed tool-call block at construction."""
    with pytest.raises((TypeError, ValueError), match=message):
        ToolCallRequest(*fields)


@given(st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5), max_size=4))
def test_parse_arguments_round_trips_json_objects(value: dict[str, Any]) -> None:
    """It parses any JSON object text back to the same value."""
    assert parse_arguments(json.dumps(value)) == value


# ---------------------------------------------------------------------------------------------------------
# the run_code child lane


@pytest.fixture(params=["plain", "cooperative", "shielded"])
def cooperative(request: pytest.FixtureRequest) -> str:
    """Submit child calls plainly, cooperatively (with a ``CallAbandonment``), or cooperatively from a
    shielded scope with an abandonment that says so, as the sandbox serves ``run_code``'s calls."""
    return str(request.param)


def _submit(lane: Any, cooperative: str) -> Callable[..., Awaitable[ToolResult]]:
    async def submit(name: str, args: Any) -> ToolResult:
        if cooperative == "cooperative":
            return await lane.submit(name, args, abandoned=CallAbandonment())  # type: ignore[no-any-return]
        if cooperative == "shielded":
            with anyio.CancelScope(shield=True):
                return await lane.submit(  # type: ignore[no-any-return]
                    name, args, abandoned=CallAbandonment(shielded=True))
        return await lane.submit(name, args)  # type: ignore[no-any-return]

    return submit


@pytest.mark.anyio
async def test_sub_lane_numbers_children_and_delivers_in_submission_order(
        cooperative: str, rt: ToolRuntime, probe: _Probe, agent: Agent) -> None:
    """It numbers child calls ``<outer>:code:<n>``, overlaps safe ones and delivers in submission order."""
    rt.register(_tool(probe, "sleep"))
    _hook_order(rt, probe)
    delivered: list[str] = []
    with anyio.fail_after(5):
        async with open_sub_lane(rt, outer_call=outer_call(rt, agent)) as lane, \
                anyio.create_task_group() as group:
            async def call(ms: int, tag: str) -> None:
                result = await _submit(lane, cooperative)("sleep", {"ms": ms, "tag": tag})
                delivered.append(result.value["tag"])

            for i, ms in enumerate((30, 20, 10)):
                group.start_soon(call, ms, f"s{i}")
                await anyio.lowlevel.checkpoint()
    assert delivered == ["s0", "s1", "s2"]
    assert _tagged(probe, "done") == ["s2", "s1", "s0"]
    assert _tagged(probe, "post") == ["run-1:code:1", "run-1:code:2", "run-1:code:3"]
    assert probe.peak == 3
    starts = agent.events.of_type("tool/code-dispatch-start")
    settles = agent.events.of_type("tool/code-dispatch")
    assert [e.data["sub_call_id"] for e in starts] == ["run-1:code:1", "run-1:code:2", "run-1:code:3"]
    assert [e.data["sub_call_id"] for e in settles] == ["run-1:code:1", "run-1:code:2", "run-1:code:3"]
    assert {e.data["parent_call_id"] for e in starts} == {"run-1"}
    assert {e.data["root_call_id"] for e in settles} == {"run-1"}
    assert all(e.data["is_error"] is False for e in settles)
    assert settles[0].data["content"] == [{"type": "text", "text": "{'tag': 's0'}"}]


@pytest.mark.anyio
async def test_sub_lane_children_carry_the_outer_identity(
        cooperative: str, rt: ToolRuntime, agent: Agent) -> None:
    """It gives each child the outer root call id, the outer agent and the outer token as parent."""
    seen: list[Any] = []

    async def record(args: Any, ctx: Any) -> dict[str, Any]:
        seen.append((ctx.call_id, ctx.root_call_id, ctx.agent, ctx.parent))
        return {}

    rt.register(define_tool(name="who", description="records identity", parameters={},
                            output=ToolOutput(schema={"type": "object"}, render=_render), execute=record))
    outer = outer_call(rt, agent, "outer-7")
    with anyio.fail_after(5):
        async with open_sub_lane(rt, outer_call=outer) as lane:
            await _submit(lane, cooperative)("who", {})
            await _submit(lane, cooperative)("who", {})
    assert seen == [("outer-7:code:1", "outer-7", agent, outer.token),
                    ("outer-7:code:2", "outer-7", agent, outer.token)]


@pytest.mark.anyio
async def test_sub_lane_starts_its_driver_only_for_a_first_call(rt: ToolRuntime, agent: Agent) -> None:
    """It costs a tool-less run no driver task, and still serves calls once one is submitted."""
    rt.register(define_tool(name="noop", description="does nothing", parameters={},
                            output=ToolOutput(schema={"type": "object"}, render=_render),
                            execute=lambda args, ctx: _empty()))
    with anyio.fail_after(5):
        async with open_sub_lane(rt, outer_call=outer_call(rt, agent, "quiet")) as lane:
            assert lane.submitted == 0
        assert not lane._driving  # type: ignore[attr-defined]
        async with open_sub_lane(rt, outer_call=outer_call(rt, agent, "busy")) as lane:
            result = await lane.submit("noop", {})
            assert lane._driving  # type: ignore[attr-defined]
    assert not result.is_error and result.value == {}


@pytest.mark.anyio
@pytest.mark.parametrize("entered", [True, False])
async def test_sub_lane_drains_with_or_without_an_entered_runtime(entered: bool, probe: _Probe) -> None:
    """Concurrent calls overlap, deliver in order and drain before the exit, whether or not the
    runtime was entered (``async with``)."""
    runtime = ToolRuntime(max_parallel_sub_calls=4)
    runtime.register(_tool(probe, "sleep"))
    delivered: list[str] = []

    async def scenario() -> None:
        async with open_sub_lane(runtime, outer_call=outer_call(runtime, None)) as lane, \
                anyio.create_task_group() as group:
            async def call(ms: int, tag: str) -> None:
                delivered.append((await lane.submit("sleep", {"ms": ms, "tag": tag})).value["tag"])

            for ms, tag in ((20, "a"), (5, "b"), (1, "c")):
                group.start_soon(call, ms, tag)
        assert delivered == ["a", "b", "c"] and probe.peak == 3 and probe.running == 0

    with anyio.fail_after(5):
        if entered:
            async with runtime:
                await scenario()
        else:
            await scenario()


async def _empty() -> dict[str, Any]:
    return {}


@pytest.mark.anyio
async def test_sub_lane_exclusive_children_never_overlap(
        cooperative: str, rt: ToolRuntime, probe: _Probe) -> None:
    """It runs exclusive child calls one at a time even when the program gathers them."""
    rt.register(_tool(probe, "write", safe=False))
    with anyio.fail_after(5):
        async with open_sub_lane(rt, outer_call=outer_call(rt, None)) as lane, \
                anyio.create_task_group() as group:
            for i in range(4):
                group.start_soon(_submit(lane, cooperative), "write", {"ms": 3, "tag": f"w{i}"})
    assert probe.peak == 1
    assert _tagged(probe, "body") == ["w0", "w1", "w2", "w3"]


@pytest.mark.anyio
async def test_sub_lane_cap_bounds_overlap(
        cooperative: str, probe: _Probe) -> None:
    """It keeps at most ``max_parallel_sub_calls`` child bodies running."""
    async with ToolRuntime(max_parallel_sub_calls=2) as runtime:
        runtime.register(_tool(probe, "sleep"))
        with anyio.fail_after(5):
            async with open_sub_lane(runtime, outer_call=outer_call(runtime, None)) as lane, \
                    anyio.create_task_group() as group:
                for i in range(7):
                    group.start_soon(_submit(lane, cooperative), "sleep", {"ms": 4, "tag": f"s{i}"})
            assert lane.peak_running == 2
    assert probe.peak == 2


@pytest.mark.anyio
async def test_sub_lane_close_abandons_queued_and_cancels_in_flight(
        cooperative: str, rt: ToolRuntime, probe: _Probe, agent: Agent) -> None:
    """It rejects queued calls as abandoned, aborts in-flight bodies and settles every started call once."""
    rt.register(_tool(probe, "write", safe=False))
    outcomes: dict[str, str] = {}
    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            async with open_sub_lane(rt, outer_call=outer_call(rt, agent)) as lane:
                async def call(tag: str) -> None:
                    try:
                        result = await _submit(lane, cooperative)("write", {"ms": 5000, "tag": tag})
                    except ToolError as exc:
                        outcomes[tag] = f"{exc.code}: {exc.message}"
                    else:
                        outcomes[tag] = f"result {result.code}"

                for tag in ("a", "b", "c"):
                    group.start_soon(call, tag)
                await _wait_for(lambda: probe.running == 1)
            with pytest.raises(AbortedBeforeDispatchError, match="write not dispatched"):
                await _submit(lane, cooperative)("write", {})
    assert outcomes["a"] == "ABORTED: run_code run is over (run_code settled); write result discarded"
    assert outcomes["b"] == ("ABORTED_BEFORE_DISPATCH: run_code run is over (run_code settled); "
                             "write tool call abandoned")
    assert outcomes["c"] == outcomes["b"]
    assert [e.type for e in agent.events] == ["tool/code-dispatch-start", "tool/code-dispatch"]
    assert agent.events[1].data["is_error"] is True
    assert lane.submitted == 3


@pytest.mark.anyio
async def test_sub_lane_follows_the_outer_cancellation(
        cooperative: str, rt: ToolRuntime, probe: _Probe) -> None:
    """It aborts children when the outer call's signal fires, with the outer reason."""
    rt.register(_tool(probe, "sleep"))
    source = CancelSource()
    outcomes: list[str] = []
    with anyio.fail_after(5):
        async with open_sub_lane(rt, outer_call=outer_call(rt, None), cancel=source.signal) as lane:
            async def call() -> None:
                try:
                    await _submit(lane, cooperative)("sleep", {"ms": 5000})
                except ToolError as exc:
                    outcomes.append(exc.message)

            async with anyio.create_task_group() as group:
                group.start_soon(call)
                await _wait_for(lambda: probe.running == 1)
                source.cancel("user stop")
    assert outcomes == ["run_code run is over (user stop); sleep result discarded"]


@pytest.mark.anyio
async def test_sub_lane_rejects_non_json_arguments_without_numbering(
        cooperative: str, rt: ToolRuntime, probe: _Probe) -> None:
    """It refuses arguments outside lossless JSON before dispatching or numbering anything."""
    rt.register(_tool(probe, "sleep"))
    with anyio.fail_after(5):
        async with open_sub_lane(rt, outer_call=outer_call(rt, None)) as lane:
            with pytest.raises(ToolArgsError, match="tool arguments must be lossless JSON"):
                await _submit(lane, cooperative)("sleep", {"ms": float("nan")})
            assert lane.submitted == 0
            result = await _submit(lane, cooperative)("sleep", {"tag": "ok"})
    assert result.value == {"tag": "ok"}
    assert lane.submitted == 1


@pytest.mark.anyio
async def test_sub_lane_without_agent_still_dispatches(
        cooperative: str, rt: ToolRuntime, probe: _Probe) -> None:
    """It runs child calls with no agent and appends no events."""
    rt.register(_tool(probe, "sleep"))
    with anyio.fail_after(5):
        async with open_sub_lane(rt, outer_call=outer_call(rt, None)) as lane:
            result = await _submit(lane, cooperative)("sleep", {"tag": "x"})
    assert result.value == {"tag": "x"}


@pytest.mark.anyio
async def test_sub_lane_drives_a_cooperative_call_in_the_callers_task(rt: ToolRuntime, agent: Agent) -> None:
    """An idle lane runs a cooperative call's stages in the submitting task: no driver, no hand-over."""
    tasks: list[Any] = []

    async def record(args: Any, ctx: Any) -> dict[str, Any]:
        tasks.append(anyio.get_current_task().id)
        return {"n": args["n"]}

    rt.register(define_tool(name="rec", description="records its task", parameters={"n": {"type": "integer"}},
                            output=ToolOutput(schema={"type": "object"}, render=_render), execute=record))
    with anyio.fail_after(5):
        async with open_sub_lane(rt, outer_call=outer_call(rt, agent)) as lane:
            values = [(await lane.submit("rec", {"n": n}, abandoned=CallAbandonment())).value["n"]
                      for n in range(3)]
            assert not lane._driving  # type: ignore[attr-defined]
    assert values == [0, 1, 2]
    assert tasks == [anyio.get_current_task().id] * 3
    assert [e.type for e in agent.events] == ["tool/code-dispatch-start", "tool/code-dispatch"] * 3


@pytest.mark.anyio
async def test_sub_lane_abandoning_a_cooperative_call_aborts_it_and_still_commits(
        rt: ToolRuntime, probe: _Probe, agent: Agent) -> None:
    """The abandonment cancels that call alone: its body is aborted, it commits, the next call runs."""
    rt.register(_tool(probe, "sleep"))
    abandonment = CallAbandonment()
    with anyio.fail_after(5):
        async with open_sub_lane(rt, outer_call=outer_call(rt, agent)) as lane, \
                anyio.create_task_group() as group:
            results: list[ToolResult] = []

            async def call() -> None:
                results.append(await lane.submit("sleep", {"ms": 5000, "tag": "a"}, abandoned=abandonment))

            group.start_soon(call)
            await _wait_for(lambda: probe.running == 1)
            abandonment.abandon("the program stopped waiting for the call")
            await _wait_for(lambda: bool(results))
            after = await lane.submit("sleep", {"tag": "b"}, abandoned=CallAbandonment())
    assert results[0].is_error and results[0].error is not None and results[0].error.code == "ABORTED"
    assert not after.is_error and after.value == {"tag": "b"}
    settles = agent.events.of_type("tool/code-dispatch")
    assert [e.data["is_error"] for e in settles] == [True, False]


@pytest.mark.anyio
async def test_sub_lane_later_calls_overlap_a_cooperative_call_and_commit_after_it(
        rt: ToolRuntime, probe: _Probe, agent: Agent) -> None:
    """Calls queued behind an inline call may run beside it but are delivered after it, in order."""
    rt.register(_tool(probe, "sleep"))
    _hook_order(rt, probe)
    order: list[str] = []

    async def deliver(lane: Any, spec: tuple[int, str, bool]) -> None:
        ms, tag, cooperative = spec
        order.append((await _submit(lane, cooperative)("sleep", {"ms": ms, "tag": tag})).value["tag"])

    async with open_sub_lane(rt, outer_call=outer_call(rt, agent)) as sub, anyio.create_task_group() as tg:
        tg.start_soon(deliver, sub, (60, "first", True))
        await _wait_for(lambda: probe.running == 1)
        for spec in ((5, "second", True), (5, "third", False)):
            tg.start_soon(deliver, sub, spec)
    assert order == ["first", "second", "third"]
    assert _tagged(probe, "done") == ["second", "third", "first"] and probe.peak == 3
    assert _tagged(probe, "post") == ["run-1:code:1", "run-1:code:2", "run-1:code:3"]


@pytest.fixture
def broken_finish(rt: ToolRuntime, probe: _Probe, monkeypatch: pytest.MonkeyPatch) -> None:
    """A runtime with a ``sleep`` tool whose finish stage breaks its invariant."""
    rt.register(_tool(probe, "sleep"))

    async def broken_finish(outcome: Any) -> ToolResult:
        raise RuntimeError("finish invariant broke")

    monkeypatch.setattr(rt.stages, "finish", broken_finish)


@pytest.mark.anyio
async def test_turn_internal_stage_failure_is_reraised(rt: ToolRuntime, broken_finish: None) -> None:
    """It re-raises a stage invariant failure instead of fabricating results."""
    with anyio.fail_after(5), pytest.raises(RuntimeError, match="finish invariant broke"):
        await execute_tool_calls(rt, _calls(("sleep", {}), ("sleep", {})))


@pytest.mark.anyio
async def test_sub_lane_internal_failure_leaves_no_caller_waiting(rt: ToolRuntime,
                                                                  broken_finish: None) -> None:
    """It settles every waiting program call and surfaces the failure when a stage breaks."""
    seen: list[str] = []
    with anyio.fail_after(5), pytest.raises(ExceptionGroup) as caught:
        async with open_sub_lane(rt, outer_call=outer_call(rt, None)) as lane, \
                anyio.create_task_group() as group:
            async def call() -> None:
                try:
                    await lane.submit("sleep", {"ms": 1})
                except ToolError as exc:
                    seen.append(exc.code)

            for _ in range(3):
                group.start_soon(call)
    assert caught.group_contains(RuntimeError, match="finish invariant broke")
    assert set(seen) <= {"TOOL_FAILED", "ABORTED_BEFORE_DISPATCH"}


@pytest.mark.anyio
async def test_sub_lane_internal_failure_of_an_inline_call_is_raised(rt: ToolRuntime,
                                                                     broken_finish: None) -> None:
    """A broken stage of a call driven in the caller's task stops the lane and surfaces on exit."""
    seen: list[str] = []
    with anyio.fail_after(5), pytest.raises(RuntimeError, match="finish invariant broke"):
        async with open_sub_lane(rt, outer_call=outer_call(rt, None)) as lane:
            try:
                await lane.submit("sleep", {"ms": 1}, abandoned=CallAbandonment())
            except ToolError as exc:
                seen.append(exc.code)
            assert not lane._driving  # type: ignore[attr-defined]
    assert seen == ["TOOL_FAILED"]


@pytest.mark.anyio
async def test_sub_lane_drains_when_its_enclosing_scope_is_cancelled(
        cooperative: str, rt: ToolRuntime, probe: _Probe, agent: Agent) -> None:
    """It commits and logs started children although the outer call arrives as a scope cancellation."""
    rt.register(_tool(probe, "sleep"))
    source = CancelSource()
    outcomes: list[str] = []

    async def call(lane: Any) -> None:
        try:
            await _submit(lane, cooperative)("sleep", {"ms": 5000})
        except ToolError as exc:  # (a cooperative caller is not cancelled: it gets the outcome)
            outcomes.append(exc.message)

    with anyio.fail_after(5):
        with anyio.CancelScope() as scope:  # what the pipeline wraps around a run_code body
            source.signal.attach_scope(scope)
            async with open_sub_lane(rt, outer_call=outer_call(rt, agent), cancel=source.signal) as lane, \
                    anyio.create_task_group() as group:
                group.start_soon(call, lane)
                await _wait_for(lambda: probe.running == 1)
                source.cancel("user stop")
                await anyio.sleep(5)  # cancelled right away by the scope
        assert scope.cancelled_caught
    discarded = "run_code run is over (user stop); sleep result discarded"
    assert outcomes == ([discarded] if cooperative != "plain" else [])
    assert [e.type for e in agent.events] == ["tool/code-dispatch-start", "tool/code-dispatch"]
    assert agent.events[1].data["is_error"] is True
    assert agent.events[1].data["content"] == [{"type": "text", "text": "Error: tool call aborted"}]


@pytest.mark.anyio
async def test_turn_a_slow_post_execute_delays_later_starts(probe: _Probe) -> None:
    """It finishes a call's commit (post-execute included) before starting the next call in a serial pool."""
    async with ToolRuntime(max_parallel_tool_calls=1) as runtime:
        runtime.register(_tool(probe, "sleep"))

        async def pre(call: Any, call_next: Callable[[], Awaitable[Any]]) -> Any:
            probe.log.append(f"pre:{call.call_id}")
            return await call_next()

        async def slow_post(call: Any, result: Any, call_next: Callable[[], Awaitable[Any]]) -> Any:
            await anyio.sleep(0.02)
            probe.log.append(f"post-end:{call.call_id}")
            return await call_next()

        runtime.on_pre_execute(pre)
        runtime.on_post_execute(slow_post)
        with anyio.fail_after(5):
            await execute_tool_calls(runtime, _calls(*[("sleep", {})] * 3))
    assert [e for e in probe.log if e.startswith(("pre", "post-end"))] == [
        "pre:c0", "post-end:c0", "pre:c1", "post-end:c1", "pre:c2", "post-end:c2"]


@settings(max_examples=15, deadline=None)
@given(plan=st.lists(st.tuples(st.sampled_from(["sleep", "write", "bad"]), st.integers(0, 3)),
                     min_size=1, max_size=8),
       cap=st.integers(min_value=1, max_value=4))
def test_turn_invariants_hold_for_any_batch(plan: list[tuple[str, int]], cap: int) -> None:
    """It keeps model order, pairs every call with one result, respects the cap and the barriers."""

    async def scenario() -> None:
        probe = _Probe()
        agent = Agent("prop")
        exclusive_overlaps: list[str] = []

        async def exclusive(args: Any, ctx: Any) -> dict[str, Any]:
            if probe.running:
                exclusive_overlaps.append(ctx.call_id)
            probe.running += 1
            await anyio.sleep(args.get("ms", 0) / 1000)
            if probe.running != 1:  # something started while the barrier ran
                exclusive_overlaps.append(ctx.call_id)
            probe.running -= 1
            return {"tag": args.get("tag", "")}

        async with ToolRuntime(max_parallel_tool_calls=cap) as runtime:
            runtime.register(_tool(probe, "sleep"))
            runtime.register(define_tool(name="write", description="exclusive", parameters={
                "ms": {"type": "integer"}, "tag": {"type": "string"}},
                output=ToolOutput(schema={"type": "object"}, render=_render), execute=exclusive))
            calls = [ToolCallRequest(f"c{i}", "sleep" if name == "bad" else name,
                                     "{oops" if name == "bad" else json.dumps({"ms": ms, "tag": f"c{i}"}))
                     for i, (name, ms) in enumerate(plan)]
            with anyio.fail_after(5):
                results = await execute_tool_calls(runtime, calls, agent=agent)
        for (name, _), result, call in zip(plan, results, calls, strict=True):
            if name == "bad":
                assert result.code == "INVALID_ARGS"
            else:
                assert result.value == {"tag": call.call_id}
        assert probe.peak <= cap
        assert exclusive_overlaps == []
        history = project_tool_history(agent.events)
        assert [h.call_id for h in history] == [c.call_id for c in calls]
        assert all(h.settled for h in history)

    anyio.run(scenario)
