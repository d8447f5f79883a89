"""Cancellation signals: firing, callbacks, fused signals, anyio scope bridging."""

from __future__ import annotations

import anyio
import anyio.lowlevel
import pytest

from codemode.runtime import NEVER, CancelSignal, CancelSource
from codemode.runtime.cancel import removal

pytestmark = pytest.mark.anyio


def test_cancel_fires_once_and_keeps_the_first_reason() -> None:
    """It records the first reason and runs callbacks exactly once."""
    source = CancelSource()
    seen: list[str] = []
    source.signal.on_cancel(seen.append)
    assert not source.signal.cancelled and source.signal.reason is None
    source.cancel("first")
    source.cancel("second")
    assert (source.signal.cancelled, source.signal.reason, seen) == (True, "first", ["first"])
    late: list[str] = []
    source.signal.on_cancel(late.append)
    assert late == ["first"]


def test_callback_disposer_and_failing_callbacks() -> None:
    """It removes disposed callbacks and keeps running the others when one raises."""
    source = CancelSource()
    seen: list[str] = []
    dispose = source.signal.on_cancel(lambda r: seen.append("removed"))
    source.signal.on_cancel(lambda r: 1 / 0)
    source.signal.on_cancel(lambda r: seen.append("kept"))
    dispose()
    dispose()
    source.cancel()
    assert seen == ["kept"]


def test_any_of_fuses_and_detaches() -> None:
    """It fires a fused signal with the firing input's reason and releases inputs on detach."""
    a, b = CancelSource(), CancelSource()
    assert CancelSignal.any_of(a.signal, None, NEVER) is a.signal
    assert CancelSignal.any_of(None, NEVER) is NEVER
    fused = CancelSignal.any_of(a.signal, b.signal)
    b.cancel("deadline")
    assert (fused.cancelled, fused.reason) == (True, "deadline")
    other = CancelSignal.any_of(a.signal, b.signal)
    assert other.cancelled
    c, d = CancelSource(), CancelSource()
    detached = CancelSignal.any_of(c.signal, d.signal)
    detached.detach()
    c.cancel()
    assert not detached.cancelled
    assert c.signal._callbacks is None


def test_never_cannot_fire() -> None:
    """It refuses to cancel the shared NEVER signal."""
    with pytest.raises(TypeError):
        NEVER._fire("x")
    assert NEVER.on_cancel(print)() is None


async def test_wait_and_attached_scope() -> None:
    """It wakes waiters and cancels attached anyio scopes."""
    source = CancelSource()
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(source.signal.wait)
            await anyio.lowlevel.checkpoint()
            source.cancel("go")
        with anyio.CancelScope() as scope:
            CancelSource().signal.attach_scope(scope)
            source.signal.attach_scope(scope)
            await anyio.sleep(5)
        assert scope.cancelled_caught
        await source.signal.wait()


@pytest.mark.parametrize("round_", [1, 2])
async def test_never_wait_blocks_on_every_event_loop(round_: int) -> None:
    """It lets NEVER.wait() be awaited on any event loop (no loop-bound state is cached)."""
    with anyio.move_on_after(0.01) as scope:
        await NEVER.wait()
    assert scope.cancelled_caught


def test_removal_removes_that_very_entry_once() -> None:
    """The disposer removes the entry it was made for (by identity, not an equal one), runs ``then``
    once, and does nothing when called again or when the entry is already gone."""
    first, second = [1], [1]
    items = [first, second]
    calls: list[str] = []
    dispose = removal(items, second, lambda: calls.append("then"))
    dispose()
    dispose()
    assert items == [first] and items[0] is first and calls == ["then"]
    gone = removal(items, [1], lambda: calls.append("again"))
    gone()
    assert items == [first] and calls == ["then"]
