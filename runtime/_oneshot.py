"""A single-use wake-up for the scheduler's hot path, lighter than ``anyio.Event``.

The ordered lane creates a few events per child call (its wake-up, a parked worker's, the call's
completion); ``anyio.Event`` looks up the async backend on creation and wraps an ``asyncio.Event`` that
keeps a waiter list, which is most of what a cheap call costs beyond the pipeline. A :class:`OneShot`
is set at most once and awaited by at most one task at a time: on asyncio it waits on one bare future,
elsewhere on an ``anyio.Event`` created only when somebody actually waits.

Unlike ``anyio.Event.wait``, waiting on a one-shot that is already set returns without a checkpoint:
the lane waits only when it has nothing to do, so there is nothing to yield to.
"""

from __future__ import annotations

import asyncio

import anyio

__all__ = ("OneShot",)


class OneShot:
    """Set once (later calls do nothing); :meth:`wait` returns once it is set. Cancellable."""

    __slots__ = ("_event", "_future", "_set")

    def __init__(self) -> None:
        self._set = False
        self._future: asyncio.Future[None] | None = None
        self._event: anyio.Event | None = None

    def is_set(self) -> bool:
        """Whether :meth:`set` was called."""
        return self._set

    def set(self) -> None:
        """Wake the waiter, if any (idempotent; callable from any callback on the loop's thread)."""
        if self._set:
            return
        self._set = True
        future = self._future
        if future is not None:
            if not future.done():
                future.set_result(None)
        elif self._event is not None:
            self._event.set()

    async def wait(self) -> None:
        """Return once set; an anyio cancellation of the waiter propagates as usual."""
        if self._set:
            return
        if self._future is not None:
            raise RuntimeError("a OneShot has one waiter at a time")
        loop = asyncio._get_running_loop()
        if loop is None:  # another backend (trio): the portable event
            if self._event is None:
                self._event = anyio.Event()
            await self._event.wait()
            return
        future = self._future = loop.create_future()
        try:
            await future
        finally:
            self._future = None
