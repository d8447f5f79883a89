"""Frames from one worker's channel, for the host: a reader per run.

The host reads a worker's channel for the whole of a run, one small frame at a time, and on the hot
path of a child call (call frame in, reply out) the cost of *waiting* for a frame matters as much as the
cost of decoding it. On asyncio the reader registers the channel with the event loop once per run and
a readability callback decodes and parses what arrives; it offers each frame to the run's ``take_now``
hook first (which hands a call straight to an idle server task), and only the rest wakes the run's pump.
Elsewhere it falls back to ``anyio.wait_readable`` per read (correct on every backend, slower: it
registers and unregisters the descriptor around every wait).

Both readers apply the frame budget through :class:`~codemode.sandbox.protocol.FrameDecoder` and stop reading
while :data:`_BACKLOG` decoded frames wait for the pump, so a worker that floods its channel is held
back by the socket buffer instead of filling the host's memory. They also stop while the frames they
handed out and that are not done with hold a frame budget of bytes or more: a frame is done with when
the pump takes it, except a ``call`` frame, which is held until the run calls :meth:`FrameReader.release`
after serving it. So a program that starts many calls with large arguments at once (``gather`` over
16 MiB payloads) costs the host about two frame budgets of frames, not one per call.
"""

from __future__ import annotations

import asyncio
import socket
from collections import deque
from collections.abc import Callable
from typing import Final, Protocol

import anyio

from .protocol import CallFrame, FrameDecoder, ProtocolViolation, WorkerFrame, parse_worker_frame

__all__ = ("FrameReader", "open_reader")

_RECV_CHUNK: Final = 1 << 16
_FIRST_CHUNK: Final = 1 << 12
#: Decoded frames the reader holds before it stops reading the socket (back pressure).
_BACKLOG: Final = 64


TakeNow = Callable[[WorkerFrame], bool]


class FrameReader(Protocol):
    """The parsed frames of one run, in order (except those ``take_now`` took as they arrived)."""

    async def next_frame(self) -> WorkerFrame | None:
        """The next frame, or ``None`` once the worker closed its end; raise ProtocolViolation."""
        ...

    def release(self, frame: CallFrame) -> None:
        """The run is done with a call frame it was handed (served, ignored or abandoned)."""
        ...

    def stop(self) -> None:
        """Take no more frames, cheaply (the run is over but its channel stays open a while).

        Whatever the worker sends afterwards stays in the socket's kernel buffer, which bounds it;
        :meth:`close` still has to be called.
        """
        ...

    def close(self) -> None:
        """Stop reading (idempotent); the socket itself stays open."""
        ...


def open_reader(sock: socket.socket, decoder: FrameDecoder, take_now: TakeNow, *,
                portable: bool = False) -> FrameReader:
    """A reader for ``sock``: the event-loop callback reader on asyncio, else the portable one.

    ``take_now(frame)`` runs synchronously as a frame arrives, only while no earlier frame is waiting
    for the pump, and returns True if it consumed it; it must not raise (the portable reader calls it
    too, so both behave alike).
    """
    if not portable and _on_asyncio():
        return _LoopReader(sock, decoder, take_now)
    return _PortableReader(sock, decoder, take_now)


def _on_asyncio() -> bool:
    try:
        return asyncio.current_task() is not None
    except RuntimeError:  # no running asyncio loop: another backend
        return False


class _PortableReader:
    __slots__ = ("_bodies", "_decoder", "_held", "_released", "_sock", "_take_now")

    def __init__(self, sock: socket.socket, decoder: FrameDecoder, take_now: TakeNow) -> None:
        self._sock = sock
        self._decoder = decoder
        self._take_now = take_now
        self._bodies: deque[bytes] = deque()
        self._held = 0
        self._released: anyio.Event | None = None

    def release(self, frame: CallFrame) -> None:
        self._held -= frame.size
        if self._released is not None:
            self._released.set()

    async def next_frame(self) -> WorkerFrame | None:
        while True:
            while self._bodies:
                frame = parse_worker_frame(self._bodies.popleft())
                if type(frame) is CallFrame:
                    self._held += frame.size
                if not self._take_now(frame):
                    return frame
            while self._held >= self._decoder.max_frame_bytes:
                self._released = anyio.Event()
                await self._released.wait()
            try:
                data = self._sock.recv(_RECV_CHUNK)
            except BlockingIOError:
                await anyio.wait_readable(self._sock)
                continue
            except OSError:
                data = b""
            if not data:
                return None
            self._bodies.extend(self._decoder.feed(data))

    def stop(self) -> None:
        pass  # (it reads only when next_frame is awaited)

    def close(self) -> None:
        pass


class _LoopReader:
    """Reads in a readability callback registered once; the pump awaits a future only when idle."""

    __slots__ = ("_buffer", "_decoder", "_eof", "_error", "_fd", "_frames", "_held", "_limit", "_loop",
                 "_reading", "_sock", "_stopped", "_take_now", "_view", "_waiter")

    def __init__(self, sock: socket.socket, decoder: FrameDecoder, take_now: TakeNow) -> None:
        self._sock = sock
        self._decoder = decoder
        self._take_now = take_now
        self._loop = asyncio.get_running_loop()
        self._fd = sock.fileno()
        self._frames: deque[tuple[WorkerFrame, int]] = deque()  # (frame, its body's bytes)
        #: Bytes of the frames handed out or queued that the run is not done with (see the module doc).
        self._held = 0
        self._limit = decoder.max_frame_bytes
        # One receive buffer per run (``recv(n)`` would allocate n bytes per call), small until a read
        # fills it: most runs exchange a few short frames.
        self._buffer = bytearray(_FIRST_CHUNK)
        self._view = memoryview(self._buffer)
        self._eof = False
        self._error: ProtocolViolation | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._reading = False
        self._stopped = False
        self._resume()

    def _resume(self) -> None:
        if not self._reading and not self._eof and self._error is None:
            self._loop.add_reader(self._fd, self._on_readable)
            self._reading = True

    def release(self, frame: CallFrame) -> None:
        self._held -= frame.size
        if (not self._reading and self._held < self._limit and len(self._frames) < _BACKLOG // 2
                and not self._stopped):
            self._resume()

    def _pause(self) -> None:
        if self._reading:
            self._loop.remove_reader(self._fd)
            self._reading = False

    def stop(self) -> None:
        # (no remove_reader here: that costs a system call on the run's way out; the callback
        # unregisters itself if the worker sends anything more)
        self._stopped = True

    def _on_readable(self) -> None:
        if self._stopped:
            self._pause()
            return
        try:
            size = self._sock.recv_into(self._view)
        except BlockingIOError:
            return
        except OSError:
            size = 0
        data = self._buffer[:size]
        if size == len(self._buffer) < _RECV_CHUNK:
            self._view.release()
            self._buffer = bytearray(_RECV_CHUNK)
            self._view = memoryview(self._buffer)
        if not data:
            self._eof = True
            self._pause()
        else:
            try:
                for body in self._decoder.feed(data):
                    frame = parse_worker_frame(body)
                    self._held += len(body)
                    # (only with nothing queued ahead: frames are acted on in the order sent)
                    if self._frames or not self._take_now(frame):
                        self._frames.append((frame, len(body)))
            except ProtocolViolation as exc:
                self._error = exc
                self._pause()
            if len(self._frames) >= _BACKLOG or self._held >= self._limit:
                self._pause()
        waiter = self._waiter
        if waiter is not None and not waiter.done() and (self._frames or self._eof or self._error):
            waiter.set_result(None)

    async def next_frame(self) -> WorkerFrame | None:
        while not self._frames:
            if self._error is not None:
                raise self._error
            if self._eof:
                return None
            if self._held < self._limit:  # (else a release resumes reading)
                self._resume()
            waiter = self._waiter = self._loop.create_future()
            try:
                await waiter
            finally:
                self._waiter = None
        frame, size = self._frames.popleft()
        if type(frame) is not CallFrame:
            self._held -= size
        if not self._reading and len(self._frames) < _BACKLOG // 2 and self._held < self._limit:
            self._resume()
        return frame

    def close(self) -> None:
        self._pause()
        self._eof = True
        self._view.release()
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)  # a pump still waiting sees the end of the stream
