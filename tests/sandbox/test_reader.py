"""The host's per-run frame reader: order, end of stream, violations, the take-now hook, back pressure."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator

import anyio
import anyio.lowlevel
import pytest

from codemode.sandbox._reader import _BACKLOG, open_reader
from codemode.sandbox.protocol import (
    HEADER,
    CallFrame,
    DoneFrame,
    FrameDecoder,
    LogFrame,
    ProtocolViolation,
    WorkerFrame,
    encode_frame,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def channel() -> Iterator[tuple[socket.socket, socket.socket]]:
    host, worker = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    host.setblocking(False)
    yield host, worker
    host.close()
    worker.close()


def _log(i: int) -> bytes:
    return encode_frame({"type": "log", "text": f"line {i}"})


def _never(frame: WorkerFrame) -> bool:
    return False


@pytest.fixture(params=[False, True], ids=["loop", "portable"])
def portable(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


async def test_frames_arrive_parsed_in_order_then_end(channel: tuple[socket.socket, socket.socket],
                                                      portable: bool) -> None:
    host, worker = channel
    reader = open_reader(host, FrameDecoder(1 << 16), _never, portable=portable)
    data = b"".join(_log(i) for i in range(5))
    worker.sendall(data[:7])  # a frame split across reads
    worker.sendall(data[7:])
    worker.shutdown(socket.SHUT_WR)
    with anyio.fail_after(5):
        frames = [await reader.next_frame() for _ in range(6)]
    reader.close()
    assert frames[:5] == [LogFrame(text=f"line {i}", truncated=False) for i in range(5)]
    assert frames[5] is None


async def test_a_violation_comes_after_the_good_frames_before_it(
        channel: tuple[socket.socket, socket.socket], portable: bool) -> None:
    host, worker = channel
    reader = open_reader(host, FrameDecoder(1 << 16), _never, portable=portable)
    worker.sendall(_log(1) + HEADER.pack(2) + b"[]")
    with anyio.fail_after(5):
        assert await reader.next_frame() == LogFrame(text="line 1", truncated=False)
        with pytest.raises(ProtocolViolation, match="JSON object"):
            await reader.next_frame()
    reader.close()


async def test_an_oversized_header_is_refused_before_its_body(
        channel: tuple[socket.socket, socket.socket], portable: bool) -> None:
    host, worker = channel
    reader = open_reader(host, FrameDecoder(100), _never, portable=portable)
    worker.sendall(HEADER.pack(10_000))
    with anyio.fail_after(5), pytest.raises(ProtocolViolation, match="frame budget"):
        await reader.next_frame()
    reader.close()


async def test_take_now_consumes_frames_as_they_arrive(channel: tuple[socket.socket, socket.socket],
                                                       portable: bool) -> None:
    host, worker = channel
    taken: list[WorkerFrame] = []

    def take_calls(frame: WorkerFrame) -> bool:
        if isinstance(frame, CallFrame):
            taken.append(frame)
            return True
        return False

    reader = open_reader(host, FrameDecoder(1 << 16), take_calls, portable=portable)
    worker.sendall(encode_frame({"type": "call", "id": 7, "name": "echo", "args": {}}))
    with anyio.fail_after(5):
        while not taken:
            await anyio.lowlevel.checkpoint()
            if portable:
                worker.sendall(_log(0))
                assert await reader.next_frame() == LogFrame("line 0", False)
        worker.sendall(_log(1))
        worker.shutdown(socket.SHUT_WR)
        rest = [await reader.next_frame() for _ in range(2)]
    reader.close()
    assert taken == [CallFrame(id=7, name="echo", args={})]
    assert rest == [LogFrame("line 1", False), None]


async def test_a_call_never_overtakes_a_frame_sent_before_it(
        channel: tuple[socket.socket, socket.socket]) -> None:
    """It offers a frame to take_now only with nothing queued ahead: a call after ``done`` waits."""
    host, worker = channel
    taken: list[WorkerFrame] = []

    def take_calls(frame: WorkerFrame) -> bool:
        taken.append(frame)
        return isinstance(frame, CallFrame)

    reader = open_reader(host, FrameDecoder(1 << 16), take_calls)
    worker.sendall(encode_frame({"type": "done", "has_value": True, "value": 1})
                   + encode_frame({"type": "call", "id": 8, "name": "echo", "args": {}}))
    with anyio.fail_after(5):
        first = await reader.next_frame()
        second = await reader.next_frame()
    reader.close()
    assert isinstance(first, DoneFrame) and second == CallFrame(id=8, name="echo", args={})
    assert [type(frame) for frame in taken] == [DoneFrame]  # the call was never offered


async def test_a_flood_is_held_back_by_the_socket_not_buffered(
        channel: tuple[socket.socket, socket.socket]) -> None:
    """The loop reader stops reading once its backlog is full, and resumes as the pump drains it."""
    host, worker = channel
    worker.setblocking(False)
    reader = open_reader(host, FrameDecoder(1 << 16), _never)
    frames_sent, blocked = 0, False
    with anyio.fail_after(20):
        for _ in range(200_000):
            try:
                worker.send(_log(frames_sent))  # small frames: each send is all or nothing
            except BlockingIOError:
                blocked = True
                break
            frames_sent += 1
            if frames_sent % 64 == 0:
                await anyio.lowlevel.checkpoint()  # let the reader's callback run
        assert blocked  # the host stopped reading, so the worker's sends block
        backlog = len(reader._frames)  # type: ignore[attr-defined]
        assert _BACKLOG <= backlog < frames_sent  # bounded by one socket read, not by the flood
        received = [await reader.next_frame() for _ in range(frames_sent)]
    reader.close()
    texts = [frame.text for frame in received if isinstance(frame, LogFrame)]
    assert texts == [f"line {i}" for i in range(frames_sent)]


async def test_closing_the_reader_ends_a_waiting_pump_and_forgets_the_descriptor(
        channel: tuple[socket.socket, socket.socket]) -> None:
    """It wakes a pump waiting for a frame with the end of the stream and unregisters its descriptor."""
    host, _ = channel
    reader = open_reader(host, FrameDecoder(1 << 16), _never)
    got: list[WorkerFrame | None] = []

    async def pump() -> None:
        got.append(await reader.next_frame())

    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(pump)
            await anyio.lowlevel.checkpoint()
            reader.close()  # what WorkerHandle.close_channel does before it closes the socket
    assert got == [None]
    assert not asyncio.get_running_loop().remove_reader(host.fileno())  # nothing left registered


async def test_a_stopped_reader_takes_nothing_more_and_unregisters_on_the_next_frame(
        channel: tuple[socket.socket, socket.socket]) -> None:
    """After stop(), what the worker sends stays in the socket: nothing is read, parsed or taken, and
    the descriptor is dropped from the event loop the first time it turns readable."""
    host, worker = channel
    taken: list[WorkerFrame] = []

    def take(frame: WorkerFrame) -> bool:
        taken.append(frame)
        return True

    reader = open_reader(host, FrameDecoder(1 << 16), take)
    reader.stop()
    worker.sendall(b"".join(_log(i) for i in range(100)))
    with anyio.fail_after(5):
        for _ in range(5):
            await anyio.lowlevel.checkpoint()
    assert taken == [] and len(reader._frames) == 0  # type: ignore[attr-defined]
    assert not asyncio.get_running_loop().remove_reader(host.fileno())  # (it unregistered itself)
    assert len(host.recv(1 << 20)) == len(b"".join(_log(i) for i in range(100)))  # all still queued
    reader.close()
