"""RaySandbox on a two-node Ray cluster (``ray.cluster_utils.Cluster``): one actor per node, runs placed by
load over both, and a node that leaves the cluster under its runs.

The sandbox connects by ``address=`` (it owns that connection and closes it).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import anyio
import pytest
from ray.cluster_utils import Cluster

from codemode.sandbox import RunResult
from codemode.sandbox.ray import RaySandbox
from tests.reliability._support import wait_until
from tests.sandbox._ray_support import CALLS, run

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    """A head node and one worker node, one CPU each; failed nodes are noticed within about a second."""
    config = {"health_check_period_ms": 200, "health_check_failure_threshold": 3,
              "health_check_initial_delay_ms": 0}
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False,
                                                            "_system_config": config})
    try:
        cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes(timeout=120)
        yield cluster
    finally:
        cluster.shutdown()


@pytest.fixture(scope="module")
async def remote(cluster: Cluster) -> AsyncIterator[RaySandbox]:
    async with RaySandbox(address=cluster.address, warm=1) as box:
        yield box


async def _many(box: RaySandbox, count: int) -> dict[int, RunResult]:
    results: dict[int, RunResult] = {}

    async def one(k: int) -> None:
        results[k] = await run(box, CALLS.replace("return total", f"return total + {k}"), wall=60.0)

    async with anyio.create_task_group() as group:
        for k in range(count):
            group.start_soon(one, k)
    return results


async def test_one_actor_runs_on_each_node_and_runs_spread_over_both(remote: RaySandbox,
                                                                       cluster: Cluster) -> None:
    """It starts an actor on each node and places 20 concurrent programs over both, by load."""
    nodes = {node.node_id for node in cluster.list_all_nodes()}
    before = [actor.runs for actor in remote.actors()]
    with anyio.fail_after(90):
        results = await _many(remote, 20)
    placed = [actor.runs - was for actor, was in zip(remote.actors(), before, strict=True)]
    assert {actor.node_id for actor in remote.actors()} == nodes
    assert {k: r.value for k, r in results.items()} == {k: 90 + k for k in range(20)}
    assert sum(placed) == 20 and min(placed) >= 5


async def test_a_node_that_leaves_fails_its_runs_and_the_rest_go_on(remote: RaySandbox,
                                                                     cluster: Cluster) -> None:
    """It fails the runs on a removed node's actor with ``worker-exit``, replaces that actor on the node that
    is left, and runs the next programs."""
    worker_node = cluster.list_all_nodes()[1]
    doomed = next(actor for actor in remote.actors() if actor.node_id == worker_node.node_id)
    results: list[RunResult] = []

    started: list[str] = []

    async def blocked() -> None:
        results.append(await run(remote, "print('on a node')\nawait tools.hang({})", wall=60.0,
                                 on_log=started.append))

    with anyio.fail_after(120):
        async with anyio.create_task_group() as group:
            for _ in range(4):
                group.start_soon(blocked)
            assert await wait_until(lambda: len(started) == 4, 30)  # (each reached its worker)
            on_doomed = remote.actors()[doomed.index].in_flight
            cluster.remove_node(worker_node)
            assert await wait_until(lambda: len(results) >= on_doomed, 60)
            group.cancel_scope.cancel()  # (the runs on the head node would wait for their tool forever)
        after = await _many(remote, 6)
        assert await wait_until(lambda: all(actor.alive for actor in remote.actors()), 60)
    assert on_doomed >= 1
    assert [r.error.kind if r.error else None for r in results] == ["worker-exit"] * on_doomed
    assert {k: r.value for k, r in after.items()} == {k: 90 + k for k in range(6)}
    head = cluster.head_node.node_id
    assert all(actor.node_id == head for actor in remote.actors())  # (the replacement moved to the head)
