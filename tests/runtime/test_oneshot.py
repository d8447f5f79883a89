"""The scheduler's one-shot wake-up: set once, one waiter, cancellable, on a bare future or anyio.Event."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import anyio
import anyio.lowlevel
import pytest

from codemode.runtime._oneshot import OneShot

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["future", "portable"])
def flavour(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Both implementations: the asyncio future, and the anyio.Event used where asyncio is not running."""
    if request.param == "portable":
        monkeypatch.setattr(asyncio, "_get_running_loop", lambda: None)
    yield request.param


async def test_a_waiter_wakes_when_set(flavour: str) -> None:
    """It wakes the task waiting on it, and only once it is set."""
    shot = OneShot()
    woke: list[bool] = []

    async def waiter() -> None:
        await shot.wait()
        woke.append(shot.is_set())

    async with anyio.create_task_group() as group:
        group.start_soon(waiter)
        for _ in range(5):
            await anyio.lowlevel.checkpoint()
        assert woke == [] and not shot.is_set()
        shot.set()
        shot.set()  # (idempotent)
    assert woke == [True]


async def test_waiting_on_a_set_one_returns_at_once(flavour: str) -> None:
    """It returns without waiting when already set, however often it is awaited."""
    shot = OneShot()
    shot.set()
    with anyio.fail_after(1):
        await shot.wait()
        await shot.wait()
    assert shot.is_set()


async def test_a_waiter_can_be_cancelled_and_wait_again(flavour: str) -> None:
    """A cancelled wait propagates the cancellation and leaves the one-shot usable."""
    shot = OneShot()
    with anyio.move_on_after(0.05) as scope:
        await shot.wait()
    assert scope.cancelled_caught and not shot.is_set()
    async with anyio.create_task_group() as group:
        group.start_soon(shot.wait)
        await anyio.lowlevel.checkpoint()
        shot.set()


async def test_a_second_concurrent_waiter_is_refused() -> None:
    """It has one waiter at a time: a second one raises instead of silently never waking."""
    shot = OneShot()
    async with anyio.create_task_group() as group:
        group.start_soon(shot.wait)
        await anyio.lowlevel.checkpoint()
        with pytest.raises(RuntimeError, match="one waiter"):
            await shot.wait()
        shot.set()
