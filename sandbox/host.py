"""Host-side process control: the template process and handles on the workers it forks.

:class:`TemplateProcess` starts ``python -I`` (the host's interpreter) running
:mod:`codemode.sandbox._template`, keeps its control socket and turns the template's messages into per-worker
events. :class:`WorkerHandle` is the host's view of one worker: its pid, the host end of its protocol channel
and, once the template has reaped it, its wait status and CPU time. Killing goes through the template (which
alone reaps, so the pid cannot have been reused); if the template itself is gone the host signals the group
directly.

A template that dies or stops answering is *lost*: every worker it forked is killed with it and marked
exited (its runs end with kind ``worker-exit``), and its listener (the supervisor in
:mod:`codemode.sandbox._supply`) is told, so it can start a replacement. An ``OSError`` met while starting a
worker (descriptors, memory or processes ran out) becomes a :class:`SandboxStartError` that says what ran
out (:func:`describe_os_error`).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import resource
import signal
import socket
import subprocess
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Final, Protocol

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
    "HOST",
    "TEMPLATE",
    "TemplateGone",
    "TemplateListener",
    "TemplateProcess",
    "WorkerHandle",
    "describe_os_error",
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


class TemplateGone(SandboxStartError):
    """The template went away before it answered a request to start a worker (its replacement may)."""


class TemplateListener(Protocol):
    """What a template tells its supervisor (every call is made synchronously, from the event loop)."""

    def worker_exited(self, worker: WorkerHandle) -> None: ...

    def template_gone(self, template: TemplateProcess) -> None: ...

    def request_sent(self, template: TemplateProcess) -> None: ...

    def template_proven(self, template: TemplateProcess) -> None: ...


#: What ran out, by errno, for an OSError met while starting a worker ({who}: HOST or TEMPLATE).
_RAN_OUT: Final = {
    errno.EMFILE: "{who} ran out of file descriptors (EMFILE: its open-file limit{limit} is reached)",
    errno.ENFILE: "the system ran out of file descriptors (ENFILE: the system-wide open-file table is full)",
    errno.ENOMEM: "{who} ran out of memory (ENOMEM)",
    errno.EAGAIN: "{who} reached its process limit (EAGAIN: RLIMIT_NPROC or the cgroup's pids.max)",
    errno.ENOSPC: "the temporary directory's file system is full (ENOSPC)",
    errno.EDQUOT: "the temporary directory's disk quota is exhausted (EDQUOT)",
    errno.ENOBUFS: "the kernel ran out of socket buffers (ENOBUFS)",
}


HOST: Final = "the host process"
TEMPLATE: Final = "the sandbox template"


def describe_os_error(number: int | None, text: str, who: str) -> str:
    """What an OSError met while starting a worker means, for the run's error message.

    ``who`` is :data:`HOST` or :data:`TEMPLATE`; the result names the resource that ran out
    when the errno says so (descriptors, memory, processes, disk), else the error as it came.
    """
    template = _RAN_OUT.get(number) if number is not None else None
    if template is None:
        return f"{who} could not start a worker: {text}"
    limit = ""
    if number == errno.EMFILE and who == HOST:
        limit = f" of {resource.getrlimit(resource.RLIMIT_NOFILE)[0]} (RLIMIT_NOFILE)"
    return template.format(who=who, limit=limit)


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
        #: What happened to the template the worker died with (``died``, ...), else None.
        self.lost: str | None = None
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
        listener = self.template.listener
        if listener is not None:
            listener.worker_exited(self)

    def channel_open(self) -> bool:
        """False when the worker's end of the channel is closed (it died, even if not yet reaped)."""
        try:
            data = self.channel.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except BlockingIOError:
            return True
        except OSError:
            return False
        return bool(data)

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
    """The running template and its control socket.

    ``listener`` (optional) hears of worker exits, the template's loss, requests sent and the template's
    first ready worker (its proof of health). Spawn requests not answered yet are kept with the time they
    were sent (:attr:`oldest_request`), even when their caller stopped waiting, so a watchdog can tell a
    hung template from a busy one. ``layers`` are the template-level layers to attempt (``None``: all).
    """

    def __init__(self, executor: str = DEFAULT_EXECUTOR, layers: Iterable[str] | None = None,
                 listener: TemplateListener | None = None) -> None:
        self.executor = executor
        self.listener = listener
        #: The template-level layers to attempt (``None``: all of them).
        self.template_layers = None if layers is None else sorted(layers)
        #: Layers every worker must report; one without them is killed and its spawn fails.
        self.required: frozenset[str] = frozenset()
        self.process: anyio.abc.Process | None = None
        self.control: socket.socket | None = None
        self.pid: int | None = None
        #: True once a worker it forked got ready (a template that never did is a failed start).
        self.proven = False
        #: Why the template was lost (None while it serves).
        self.lost: str | None = None
        self._workers: dict[int, WorkerHandle] = {}
        self._open_channels: set[WorkerHandle] = set()
        self._spawns: dict[int, tuple[anyio.Event, list[Any]]] = {}
        #: Spawn requests sent and not answered yet: id -> when sent (anyio clock).
        self._requests: dict[int, float] = {}
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

    @property
    def live_count(self) -> int:
        """How many workers have not been reaped yet (cheap)."""
        return len(self._workers)

    @property
    def oldest_request(self) -> float | None:
        """When the oldest unanswered spawn request was sent (anyio clock), or None."""
        return next(iter(self._requests.values()), None)

    def answer_waiting(self) -> bool:
        """True if a message from the template waits unread (the host, not the template, was slow)."""
        control = self.control
        if control is None or self._closed:
            return False
        try:
            return bool(control.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT))
        except OSError:
            return False

    @property
    def returncode(self) -> int | None:
        """The template process's exit status once reaped (negative: killed by that signal)."""
        return None if self.process is None else self.process.returncode

    async def start(self, task_group: anyio.abc.TaskGroup) -> None:
        """Start the template and wait for its hello; raise SandboxStartError on any failure.

        The template gets a session (and process group) of its own, so a hung one can be killed as a
        group without touching the host; its workers make their own. Cancelled, it kills what it started.
        """
        try:
            host_end, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        except OSError as exc:
            raise SandboxStartError("cannot start the sandbox template: "
                                    + describe_os_error(exc.errno, str(exc), HOST)) from None
        try:
            command = [sys.executable, "-I", "-c", _BOOTSTRAP, str(child_end.fileno()), self.executor,
                       json.dumps([p for p in sys.path if isinstance(p, str)]), _package_dirs()]
            if self.template_layers is not None:
                command.append(json.dumps(self.template_layers))
            self.process = await anyio.open_process(
                command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, pass_fds=(child_end.fileno(),), env={}, cwd="/",
                start_new_session=True)
        except OSError as exc:
            host_end.close()
            raise SandboxStartError("cannot start the sandbox template: "
                                    + describe_os_error(exc.errno, str(exc), HOST)) from exc
        except BaseException:
            host_end.close()
            raise
        finally:
            child_end.close()
        host_end.setblocking(False)
        self.control = host_end
        try:
            with anyio.move_on_after(_START_TIMEOUT):
                hello = await self._receive()
                if hello is None or "error" in hello or type(hello.get("pid")) is not int:
                    detail = hello.get("error") if hello else "it exited"
                    raise SandboxStartError(f"the sandbox template failed to start: {detail}")
                self.pid = hello["pid"]
                task_group.start_soon(self._read_loop)
                return
            raise SandboxStartError(f"the sandbox template did not start within {_START_TIMEOUT:g} s")
        except BaseException:
            self.kill_process()
            await self.aclose()
            raise

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
                self.gone("died")
                return
            op = message.get("op")
            if op == "spawned":
                spawn_id = message.get("id")
                self._requests.pop(spawn_id, None)  # type: ignore[arg-type]
                waiter = self._spawns.pop(spawn_id, None)  # type: ignore[arg-type]
                if waiter is not None:
                    waiter[1].append(message)
                    waiter[0].set()
                # (else its caller stopped waiting and closed the channel: the worker exits on its own)
            elif op == "exited":
                handle = self._workers.pop(message.get("pid"), None)  # type: ignore[arg-type]
                if handle is not None:
                    handle._set_exited(int(message.get("status", 0)), float(message.get("cpu", 0.0)))

    def gone(self, reason: str) -> None:
        """The template is lost (it died, or was killed for hanging): kill what it leaves behind, fail
        waiters, mark its workers exited with ``lost`` set, tell the listener (idempotent)."""
        if self.lost is not None:
            return
        self.lost = reason
        self._closed = True
        self._requests.clear()
        if self.listener is not None:
            self.listener.template_gone(self)
        handles = list(self._workers.values())
        self._workers.clear()
        for handle in handles:
            handle.lost = reason
            with contextlib.suppress(OSError):
                os.killpg(handle.pid, signal.SIGKILL)
            handle._set_exited(signal.SIGKILL, 0.0)
        for event, _ in self._spawns.values():
            event.set()
        self._spawns.clear()

    def kill_process(self) -> None:
        """SIGKILL the template's process group (it has one of its own; its workers die with it)."""
        process = self.process
        if process is None or process.returncode is not None:
            return
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except OSError:
            with contextlib.suppress(OSError):
                process.kill()

    def retire(self, reason: str) -> None:
        """Kill a template that stopped answering and mark it lost with ``reason``."""
        self.kill_process()
        self.gone(reason)

    async def _send(self, message: dict[str, Any], fds: Iterable[int] = ()) -> None:
        if self.control is None or self._closed:
            raise TemplateGone("the sandbox template is not running")
        data = json.dumps(message).encode()
        async with self._send_lock:
            while True:
                try:
                    socket.send_fds(self.control, [data], list(fds))
                    return
                except BlockingIOError:  # (a stopped template's queue is full: its loss ends the wait)
                    try:
                        await anyio.wait_writable(self.control)
                    except anyio.ClosedResourceError:
                        raise TemplateGone(f"the sandbox template {self.lost or 'is gone'}") from None
                except OSError as exc:
                    if exc.errno in _RAN_OUT:
                        raise SandboxStartError(describe_os_error(exc.errno, str(exc), HOST)) from None
                    raise TemplateGone(f"the sandbox template is gone: {exc}") from None

    async def spawn(self, layers: frozenset[str], *, warm: bool = True) -> WorkerHandle:
        """Fork a new worker and wait for its ``ready`` frame (``warm``: after its warm-up run).

        Raises :class:`TemplateGone` if the template is lost before it answers, and
        :class:`SandboxStartError` (saying what ran out) for any other failure.
        """
        try:
            host_end, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        except OSError as exc:
            raise SandboxStartError(describe_os_error(exc.errno, str(exc), HOST)) from None
        spawn_id = self._next_spawn
        self._next_spawn += 1
        event = anyio.Event()
        box: list[Any] = []
        self._spawns[spawn_id] = (event, box)
        try:
            await self._send({"op": "spawn", "id": spawn_id, "layers": sorted(layers), "warm": warm},
                             [child_end.fileno()])
        except BaseException:
            self._spawns.pop(spawn_id, None)
            host_end.close()
            raise
        finally:
            child_end.close()
        if spawn_id in self._spawns:  # (not already answered, nor failed by the template's loss)
            self._requests[spawn_id] = anyio.current_time()
            if len(self._requests) == 1 and self.listener is not None:
                self.listener.request_sent(self)
        try:
            await event.wait()
        except BaseException:
            self._spawns.pop(spawn_id, None)  # (the request stays outstanding until it is answered)
            host_end.close()
            raise
        if not box:
            host_end.close()
            raise TemplateGone(f"the sandbox template {self.lost or 'is gone'}")
        if type(box[0].get("pid")) is not int:
            host_end.close()
            number = box[0].get("errno")
            raise SandboxStartError(describe_os_error(number if type(number) is int else None,
                                                      str(box[0].get("error")), TEMPLATE))
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
            if handle.lost is not None:
                raise TemplateGone(f"the sandbox template {handle.lost}") from None
            raise
        if not self.proven:
            self.proven = True
            if self.listener is not None:
                self.listener.template_proven(self)
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

    async def aclose(self, *, close_channels: bool = True) -> None:
        """Close the control socket (the template kills and reaps every worker) and reap the template.

        ``close_channels=False`` leaves the workers' channels to their owners (a run may still read
        what its worker sent before it died); used when a lost template is retired.
        """
        self._closed = True
        if self.control is not None:
            with contextlib.suppress(OSError):
                self.control.shutdown(socket.SHUT_RDWR)
            _notify_closing(self.control)
            self.control.close()
        if close_channels:
            for handle in list(self._open_channels):
                handle.close_channel()
        process = self.process
        if process is None:
            return
        with anyio.CancelScope(shield=True):
            with anyio.move_on_after(10):
                await process.wait()
            if process.returncode is None:
                self.kill_process()
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
