"""Host-side process control: the template process and handles on the workers it forks.

:class:`TemplateProcess` starts ``python -I`` (the host's interpreter) running
:mod:`codemode.sandbox._template`, keeps its control socket and turns the template's messages into per-worker
events. :class:`WorkerHandle` is the host's view of one worker: its pid, the host end of its protocol channel
and, once the template has reaped it, its wait status and CPU time. Killing goes through the template (which
alone reaps, so the pid cannot have been reused); if the template itself is gone the host signals the group
directly.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Final

import anyio
import anyio.abc

from ._isolate import check_required
from ._template import sweep_workdirs
from .errors import SandboxStartError
from .protocol import WAKE_FRAME, FrameDecoder, ProtocolViolation, ReadyFrame, parse_worker_frame

if TYPE_CHECKING:
    from ._reader import FrameReader

__all__ = (
    "DEFAULT_EXECUTOR",
    "TemplateProcess",
    "WorkerHandle",
)

DEFAULT_EXECUTOR: Final = "codemode.sandbox.interpreter"
_MAX_MESSAGE: Final = 1 << 16
_START_TIMEOUT: Final = 30.0
_READY_TIMEOUT: Final = 10.0
_READY_FRAME_BYTES: Final = 1 << 16
_CLOCK_TICKS: Final = os.sysconf("SC_CLK_TCK")

#: The template's entry point. It registers ``codemode`` and ``codemode.sandbox`` as bare packages
#: found at the directories the host passes (never through ``sys.path``, so a module of the same name
#: in a working directory cannot stand in for them) instead of running their ``__init__``: the template
#: - and so every worker - holds only the modules a worker runs, never the host-side API (anyio, the
#: pool).
_BOOTSTRAP: Final = """\
import json, sys, types
sys.path[:] = json.loads(sys.argv[3])
for name, path in json.loads(sys.argv[4]):
    package = types.ModuleType(name)
    package.__path__ = [path]
    package.__file__ = None
    sys.modules[name] = package
    if "." in name:
        parent, _, child = name.rpartition(".")
        setattr(sys.modules[parent], child, package)
from codemode.sandbox._template import main
main(sys.argv[1:3] + sys.argv[5:6])
"""


def _package_dirs() -> str:
    """``[[name, directory], ...]`` of this package and its parent, for the template's bootstrap."""
    sandbox = sys.modules[__package__ or "codemode.sandbox"]
    parent_name = sandbox.__name__.rpartition(".")[0]
    parent = sys.modules[parent_name]
    return json.dumps([[parent_name, next(iter(parent.__path__))],
                       [sandbox.__name__, next(iter(sandbox.__path__))]])


class WorkerHandle:
    """The host's handle on one worker process."""

    def __init__(self, template: TemplateProcess, pid: int, channel: socket.socket) -> None:
        self.template = template
        self.pid = pid
        self.channel = channel
        self.layers: tuple[str, ...] = ()
        self.exited = anyio.Event()
        self.status: int | None = None
        self.cpu_seconds: float | None = None
        self.killed = False
        self._cpu_mark: float | None = None
        #: The reader of the run in progress; closed before the channel is (see close_channel).
        self.reader: FrameReader | None = None

    def cpu_now(self) -> float | None:
        """CPU seconds (user + system) the worker has used so far, from /proc; None if unreadable."""
        try:
            with open(f"/proc/{self.pid}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS
        except (OSError, IndexError, ValueError):
            return None

    def take_cpu_mark(self) -> float | None:
        """The CPU time sampled when the worker got ready (once), else the CPU time now."""
        mark, self._cpu_mark = self._cpu_mark, None
        return mark if mark is not None else self.cpu_now()

    @property
    def alive(self) -> bool:
        """False once the worker was killed or reaped."""
        return not self.killed and not self.exited.is_set()

    def _set_exited(self, status: int, cpu: float) -> None:
        # The channel stays open: a run may still have to read the frames the worker sent before it
        # exited. Whoever owns the worker closes it (close_channel).
        self.status = status
        self.cpu_seconds = cpu
        self.exited.set()

    def wake(self) -> bool:
        """Send the ``wake`` frame without waiting; False if it went out only in part.

        A worker waiting between runs reads and ignores it, which wakes its CPU ahead of the run. A
        partial send (never seen: the channel is empty between runs) leaves the channel without its
        framing, so the caller must give the worker up. A worker that is gone counts as woken: its
        next run finds out.
        """
        try:
            return self.channel.send(WAKE_FRAME) == len(WAKE_FRAME)
        except OSError:
            return True

    def close_channel(self) -> None:
        """Close the host end of the protocol channel (idempotent).

        A run's reader is stopped first: the event loop must forget the descriptor before its number
        can be reused by another socket.
        """
        self.close_reader()
        self.template._open_channels.discard(self)
        _notify_closing(self.channel)
        with contextlib.suppress(OSError):
            self.channel.close()

    def close_reader(self) -> None:
        """Stop the reader of the last run, if any (idempotent; the channel stays open)."""
        reader, self.reader = self.reader, None
        if reader is not None:
            reader.close()

    async def wait_ready(self) -> None:
        """Read the worker's ``ready`` frame (its layers); raise SandboxStartError if it never comes."""
        decoder = FrameDecoder(_READY_FRAME_BYTES)
        with anyio.move_on_after(_READY_TIMEOUT):
            while True:
                try:
                    await anyio.wait_readable(self.channel)
                except anyio.ClosedResourceError:
                    raise SandboxStartError("the worker's channel was closed during its start") from None
                try:
                    data = self.channel.recv(_READY_FRAME_BYTES)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if not data:
                    raise SandboxStartError("the worker exited during its start")
                try:
                    bodies = decoder.feed(data)
                    if bodies:
                        frame = parse_worker_frame(bodies[0])
                        if not isinstance(frame, ReadyFrame) or len(bodies) > 1:
                            raise ProtocolViolation("expected exactly one ready frame")
                        self.layers = frame.layers
                        self._cpu_mark = self.cpu_now()
                        return
                except ProtocolViolation as exc:
                    raise SandboxStartError(f"the worker's start handshake was malformed: {exc}") from None
        raise SandboxStartError(f"the worker did not get ready within {_READY_TIMEOUT:g} s")

    async def kill(self) -> None:
        """SIGKILL the worker's process group (idempotent)."""
        if self.exited.is_set():
            return
        self.killed = True
        await self.template.kill(self.pid)

    async def kill_and_reap(self, grace: float = 5.0) -> None:
        """Kill the worker and wait until the template has reaped it (shield this in cleanup).

        Once the template is closing nobody will report the exit, so there is nothing to wait for: the
        template kills every worker's group as it goes.
        """
        await self.kill()
        if not self.template.closing:
            with anyio.move_on_after(grace):
                await self.exited.wait()
        self.close_channel()


class TemplateProcess:
    """The running template and its control socket."""

    def __init__(self, executor: str = DEFAULT_EXECUTOR, layers: Iterable[str] | None = None) -> None:
        self.executor = executor
        #: The template-level layers to attempt (``None``: all of them).
        self.template_layers = None if layers is None else sorted(layers)
        #: Layers every worker must report; one without them is killed and its spawn fails.
        self.required: frozenset[str] = frozenset()
        self.process: anyio.abc.Process | None = None
        self.control: socket.socket | None = None
        self.pid: int | None = None
        self._workers: dict[int, WorkerHandle] = {}
        self._open_channels: set[WorkerHandle] = set()
        self._spawns: dict[int, tuple[anyio.Event, list[Any]]] = {}
        self._next_spawn = 0
        self._send_lock = anyio.Lock()
        self._closed = False

    @property
    def running(self) -> bool:
        """True while the template's control socket is open."""
        return self.control is not None and not self._closed

    @property
    def live_workers(self) -> list[WorkerHandle]:
        """Workers that have not been reaped yet."""
        return [w for w in self._workers.values() if not w.exited.is_set()]

    async def start(self, task_group: anyio.abc.TaskGroup) -> None:
        """Start the template and wait for its hello; raise SandboxStartError on any failure."""
        host_end, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            command = [sys.executable, "-I", "-c", _BOOTSTRAP, str(child_end.fileno()), self.executor,
                       json.dumps([p for p in sys.path if isinstance(p, str)]), _package_dirs()]
            if self.template_layers is not None:
                command.append(json.dumps(self.template_layers))
            self.process = await anyio.open_process(
                command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, pass_fds=(child_end.fileno(),), env={}, cwd="/")
        except OSError as exc:
            host_end.close()
            raise SandboxStartError(f"cannot start the sandbox template: {exc}") from exc
        finally:
            child_end.close()
        host_end.setblocking(False)
        self.control = host_end
        with anyio.move_on_after(_START_TIMEOUT):
            hello = await self._receive()
            if hello is None or "error" in hello or type(hello.get("pid")) is not int:
                detail = hello.get("error") if hello else "it exited"
                await self.aclose()
                raise SandboxStartError(f"the sandbox template failed to start: {detail}")
            self.pid = hello["pid"]
            task_group.start_soon(self._read_loop)
            return
        await self.aclose()
        raise SandboxStartError(f"the sandbox template did not start within {_START_TIMEOUT:g} s")

    async def _receive(self) -> dict[str, Any] | None:
        assert self.control is not None
        while True:
            try:
                data = self.control.recv(_MAX_MESSAGE)
            except BlockingIOError:
                try:
                    await anyio.wait_readable(self.control)
                except anyio.ClosedResourceError:  # aclose closed the socket under the wait
                    return None
                continue
            except OSError:
                return None
            if not data:
                return None
            try:
                message = json.loads(data)
            except ValueError:
                continue
            if isinstance(message, dict):
                return message

    async def _read_loop(self) -> None:
        while True:
            message = await self._receive()
            if message is None:
                self._template_gone()
                return
            op = message.get("op")
            if op == "spawned":
                waiter = self._spawns.pop(message.get("id"), None)  # type: ignore[arg-type]
                if waiter is not None:
                    waiter[1].append(message)
                    waiter[0].set()
            elif op == "exited":
                handle = self._workers.pop(message.get("pid"), None)  # type: ignore[arg-type]
                if handle is not None:
                    handle._set_exited(int(message.get("status", 0)), float(message.get("cpu", 0.0)))

    def _template_gone(self) -> None:
        """The control socket closed: the template died. Kill what it leaves behind, fail waiters."""
        self._closed = True
        for handle in list(self._workers.values()):
            with contextlib.suppress(OSError):
                os.killpg(handle.pid, signal.SIGKILL)
            handle._set_exited(signal.SIGKILL, 0.0)
        self._workers.clear()
        for event, _ in self._spawns.values():
            event.set()
        self._spawns.clear()

    async def _send(self, message: dict[str, Any], fds: Iterable[int] = ()) -> None:
        if self.control is None or self._closed:
            raise SandboxStartError("the sandbox template is not running")
        data = json.dumps(message).encode()
        async with self._send_lock:
            while True:
                try:
                    socket.send_fds(self.control, [data], list(fds))
                    return
                except BlockingIOError:
                    await anyio.wait_writable(self.control)
                except OSError as exc:
                    raise SandboxStartError(f"the sandbox template is gone: {exc}") from None

    async def spawn(self, layers: frozenset[str]) -> WorkerHandle:
        """Fork a new worker and wait for its ``ready`` frame."""
        host_end, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        spawn_id = self._next_spawn
        self._next_spawn += 1
        event = anyio.Event()
        box: list[Any] = []
        self._spawns[spawn_id] = (event, box)
        try:
            await self._send({"op": "spawn", "id": spawn_id, "layers": sorted(layers)},
                             [child_end.fileno()])
        except BaseException:
            self._spawns.pop(spawn_id, None)
            host_end.close()
            raise
        finally:
            child_end.close()
        try:
            await event.wait()
        except BaseException:
            self._spawns.pop(spawn_id, None)
            host_end.close()
            raise
        if not box or type(box[0].get("pid")) is not int:
            host_end.close()
            detail = box[0].get("error") if box else "the template is gone"
            raise SandboxStartError(f"cannot fork a worker: {detail}")
        host_end.setblocking(False)
        handle = WorkerHandle(self, box[0]["pid"], host_end)
        self._workers[handle.pid] = handle
        self._open_channels.add(handle)
        try:
            await handle.wait_ready()
            check_required(self.required, handle.layers)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await handle.kill_and_reap()
            raise
        return handle

    async def kill(self, pid: int) -> None:
        """Ask the template to SIGKILL a worker's group; signal it directly if the template is gone."""
        try:
            await self._send({"op": "kill", "pid": pid})
        except SandboxStartError:
            if pid in self._workers:
                with contextlib.suppress(OSError):
                    os.killpg(pid, signal.SIGKILL)

    @property
    def closing(self) -> bool:
        """True once :meth:`aclose` has begun (or the template is gone): exits are no longer reported."""
        return self._closed or not self.running

    async def aclose(self) -> None:
        """Close the control socket (the template kills and reaps every worker) and reap the template."""
        self._closed = True
        if self.control is not None:
            with contextlib.suppress(OSError):
                self.control.shutdown(socket.SHUT_RDWR)
            _notify_closing(self.control)
            self.control.close()
        self._closed = True
        for handle in list(self._open_channels):
            handle.close_channel()
        process = self.process
        if process is None:
            return
        with anyio.CancelScope(shield=True):
            with anyio.move_on_after(10):
                await process.wait()
            if process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                await process.wait()
            await process.aclose()
        sweep_workdirs(owner=process.pid)  # in case the template died without removing them


def _notify_closing(sock: socket.socket) -> None:
    """Wake any task waiting on ``sock`` and drop the event loop's registration before it is closed.

    Closing a socket under a waiting ``anyio.wait_readable`` would leave the waiter (and anyio's record
    of it) behind; a new socket that reuses the descriptor number would then be refused as busy.
    """
    if sock.fileno() < 0:
        return
    with contextlib.suppress(RuntimeError):  # no event loop running: nothing can be waiting
        anyio.notify_closing(sock)
