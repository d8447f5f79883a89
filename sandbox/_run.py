"""One run on one worker, seen from the host: send ``run``, serve frames, decide the outcome.

Everything the worker sends is hostile (see :mod:`codemode.sandbox.protocol`): frames are size-capped,
strictly decoded and rebuilt; a malformed frame ends the run with kind ``protocol``; duplicate call ids are
ignored; a call beyond the budget ends the run with ``call-limit``. The wall clock, the caller's cancel signal
and the worker's death are observed here. Whatever happens, the worker is killed and reaped unless it is a
session worker that finished cleanly; an anyio cancellation of the caller does the same under a shield and
then propagates.
"""

from __future__ import annotations

import functools
import inspect
import os
import signal
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final, Protocol

import anyio
import anyio.abc

from ._reader import FrameReader, open_reader
from .calls import CallAbandonment, CooperativeCallTool, CooperativeHandler
from .errors import ToolCallFailure
from .host import WorkerHandle
from .limits import SandboxLimits
from .lossless import (
    JsonValue,
    LosslessJsonError,
    dumps,
    encoded_size,
    escape_lone_surrogates,
    lone_surrogate,
    snapshot,
)
from .protocol import (
    HEADER,
    LOG_TRUNCATION_MARKER,
    MAX_VALUE_DEPTH,
    CallFrame,
    CancelFrame,
    DoneFrame,
    FrameDecoder,
    LogFrame,
    ProtocolViolation,
    ReadyFrame,
    WorkerFrame,
    encode_frame,
    value_depth,
)
from .results import ErrorKind, RunError, RunResult, RunStats
from .worker import EXIT_MEMORY, EXIT_REFUSED

__all__ = (
    "CallTool",
    "CancelLike",
    "CpuWatch",
    "OnLog",
    "execute_run",
)

PlainCallTool = Callable[[str, JsonValue], Awaitable[JsonValue]]
CallTool = PlainCallTool | CooperativeCallTool
OnLog = Callable[[str], "Awaitable[None] | None"]

_ABANDONED: Final = "the program stopped waiting for the call"
_RUN_OVER: Final = "the run is over"

#: Frames a run may send that the rules ignore (duplicate call ids, logs past the budget).
_MAX_IGNORED: Final = 1000
_EXIT_WAIT: Final = 2.0


class CancelLike(Protocol):
    """Anything with ``cancelled`` and ``async wait()`` (e.g. ``codemode.runtime.CancelSignal``)."""

    @property
    def cancelled(self) -> bool: ...

    async def wait(self) -> Any: ...


class _Ended(Exception):  # internal control flow, never escapes this module
    pass


class _Slot:
    """An idle server's mailbox: the next call frame for it."""

    __slots__ = ("_event", "_frame")

    def __init__(self) -> None:
        self._event = anyio.Event()
        self._frame: CallFrame | None = None

    def hand(self, frame: CallFrame) -> None:
        self._frame = frame
        self._event.set()

    async def wait(self) -> CallFrame:
        await self._event.wait()
        assert self._frame is not None
        return self._frame


async def tell_observer(on_log: OnLog | None, text: str) -> None:
    """Hand a kept log line to the caller's observer; an observer that fails must not fail the run."""
    if on_log is None:
        return
    try:
        outcome = on_log(text)
        if inspect.isawaitable(outcome):
            await outcome
    except Exception:  # contained by contract: the line is kept in the result either way
        pass


class _RunState:
    def __init__(self, worker: WorkerHandle, limits: SandboxLimits, tool_names: frozenset[str],
                 call_tool: CallTool, on_log: OnLog | None) -> None:
        self.worker = worker
        self.limits = limits
        self.tool_names = tool_names
        self.cooperative: CooperativeHandler | None = None
        self.plain: PlainCallTool | None = None
        if isinstance(call_tool, CooperativeCallTool):
            self.cooperative = call_tool.handler
        else:
            self.plain = call_tool
        #: The cooperative calls in flight: each is abandoned, never cancelled.
        self.abandonments: dict[int, CallAbandonment] = {}
        self.on_log = on_log
        self.logs: list[str] = []
        self.log_left = limits.log_bytes
        self.log_truncated = False
        self.calls = 0
        self.seen_ids: set[int] = set()
        self.serving: dict[int, anyio.CancelScope] = {}
        self.error: RunError | None = None
        self.done: DoneFrame | None = None
        self.received_done = False
        self.ignored = 0
        self.children = 0
        self.cpu_ms: float | None = None
        self.send_lock: anyio.Lock | None = None  # (made by the first send that has to wait)
        self.decoder = FrameDecoder(limits.frame_bytes)
        # Calls are served by long-lived server tasks (as many as calls were ever in flight at once):
        # starting a task per call costs more than the whole round trip of a trivial call.
        self.idle: list[_Slot] = []
        self.reader: FrameReader | None = None
        #: A call frame read before the run had a task group to serve it in (see pump).
        self.pending: CallFrame | None = None

    def fail(self, kind: ErrorKind, message: str) -> None:
        if self.error is None and self.done is None:
            self.error = RunError(kind, message)

    async def send(self, frame: dict[str, Any]) -> None:
        # Every frame the host sends is built from checked parts (tool values are snapshotted).
        data = memoryview(encode_frame(frame, validate=False))
        lock = self.send_lock
        if lock is None or not lock.locked():
            # Nobody is halfway through a frame: try it in one go (the common case, no lock needed).
            data = self.send_now(data)
            if not data:
                return
        await self.send_rest(data)

    def send_now(self, data: memoryview) -> memoryview:
        """Send what the socket takes without waiting; return the rest (empty once the worker is gone)."""
        try:
            return data[self.worker.channel.send(data):]
        except BlockingIOError:
            return data
        except OSError:
            return data[:0]  # the worker is gone; its exit is observed by the reader

    async def send_rest(self, data: memoryview) -> None:
        """Send the rest of a frame, waiting for the socket, with no other frame interleaved."""
        lock = self.send_lock
        if lock is None:
            lock = self.send_lock = anyio.Lock(fast_acquire=True)
        sock = self.worker.channel
        async with lock:
            while data:
                try:
                    sent = sock.send(data)
                except BlockingIOError:
                    await anyio.wait_writable(sock)
                    continue
                except OSError:
                    return  # the worker is gone; its exit is observed by the reader
                data = data[sent:]

    # --- logs --------------------------------------------------------------------------------
    async def add_log(self, frame: LogFrame) -> None:
        """Keep one entry if it fits the ledger (UTF-8 size + 1 per entry, as in the worker)."""
        if self.log_truncated:
            self._ignored("log frames after the log budget was exhausted")
            return
        if frame.truncated:
            await self._truncate()
            return
        text = frame.text
        cost = len(text.encode("utf-8", "surrogatepass")) + 1
        if cost > self.log_left:
            budget = max(self.log_left - 1, 0)
            kept = text.encode("utf-8", "surrogatepass")[:budget].decode("utf-8", "ignore")
            if kept:
                await self._keep(kept)
            await self._truncate()
            return
        self.log_left -= cost
        await self._keep(text)

    def _ignored(self, what: str) -> None:
        """Count frames ignored by rule; an honest worker sends (almost) none, a flood is a violation."""
        self.ignored += 1
        if self.ignored > _MAX_IGNORED:
            raise ProtocolViolation(f"the worker kept sending {what} ({_MAX_IGNORED} ignored)")

    async def _truncate(self) -> None:
        self.log_truncated = True
        await self._keep(LOG_TRUNCATION_MARKER.format(limit=self.limits.log_bytes))

    async def _keep(self, text: str) -> None:
        self.logs.append(text)
        await tell_observer(self.on_log, text)

    # --- tool calls ------------------------------------------------------------------------
    def release(self, frame: CallFrame) -> None:
        """Done with a call frame: its bytes no longer hold the reader back (see ``_reader``)."""
        if self.reader is not None:
            self.reader.release(frame)

    def accept_call(self, frame: CallFrame) -> bool:
        if frame.id in self.seen_ids:
            self.release(frame)
            self._ignored("calls with an id already used")
            return False  # duplicate id: ignored, never answered twice
        self.seen_ids.add(frame.id)
        self.calls += 1
        if self.calls > self.limits.max_tool_calls:
            self.fail("call-limit", f"the program made more than {self.limits.max_tool_calls} tool "
                                    "calls, the budget of one run (max_tool_calls); batch the work "
                                    "into fewer calls")
            raise _Ended
        return True

    def take_now(self, frame: WorkerFrame) -> bool:
        """Hand a call straight to an idle server as it arrives (the reader's hook; never raises).

        Only the plain case is taken: a fresh id within the budget while the run is still going
        (``accept_call`` then neither ignores nor ends anything); everything else goes through
        :meth:`handle` in order. The reader offers a frame only when no earlier frame waits, so a call
        never overtakes a ``done``, ``cancel`` or ``log`` sent before it.
        """
        if (type(frame) is not CallFrame or not self.idle or self.error is not None
                or self.received_done or frame.id in self.seen_ids
                or self.calls >= self.limits.max_tool_calls):
            return False
        self.accept_call(frame)
        self.idle.pop().hand(frame)
        return True

    async def _server(self, frame: CallFrame) -> None:
        """Serve calls one after another until the run ends (which cancels the task group)."""
        while True:
            await self.serve_call(frame)
            self.release(frame)
            slot = _Slot()
            self.idle.append(slot)
            frame = await slot.wait()

    async def serve_call(self, frame: CallFrame) -> None:
        if self.cooperative is not None:
            await self._serve_cooperatively(frame, self.cooperative)
            return
        assert self.plain is not None
        with anyio.CancelScope() as scope:
            self.serving[frame.id] = scope
            try:
                await self.send(await self._reply_to(frame, self.plain))
            finally:
                self.serving.pop(frame.id, None)

    async def _serve_cooperatively(self, frame: CallFrame, handler: CooperativeHandler) -> None:
        """Serve one call shielded; the program abandoning it (or the run ending) fires its abandonment."""
        abandonment = CallAbandonment(shielded=True)  # (see the shielded scope below)
        self.abandonments[frame.id] = abandonment

        async def call(name: str, args: JsonValue) -> JsonValue:
            return await handler(name, args, abandonment)

        try:
            with anyio.CancelScope(shield=True):
                reply = await self._reply_to(frame, call)
        finally:
            self.abandonments.pop(frame.id, None)
        if not abandonment.abandoned:  # (an abandoned call gets no reply: the worker expects none)
            await self.send(reply)

    def cancel_call(self, frame: CancelFrame) -> None:
        """The program abandoned a call: stop its handler (no reply is sent; the worker expects none)."""
        abandonment = self.abandonments.get(frame.id)
        if abandonment is not None:
            abandonment.abandon(_ABANDONED)
        scope = self.serving.get(frame.id)
        if scope is not None:
            scope.cancel()

    def abandon_all(self, reason: str) -> None:
        """The run is over: every cooperative call still in flight is abandoned."""
        for abandonment in list(self.abandonments.values()):
            abandonment.abandon(reason)

    async def _reply_to(self, frame: CallFrame,
                        call: Callable[[str, JsonValue], Awaitable[JsonValue]]) -> dict[str, Any]:
        if frame.name not in self.tool_names:
            known = ", ".join(sorted(self.tool_names)) or "none"
            return _failure(frame.id, f"unknown tool {frame.name!r}; declared tools: {known}",
                            "UNKNOWN_TOOL")
        try:
            value = await call(frame.name, frame.args)
        except ToolCallFailure as failure:
            return _failure(frame.id, failure.message, failure.code)
        except Exception as exc:
            return _failure(frame.id, f"the tool handler failed ({type(exc).__name__})", "TOOL_FAILED")
        return _success(frame.id, value)

    # --- frames ----------------------------------------------------------------------------
    async def pump(self, task_group: anyio.abc.TaskGroup | None) -> bool:
        """Read and act on frames until ``done``, a violation or the worker's death; then True.

        Without a task group it stops at the first call frame, which needs a server task: it keeps
        that frame for the next ``pump`` and returns False. A run that makes no calls so never pays
        for a task group (whose exit also costs an event-loop iteration).
        """
        reader = self.reader
        if reader is None:
            reader = self.reader = self.worker.reader = open_reader(self.worker.channel, self.decoder,
                                                                   self.take_now)
        try:
            frame: WorkerFrame | None = self.pending
            self.pending = None
            while True:
                if frame is None:
                    frame = await reader.next_frame()
                    if frame is None:
                        await self._worker_died()
                        raise _Ended
                if task_group is None and type(frame) is CallFrame:
                    self.pending = frame
                    return False
                await self.handle(frame, task_group)
                frame = None
        except ProtocolViolation as exc:
            self.fail("protocol", f"the worker broke the sandbox protocol: {exc}")
        except _Ended:
            pass
        finally:
            if self.pending is None:
                await self._wind_down(reader)
        if self.children:  # tool calls in flight or the cancel watcher: stop them
            assert task_group is not None
            task_group.cancel_scope.cancel()
        return True

    async def _wind_down(self, reader: FrameReader) -> None:
        if self.received_done:
            # (a worker that keeps sending after done must not make the host buffer it; the reader
            # goes with the channel: see execute_run)
            reader.stop()
        else:
            self.worker.close_reader()
        if self.abandonments:
            # Cooperative calls are shielded: they end when told. A worker that did not finish is
            # killed first, so it does not outlive its deadline while they settle.
            if not self.received_done:
                with anyio.CancelScope(shield=True):
                    await self.worker.kill()
            self.abandon_all(_RUN_OVER)

    async def handle(self, frame: object, task_group: anyio.abc.TaskGroup | None) -> None:
        if isinstance(frame, LogFrame):
            await self.add_log(frame)
        elif isinstance(frame, CallFrame):
            if self.accept_call(frame):
                if self.idle:
                    self.idle.pop().hand(frame)
                else:
                    assert task_group is not None  # (pump keeps call frames until it has one)
                    self.children += 1
                    task_group.start_soon(self._server, frame)
        elif isinstance(frame, CancelFrame):
            self.cancel_call(frame)
        elif isinstance(frame, DoneFrame):
            self._finish(frame)
            raise _Ended
        elif isinstance(frame, ReadyFrame):
            raise ProtocolViolation("unexpected ready frame during a run")

    def _finish(self, frame: DoneFrame) -> None:
        self.received_done = True
        self.cpu_ms = frame.cpu_ms
        if frame.error_kind is not None:
            self.fail(frame.error_kind, frame.error_message or "")  # type: ignore[arg-type]
            return
        if frame.has_value:
            size = encoded_size(frame.value)
            if size > self.limits.result_bytes:
                self.fail("output-limit", f"the program's result is {size} bytes of JSON, over the "
                                          f"result budget of {self.limits.result_bytes} bytes "
                                          "(result_bytes)")
                return
        self.done = frame

    async def _worker_died(self) -> None:
        with anyio.move_on_after(_EXIT_WAIT):
            await self.worker.exited.wait()
        self.fail(*_classify_exit(self.worker, self.limits))


def _success(call_id: int, value: object) -> dict[str, Any]:
    """A reply carrying a checked copy of the tool's value, or a failure saying why it cannot."""
    try:
        # (A frozen value is checked and immutable already: it is encoded as it is.)
        clean = snapshot(value, freeze=True, root="result")
    except LosslessJsonError as exc:
        return _failure(call_id, f"the tool's result is not lossless JSON: {exc}", "INVALID_TOOL_OUTPUT")
    if value_depth(clean) > MAX_VALUE_DEPTH - 2:
        return _failure(call_id, f"the tool's result nests deeper than {MAX_VALUE_DEPTH - 2} levels",
                        "INVALID_TOOL_OUTPUT")
    return {"type": "reply", "id": call_id, "ok": True, "value": clean}


def _failure(call_id: int, message: str, code: str) -> dict[str, Any]:
    # (a message may quote text that is not Unicode; the frame must stay lossless JSON)
    return {"type": "reply", "id": call_id, "ok": False, "message": escape_lone_surrogates(message),
            "code": escape_lone_surrogates(code)}


def _classify_exit(worker: WorkerHandle, limits: SandboxLimits) -> tuple[ErrorKind, str]:
    status, cpu = worker.status, worker.cpu_seconds or 0.0
    if worker.lost is not None:
        return "worker-exit", (f"the worker died with its sandbox template, which {worker.lost}, before "
                               "finishing the run; the sandbox replaces the template, so the program can be "
                               "run again")
    if status is None:
        return "worker-exit", "the worker closed its channel without finishing the run"
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        if number == signal.SIGXCPU or (number == signal.SIGKILL and cpu >= limits.cpu_seconds - 0.05):
            return "cpu-limit", _cpu_message(limits.cpu_seconds)
        name = signal.Signals(number).name if number in signal.Signals._value2member_map_ else number
        return "worker-exit", f"the worker process died from signal {name} before finishing the run"
    code = os.WEXITSTATUS(status)
    if code == EXIT_MEMORY:
        return "memory-limit", (f"the program exceeded its memory budget of {limits.memory_bytes} bytes "
                                "(memory_bytes)")
    if code == EXIT_REFUSED:
        return "worker-exit", ("the worker's own code was refused a system call by its seccomp filter "
                               "(the allowlist in codemode.sandbox._seccomp misses a call it needs)")
    return "worker-exit", f"the worker process exited with status {code} before finishing the run"


def _refuse_program(program: str, limits: SandboxLimits) -> RunError | None:
    """Why a program cannot be sent to a worker at all (None when it can): text with a lone surrogate
    has no UTF-8 form, so no frame can carry it (CPython's compiler refuses such source too)."""
    index = lone_surrogate(program)
    if index >= 0:
        line = program.count("\n", 0, index) + 1
        column = index - (program.rfind("\n", 0, index) + 1) + 1
        return RunError("syntax", f"line {line}: the program holds a lone surrogate "
                                  f"\\u{ord(program[index]):04x} at column {column}, which is not "
                                  "Unicode text; write it as an escape in a string literal instead")
    return None


def run_frame(program: str, tool_names: Sequence[str], persist: bool, limits: SandboxLimits) -> bytes:
    """The encoded ``run`` frame: the same bytes as ``encode_frame`` of its dict, built for less.

    Only the program and the tool names are encoded per run; the limits' part is encoded once per
    limits value. (A run's first frame is on the critical path of every run, cold caches and all.)
    """
    body = (f'{{"type":"run","program":{dumps(program, validate=False)},'
            f'"tool_names":{dumps(list(tool_names), validate=False)},'
            f'"persist":{"true" if persist else "false"},"limits":{_limits_text(limits)}}}'
            ).encode("utf-8", "surrogatepass")
    return HEADER.pack(len(body)) + body


@functools.lru_cache(maxsize=64)
def _limits_text(limits: SandboxLimits) -> str:
    """The limits' part of the run frame (limits are frozen and hashable: encoded once per value)."""
    return dumps({"cpu_seconds": limits.cpu_seconds, "memory_bytes": limits.memory_bytes,
                  "log_bytes": limits.log_bytes, "result_bytes": limits.result_bytes,
                  "frame_bytes": limits.frame_bytes}, validate=False)


async def execute_run(worker: WorkerHandle, *, program: str, tool_names: Sequence[str],
                      call_tool: CallTool, limits: SandboxLimits, cancel: CancelLike | None,
                      on_log: OnLog | None, persist: bool, started: float,
                      session_restarted: bool = False,
                      retire: Callable[[WorkerHandle], bool] | None = None,
                      cpu_watch: CpuWatch | None = None, deadline: float | None = None) -> RunResult:
    """Run ``program`` on ``worker`` and return its result.

    ``deadline`` (anyio clock) is when the run's wall-clock budget ends, if it began before the worker
    was had (the wait for a worker counts); by default the budget starts now.

    The worker is killed and reaped unless it is a session worker (``persist``) that sent ``done``.
    A one-shot worker that sent ``done`` exits by itself; it is handed to ``retire`` (the sandbox's
    reaper, which kills it if it lingers) so the run does not wait for that, or killed here when
    there is no reaper.
    """
    state = _RunState(worker, limits, frozenset(tool_names), call_tool, on_log)
    refused = _refuse_program(program, limits)
    if refused is not None:
        # Nothing was sent: a session's worker stays as it was; a one-shot worker is not needed.
        if not persist:
            with anyio.CancelScope(shield=True):
                await worker.kill_and_reap()
        state.error = refused
        return _result(state, worker, started, session_restarted)
    keep_worker = False
    dispose: Callable[[], object] | None = None
    try:
        # The run frame goes out first, so the worker starts on the program while the host sets up its
        # side; only a frame too big for the socket buffer waits, within the deadline, for the rest.
        rest = state.send_now(memoryview(run_frame(program, tool_names, persist, limits)))
        if deadline is None:
            deadline = anyio.current_time() + limits.wall_seconds
        with anyio.CancelScope(deadline=deadline) as scope:
            if rest:
                await state.send_rest(rest)
            if cpu_watch is not None:
                cpu_watch.add(worker, state, scope)
            watcher = False
            if cancel is not None:
                dispose, watcher = _observe_cancel(cancel, state, scope)
            # The task group is opened only when something needs a task: a call or a cancel watcher.
            if watcher or not await state.pump(None):
                async with anyio.create_task_group() as task_group:
                    if watcher:
                        assert cancel is not None
                        state.children += 1
                        task_group.start_soon(_watch_cancel, cancel, state, scope)
                    await state.pump(task_group)
        if scope.cancelled_caught and state.error is None and not state.received_done:
            # (every other cancellation of this scope follows a failure or the done frame)
            state.fail("timeout", f"the program ran past its wall-clock budget of {limits.wall_seconds:g} s "
                                  "(wall_seconds) and was killed")
        keep_worker = persist and state.received_done
        if keep_worker:
            worker.close_reader()  # (the session's next run reads with a reader of its own)
        elif state.received_done:
            # A one-shot worker exits by itself after done; the kill is only a safety net against a
            # worker that lies, and the template reaps it in the background. The reaper also closes
            # the channel (and its reader), so the result does not wait for that either.
            keep_worker = True  # (not killed and reaped here)
            if retire is None or not retire(worker):
                await worker.kill()
                worker.close_channel()
    finally:
        if dispose is not None:
            dispose()
        if cpu_watch is not None:
            cpu_watch.remove(state)
        if not keep_worker:
            with anyio.CancelScope(shield=True):
                await worker.kill_and_reap()  # (closes the channel: nobody reads it again)
    return _result(state, worker, started, session_restarted)


_CPU_POLL: Final = 0.05


class CpuWatch:
    """One task that enforces the CPU budget of every run in flight, to the poll interval.

    ``RLIMIT_CPU`` only counts whole seconds (and stays as the backstop); this polls each worker's
    CPU time in /proc and ends a run whose usage since it started reaches its budget. A single
    watcher per sandbox keeps the cost of a run independent of this bookkeeping.
    """

    def __init__(self) -> None:
        self._runs: dict[_RunState, tuple[WorkerHandle, anyio.CancelScope, float]] = {}
        self._wake = anyio.Event()

    def add(self, worker: WorkerHandle, state: _RunState, scope: anyio.CancelScope) -> None:
        baseline = worker.take_cpu_mark()
        if baseline is not None:
            self._runs[state] = (worker, scope, baseline)
            self._wake.set()

    def remove(self, state: _RunState) -> None:
        self._runs.pop(state, None)

    async def serve(self) -> None:
        """Poll while runs are in flight; sleep on an event otherwise (never returns)."""
        while True:
            if not self._runs:
                await self._wake.wait()
                self._wake = anyio.Event()
            await anyio.sleep(_CPU_POLL)
            for state, (worker, scope, baseline) in list(self._runs.items()):
                used = worker.cpu_now()
                if used is None:
                    self._runs.pop(state, None)
                elif used - baseline >= state.limits.cpu_seconds:
                    self._runs.pop(state, None)
                    state.fail("cpu-limit", _cpu_message(state.limits.cpu_seconds))
                    scope.cancel()


def _cpu_message(budget: float) -> str:
    return (f"the program used its whole CPU budget of {budget:g} s (cpu_seconds) and was killed; "
            "make the computation cheaper")


def _observe_cancel(cancel: CancelLike, state: _RunState,
                    scope: anyio.CancelScope) -> tuple[Callable[[], object] | None, bool]:
    """End the run when ``cancel`` fires: returns what undoes the observation, if anything does, and
    whether a watcher task is needed.

    A signal with ``on_cancel(callback) -> disposer`` (``codemode.runtime.CancelSignal``) is observed by a
    callback, which costs no task; any other is awaited by a watcher task (started by the caller).
    """
    subscribe = getattr(cancel, "on_cancel", None)
    if callable(subscribe):
        def abort(reason: object = None) -> None:
            _abort(state, scope)

        try:
            disposer = subscribe(abort)
        except Exception:  # a broken subscription: fall back to the watcher task
            return None, True
        return (disposer if callable(disposer) else None), False
    return None, True


def _abort(state: _RunState, scope: anyio.CancelScope) -> None:
    state.fail("aborted", "the run was cancelled by the caller and the worker was killed")
    scope.cancel()


async def _watch_cancel(cancel: CancelLike, state: _RunState, scope: anyio.CancelScope) -> None:
    await cancel.wait()
    _abort(state, scope)


def _cpu_ms(state: _RunState, worker: WorkerHandle) -> float | None:
    if worker.cpu_seconds is not None and not state.received_done:
        return worker.cpu_seconds * 1000.0  # the kernel's figure for a killed worker
    return state.cpu_ms


def _result(state: _RunState, worker: WorkerHandle, started: float, restarted: bool) -> RunResult:
    stats = RunStats(
        wall_ms=(time.perf_counter() - started) * 1000.0,
        cpu_ms=_cpu_ms(state, worker),
        tool_calls=state.calls, isolation=worker.layers, worker_pid=worker.pid,
        session_restarted=restarted,
    )
    logs = tuple(state.logs)
    if state.error is not None or state.done is None:
        error = state.error or RunError("worker-exit", "the run ended without a result")
        return RunResult(value=None, has_value=False, logs=logs, error=error, stats=stats)
    return RunResult(value=state.done.value, has_value=state.done.has_value, logs=logs, error=None,
                     stats=stats)


