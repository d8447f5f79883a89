"""The worker: the child side of one isolated run (or of one persistent session).

A worker is forked by the template (:mod:`codemode.sandbox._template`) with its protocol channel as the only
descriptor it keeps. It isolates itself (:mod:`codemode.sandbox._isolate`), creates its event loop, installs
the seccomp allowlist, runs a warm-up program, says ``ready`` and waits for a ``run`` frame. It then
applies the run's CPU and address-space budgets, compiles and runs the program with the in-process
executor, streams ``log`` frames as output happens, turns every ``tools.NAME(...)`` call into a ``call``
frame answered by a ``reply`` and ends with one ``done`` frame. A one-shot worker exits right after
``done``; a session worker keeps its globals and waits for the next ``run``.

Nothing here trusts the program: the value it returns is checked (lossless, nesting, size) before it is
sent, and a failure to send or allocate ends the process with a status the host can classify.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import inspect
import os
import resource
import select
import socket
import sys
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Final, NoReturn

from . import _isolate
from .errors import ToolCallFailure
from .lossless import JsonValue, LosslessJsonError, dumps, loads, snapshot
from .protocol import (
    HEADER,
    LOG_TRUNCATION_MARKER,
    MAX_VALUE_DEPTH,
    FrameDecoder,
    frame_values,
    max_frame_values,
    value_depth,
)

__all__ = (
    "EXIT_HOST_GONE",
    "EXIT_MEMORY",
    "EXIT_REFUSED",
    "WorkerConfig",
    "host_pid",
    "serve",
)

#: Exit status when the worker ran out of memory outside the program (the host reports memory-limit).
EXIT_MEMORY: Final = 86
#: Exit status when the host end of the channel went away.
EXIT_HOST_GONE: Final = 87
#: Exit status when the worker's own code (not the program) was refused a system call by its seccomp
#: allowlist: the list misses a call the worker needs (the host reports this in the run's error).
EXIT_REFUSED: Final = 88

_RECV_CHUNK: Final = 1 << 16
_host_pid: int | None = None


def host_pid() -> int:
    """This worker's pid as the host sees it (inside the template's PID namespace ``os.getpid()``
    differs; ``RunStats.worker_pid`` and the host's process tools use this one)."""
    return os.getpid() if _host_pid is None else _host_pid


@dataclass(frozen=True, slots=True)
class WorkerConfig:
    """What the template hands a fresh worker.

    ``layers`` are the optional layers to attempt; ``parent_pid`` is what ``getppid()`` answers while
    the template lives; ``template`` what the template set up for all its workers; ``pid_pipe`` (in
    the template's PID namespace) a pipe on which the template writes the worker's pid as the host
    sees it, which the worker cannot learn otherwise (its uid follows it).
    """

    executor: ModuleType
    layers: frozenset[str]
    parent_pid: int
    template: _isolate.TemplateIsolation
    pid_pipe: int | None = None
    #: Run the warm-up program before ``ready`` (the host asks for it only while it is idle: see
    #: :func:`_warm_up`).
    warm: bool = True


def _encode(frame: dict[str, Any]) -> bytes:
    body = dumps(frame, validate=False).encode("utf-8", "surrogatepass")
    return HEADER.pack(len(body)) + body


@dataclass(frozen=True)
class _Done:
    """A run's ``done`` frame before its CPU time is known; a value is held already encoded.

    The value's text is needed to check it against the result budget anyway, so the frame reuses it
    instead of encoding the value a second time.
    """

    fields: dict[str, Any]
    value_text: str | None = None

    def encode(self, cpu_ms: float) -> bytes:
        if self.value_text is None:
            return _encode({**self.fields, "cpu_ms": cpu_ms})
        body = (f'{{"type":"done","has_value":true,"value":{self.value_text},'
                f'"cpu_ms":{dumps(cpu_ms, validate=False)}}}').encode("utf-8", "surrogatepass")
        return HEADER.pack(len(body)) + body


class _Channel:
    """The worker's end of the protocol socket (fd 3): blocking-style sends, callback receives.

    The socket is registered with the event loop once, for the worker's life: during a run a
    readability callback decodes what arrives, resolves the pending call a ``reply`` answers (through
    ``on_reply``, set by the current run) and queues every other frame for :meth:`receive`.
    Registering per receive, or a reader task, would cost more than the rest of a trivial call's round
    trip.
    """

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.decoder = FrameDecoder(1 << 62)
        self.frames: collections.deque[dict[str, Any]] = collections.deque()
        self.on_reply: Callable[[dict[str, Any]], None] | None = None
        self._buffer = bytearray(_RECV_CHUNK)
        self._view = memoryview(self._buffer)
        self._registered = False
        #: Wait for a reply in ``select`` when the loop is otherwise idle (:meth:`wait_quietly`).
        self.quiet_waits = True

    def send(self, frame: dict[str, Any]) -> None:
        self.send_bytes(_encode(frame))

    def send_bytes(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                sent = self.sock.send(view)
            except BlockingIOError:
                select.select([], [self.sock], [])
                continue
            except PermissionError:
                os._exit(EXIT_REFUSED)
            except OSError:
                os._exit(EXIT_HOST_GONE)
            view = view[sent:]

    def _on_readable(self) -> None:
        try:
            size = self.sock.recv_into(self._view)
        except BlockingIOError:
            return
        except PermissionError:
            os._exit(EXIT_REFUSED)
        except OSError:
            size = 0
        if not size:
            os._exit(EXIT_HOST_GONE)
        for body in self.decoder.feed(self._buffer[:size]):
            frame = loads(body.decode("utf-8", "surrogatepass"))
            if not isinstance(frame, dict):
                continue
            if frame.get("type") == "reply":
                if self.on_reply is not None:
                    self.on_reply(frame)
            else:
                self.frames.append(frame)

    def wait_quietly(self, future: asyncio.Future[Any]) -> None:
        """Wait for ``future``'s reply on the socket itself while the event loop has nothing else to do.

        A program awaiting a tool call usually leaves its loop with nothing runnable: then blocking in
        ``select`` on the channel, and decoding the reply at once, skips a loop iteration, a callback
        and a task switch per call. It returns as soon as the future is resolved, something else
        becomes runnable (a reply to another call wakes its task) or the loop's next timer is due, so
        the program behaves exactly as if it had awaited the future on the loop.
        """
        loop = asyncio.get_running_loop()
        ready: collections.deque[Any] = loop._ready  # type: ignore[attr-defined]
        timers: list[asyncio.TimerHandle] = loop._scheduled  # type: ignore[attr-defined]
        while not future.done() and not ready:
            timeout = None
            if timers:
                timeout = timers[0].when() - loop.time()
                if timeout <= 0:
                    return
            if not select.select([self.sock], [], [], timeout)[0]:
                return
            self._on_readable()

    def receive(self) -> dict[str, Any]:
        """The next frame that is not a reply (replies go to ``on_reply`` as they arrive).

        Called only between runs, when nothing else in this process has anything to do: so it waits
        for the socket in ``select`` and decodes at once, instead of sleeping in the event loop and
        paying for a callback, a future and a loop iteration on the way back to the caller.
        """
        if not self._registered:
            asyncio.get_running_loop().add_reader(self.sock.fileno(), self._on_readable)
            self._registered = True
        while not self.frames:
            select.select([self.sock], [], [])
            self._on_readable()
        return self.frames.popleft()


class _LogLedger:
    """Streams log text to the host up to the log budget, then sends one truncation marker.

    An entry costs its UTF-8 size plus one byte (its line break), so a flood of empty lines is
    metered too; the host keeps the same ledger.
    """

    def __init__(self, channel: _Channel, limit: int, frame_bytes: int) -> None:
        self._channel = channel
        self._left = limit
        self.limit = limit
        self._chunk = max(1, (frame_bytes - 256) // 12)  # worst case: 12 bytes per escaped character
        self.truncated = False

    def __call__(self, text: str) -> None:
        """Send one entry; each entry costs its UTF-8 size plus one (its line break)."""
        if self.truncated:
            return
        text = str(text)
        cost = _utf8_size(text) + 1
        overflow = cost > self._left
        if overflow:
            text = _utf8_prefix(text, self._left - 1)
            cost = _utf8_size(text) + 1 if text else 0
        self._left -= cost
        if text or not overflow:
            for start in range(0, max(len(text), 1), self._chunk):
                self._channel.send({"type": "log", "text": text[start:start + self._chunk]})
        if overflow:
            self.truncated = True
            self._channel.send({"type": "log", "truncated": True,
                                "text": LOG_TRUNCATION_MARKER.format(limit=self.limit)})


def _utf8_size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def _utf8_prefix(text: str, budget: int) -> str:
    """The longest prefix of ``text`` whose UTF-8 form fits in ``budget`` bytes."""
    return text.encode("utf-8", "surrogatepass")[:max(budget, 0)].decode("utf-8", "ignore")


class _Run:
    """One program run inside the worker: tool-call correlation and the final ``done`` frame."""

    def __init__(self, channel: _Channel, frame: dict[str, Any]) -> None:
        self.channel = channel
        limits = frame["limits"]
        self.frame_bytes = int(limits["frame_bytes"])
        self.result_bytes = int(limits["result_bytes"])
        self.log = _LogLedger(channel, int(limits["log_bytes"]), self.frame_bytes)
        self.pending: dict[int, asyncio.Future[JsonValue]] = {}
        self.next_id = 0

    async def call_tool(self, name: str, args: JsonValue) -> JsonValue:
        """Send one ``call`` frame and wait for its ``reply`` (raised as ToolCallFailure on error)."""
        name = str(name)
        if self.channel.on_reply != self.resolve:  # (a session keeps globals: ``t = tools`` in a past run)
            raise RuntimeError(f"tools.{name} belongs to an earlier run of this session; call this run's "
                               "`tools` (replies go to the run in progress, so its call would never end)")
        try:
            args = snapshot(args, root="args")
        except LosslessJsonError as exc:
            raise TypeError(f"arguments of tools.{name} must be lossless JSON: {exc}") from None
        if value_depth(args) > MAX_VALUE_DEPTH - 2:
            raise ValueError(f"arguments of tools.{name} nest deeper than {MAX_VALUE_DEPTH - 2} levels")
        call_id = self.next_id
        self.next_id += 1
        data = _encode({"type": "call", "id": call_id, "name": name, "args": args})
        if len(data) - HEADER.size > self.frame_bytes:
            raise ValueError(f"arguments of tools.{name} take {len(data)} bytes, over the frame "
                             f"budget of {self.frame_bytes} bytes (frame_bytes)")
        most = max_frame_values(self.frame_bytes)
        if len(data) > most and (count := frame_values(data[HEADER.size:], most)) > most:
            raise ValueError(f"arguments of tools.{name} hold up to {count} JSON values, over the "
                             f"{most} a call may carry (frame_bytes / 32)")
        future: asyncio.Future[JsonValue] = asyncio.get_running_loop().create_future()
        self.pending[call_id] = future
        self.channel.send_bytes(data)
        try:
            if self.channel.quiet_waits:
                self.channel.wait_quietly(future)
            return await future
        except asyncio.CancelledError:
            # The program stopped waiting (the await was cancelled, which also cancels the future)
            # before a reply arrived: let the host stop the call too.
            if not future.done() or future.cancelled():
                self.channel.send_bytes(_encode({"type": "cancel", "id": call_id}))
            raise
        finally:
            self.pending.pop(call_id, None)

    def resolve(self, frame: dict[str, Any]) -> None:
        future = self.pending.get(frame.get("id"))  # type: ignore[arg-type]
        if future is None or future.done():
            return
        if frame.get("ok") is True:
            future.set_result(frame.get("value"))
        else:
            future.set_exception(ToolCallFailure(str(frame.get("message", "tool call failed")),
                                                 str(frame.get("code", "TOOL_FAILED"))))

    def done_frame(self, outcome: Any) -> _Done:
        kind = outcome.error_kind
        if kind is not None:
            message = str(outcome.error_message)
            if kind == "exception" and _is_memory_error(message):
                kind = "memory-limit"
                message = f"{message}\n(the program exceeded its memory budget: memory_bytes)"
            elif kind == "exception" and _is_refused(message):
                message = f"{message}\n{_REFUSED_NOTE}"
            return _error(kind, message)
        if not outcome.has_value:
            return _Done({"type": "done", "has_value": False})
        return self._value_frame(outcome.value)

    def _value_frame(self, value: object) -> _Done:
        try:
            clean = snapshot(value, root="result")
        except LosslessJsonError as exc:
            return _error("invalid-output", f"the program's result is not lossless JSON: {exc}")
        if value_depth(clean) > MAX_VALUE_DEPTH - 2:
            return _error("invalid-output",
                          f"the program's result nests deeper than {MAX_VALUE_DEPTH - 2} levels")
        text = dumps(clean, validate=False)
        size = len(text.encode("utf-8", "surrogatepass"))
        if size > self.result_bytes:
            return _error("output-limit", f"the program's result is {size} bytes of JSON, over the "
                                          f"result budget of {self.result_bytes} bytes (result_bytes)")
        most = max_frame_values(self.frame_bytes)
        if size > most and (count := frame_values(text.encode("utf-8"), most)) > most:
            return _error("output-limit", f"the program's result holds up to {count} JSON values, over "
                                          f"the {most} a result may hold (frame_bytes / 32)")
        return _Done({"type": "done", "has_value": True}, text)


def _error(kind: str, message: str) -> _Done:
    return _Done({"type": "done", "error": {"kind": kind, "message": message}})


def _is_memory_error(message: str) -> bool:
    lines = message.strip().splitlines()
    return bool(lines) and lines[-1].startswith("MemoryError")


_REFUSED_NOTE: Final = ("(errno 1, EPERM, in the sandbox: the worker's seccomp filter refuses every system "
                        "call it does not list; if ordinary code hit this, the allowlist in "
                        "codemode.sandbox._seccomp misses a call)")


def _is_refused(message: str) -> bool:
    lines = message.strip().splitlines()
    return bool(lines) and lines[-1].startswith("PermissionError: [Errno 1]")


async def _serve_runs(channel: _Channel, executor: ModuleType, *, host_grants: bool) -> None:
    """Serve runs until a one-shot run ends; ``host_grants``: the host raises a session's hard limits."""
    globals_: dict[str, Any] | None = None
    while True:
        frame = channel.receive()
        if frame.get("type") != "run":
            continue  # (``wake``: the host said a run is coming; reading it woke this CPU)
        limits = frame["limits"]
        persist = frame.get("persist") is True
        refused = _isolate.set_run_limits(float(limits["cpu_seconds"]), int(limits["memory_bytes"]),
                                          session=persist, granted=host_grants)
        if persist and globals_ is None:
            globals_ = {}
        run = _Run(channel, frame)
        usage = resource.getrusage(resource.RUSAGE_SELF)
        cpu_before = usage.ru_utime + usage.ru_stime
        if refused is not None:
            done = _error("memory-limit", refused)
        else:
            done = await _execute(run, executor, frame, globals_ if persist else None)
        usage = resource.getrusage(resource.RUSAGE_SELF)
        channel.send_bytes(done.encode(round((usage.ru_utime + usage.ru_stime - cpu_before) * 1000.0, 3)))
        if not persist:
            os._exit(0)


async def _execute(run: _Run, executor: ModuleType, frame: dict[str, Any],
                   globals_: dict[str, Any] | None, *, warming: bool = False) -> _Done:
    try:
        options: dict[str, Any] = ({"module_scope": frame.get("persist") is True}
                                   if _accepts(executor, "compile_program", "module_scope") else {})
        if warming and _accepts(executor, "compile_program", "cache"):
            options["cache"] = False  # (the warm-up is there to run the compiler, not to hit its cache)
        compiled = executor.compile_program(str(frame["program"]), **options)
    except MemoryError:
        raise
    except Exception as exc:
        kind = getattr(exc, "kind", "syntax")
        return _error(kind if kind in ("syntax", "policy") else "syntax", str(exc))
    run.channel.on_reply = run.resolve
    extra: dict[str, Any] = {}
    if _accepts_log_cap(executor):
        # Let the executor's own capture forward one byte past the budget, so the ledger sees the
        # overflow and writes the marker.
        extra["log_cap_bytes"] = run.log.limit + 1
    try:
        outcome = await executor.run_program(
            compiled, tool_names=tuple(str(n) for n in frame["tool_names"]), call_tool=run.call_tool,
            log=run.log, globals_=globals_, **extra)
        return run.done_frame(outcome)
    finally:
        run.channel.on_reply = None


@functools.cache
def _accepts(executor: ModuleType, function: str, parameter: str) -> bool:
    try:
        return parameter in inspect.signature(getattr(executor, function)).parameters
    except (AttributeError, TypeError, ValueError):
        return False


@functools.cache
def _accepts_log_cap(executor: ModuleType) -> bool:
    try:
        return "log_cap_bytes" in inspect.signature(executor.run_program).parameters
    except (TypeError, ValueError):
        return False


class _NullChannel(_Channel):
    """A channel that discards what it is sent (used by the warm-up run)."""

    def __init__(self) -> None:  # no socket: nothing is ever received
        self.decoder = FrameDecoder(1 << 20)
        self.frames = collections.deque()
        self.on_reply = None
        self.quiet_waits = False

    def send_bytes(self, data: bytes) -> None:
        self.decoder.feed(data)


#: A small program touching what typical programs use (calls, recursion, loops, comprehensions,
#: sorting, string building, dicts, exceptions, printing, awaiting): running it once before ``ready``
#: copies the template pages those paths write to, so the first real run does not pay for them.
_WARM_UP_PROGRAM: Final = """\
import asyncio
import math
def depth(n):
    return n if n < 2 else depth(n - 1) + depth(n - 2)
values = [i * 7 % 101 for i in range(200)]
table = {f"k{i % 97}": i for i in range(200)}
counts = {}
for value in values:
    counts[value] = counts.get(value, 0) + 1
parts = []
for value in values[:50]:
    parts.append(f"{value}:{value % 3}")
text = ",".join(parts)
try:
    table["missing"]
except KeyError as exc:
    missing = str(exc)
ordered = sorted(values, key=lambda v: -v)
print(text[:20], missing, len(ordered))
await asyncio.sleep(0)
return {"depth": depth(8), "sum": sum(values) + len(table), "top": ordered[:3],
        "roots": [round(math.sqrt(v), 3) for v in values[:3]], "text": text.upper()[:8]}
"""

_WARM_UP: Final = {"type": "run", "program": _WARM_UP_PROGRAM, "tool_names": [], "persist": False,
                   "limits": {"frame_bytes": 1 << 20, "result_bytes": 1 << 20, "log_bytes": 1 << 20}}


async def _warm_up(executor: ModuleType) -> None:
    """Run a small program through the whole path once.

    The template runs it once before it freezes its heap (:func:`warm_template`), so the caches and
    lazily built state of the compiler, the executor and the codec are made before the first fork and
    shared by every worker. A forked worker may run it again before saying ``ready``: its heap is
    shared copy-on-write with the template, and the first run through those paths would otherwise
    pay for hundreds of page copies (reference count updates write to every object they touch).
    That costs a few milliseconds of CPU, so the host asks for it only for a worker it starts while
    idle (:class:`WorkerConfig` ``warm``); a worker started under load gets ready sooner and its
    first run pays for the pages instead. Nothing of the warm-up survives: it has its own globals and
    a channel that discards.
    """
    frame = loads(dumps(_WARM_UP))
    run = _Run(_NullChannel(), frame)
    done = await _execute(run, executor, frame, None, warming=True)
    run.channel.send_bytes(done.encode(0.0))
    resource.getrusage(resource.RUSAGE_SELF)


def warm_template(executor: ModuleType) -> None:
    """(Template) run the warm-up program once, on an event loop of its own that is closed after."""
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(_warm_up(executor))
    finally:
        loop.close()
        asyncio.set_event_loop(None)


def serve(channel_fd: int, config: WorkerConfig) -> NoReturn:
    """Run the worker in the current (freshly forked) process; never returns."""
    global _host_pid
    filtered = False
    try:
        _host_pid = _read_host_pid(config.pid_pipe)
        _isolate.close_inherited_fds(channel_fd, config.template.devnull)
        os.environ.clear()
        shared_netns = config.template.shared_netns
        layers = _isolate.apply_layers(config.layers, parent_pid=config.parent_pid,
                                       template=config.template.layers, host_pid=_host_pid,
                                       shared_netns=shared_netns)
        sock = socket.socket(fileno=_isolate.CHANNEL_FD)
        sock.setblocking(False)
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        if ("seccomp" in config.layers and "no-new-privs" in layers
                and _isolate.install_seccomp(_socket_fds(loop))):
            layers.append("seccomp")
            filtered = True
        elif shared_netns and "netns" in layers and _isolate.keeps_shared_netns(config.layers):
            os._exit(EXIT_REFUSED)  # (kept the template's namespace for seccomp, which did not go on)
        channel = _Channel(sock)
        if config.warm:
            loop.run_until_complete(_warm_up(config.executor))
        channel.send({"type": "ready", "layers": layers})
        grants = config.template.host_grants and "uid" in layers
        loop.run_until_complete(_serve_runs(channel, config.executor, host_grants=grants))
    except MemoryError:
        os._exit(EXIT_MEMORY)
    except PermissionError:
        os._exit(EXIT_REFUSED if filtered else 1)
    except BaseException:
        os._exit(1)
    os._exit(0)


def _read_host_pid(pid_pipe: int | None) -> int:
    """This process's pid as the host sees it: from the template's pipe inside its PID namespace."""
    if pid_pipe is None:
        return os.getpid()
    data = os.read(pid_pipe, 8)
    os.close(pid_pipe)
    if len(data) != 8:
        os._exit(70)  # the template died before it could say
    return int.from_bytes(data, "little")


def _socket_fds(loop: asyncio.AbstractEventLoop) -> tuple[int, ...]:
    """The descriptors the seccomp filter lets the worker send and receive on: the channel and the
    event loop's own wake-up socket pair."""
    fds = {_isolate.CHANNEL_FD}
    for name in ("_ssock", "_csock"):
        sock = getattr(loop, name, None)
        if isinstance(sock, socket.socket):
            fds.add(sock.fileno())
    return tuple(sorted(fds))


if __name__ == "__main__":  # pragma: no cover
    sys.exit("codemode.sandbox.worker is started by the sandbox template, not directly")
