"""The ordered lane and the two schedulers built on it (model turns and ``run_code`` child calls)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime._lane import EXCLUSIVE, NOTHING, PARALLEL, Footprint, OrderedLane


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
