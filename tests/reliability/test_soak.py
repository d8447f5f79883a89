"""Soak (CI size): 200 sequential runs on one runtime must not grow memory (issue 7).

``bench/reliability.py --soak 10000`` is the full soak; this runs the same loop at CI size and asserts
that neither the host process nor the sandbox's template grows past a bound from the post-warm-up
sample to the end. A leak of even one event log, result or frame buffer per run (5 KiB or more) would
cross the host bound at this size (1,000 runs measured 0.2 MiB of growth in all).
"""

from __future__ import annotations

import anyio
import pytest

from bench.reliability import soak

pytestmark = pytest.mark.anyio

RUNS = 200
HOST_GROWTH_BOUND = 1024 * 1024
TEMPLATE_GROWTH_BOUND = 512 * 1024


async def test_two_hundred_sequential_runs_do_not_grow_memory() -> None:
    """It keeps host and template RSS flat over 200 checked runs (every run's value is verified)."""
    with anyio.fail_after(50):
        found = await soak(RUNS, every=100, warmup=30)
    samples = found["samples"]
    assert [s["runs"] for s in samples] == [0, 0, 100, 200]
    assert found["host_growth"] <= HOST_GROWTH_BOUND, samples
    assert found["template_growth"] <= TEMPLATE_GROWTH_BOUND, samples
    assert found["within_bound"]
