"""The in-process executor: run one compiled program and report a :class:`ProgramOutcome`.

This runs *inside* the isolated worker process (:mod:`codemode.sandbox.worker`); it is the language half of
the sandbox, never a boundary by itself. :func:`run_program` never raises for anything the program does: a
program exception becomes ``error_kind="exception"`` with the exception's type, message and the program's own
traceback lines (``line N, in <fn>``; host frames and host paths are left out), a non-lossless return value
becomes ``"invalid-output"`` and a ``MemoryError`` that reaches the top ``"memory-limit"``. Real cancellation
of the caller's task propagates (after the run's helper tasks are cancelled); a ``CancelledError`` the program
raises itself is an ordinary exception.

Text leaves a program as Unicode only (:mod:`codemode.sandbox.lossless`): ``print`` of a string holding a
lone surrogate raises ``UnicodeEncodeError``, as CPython's strict UTF-8 standard output does, and the
text of a program exception writes any lone surrogate as ``\\udc80``, as CPython's standard error does.

``print`` output goes to ``log`` one entry per completed line group: each ``print`` that ends a line
forwards the text up to its last newline (without it); text after the last newline waits for the next
print or the end of the run. The in-process capture stops forwarding once ``log_cap_bytes`` have been
forwarded (the worker's ledger applies the run's real budget and writes the truncation marker).
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ._proxy import ToolCallError, ToolsProxy
from ._stdlib_facades import CURRENT_PRINT
from .boundary import json_ready
from .compiler import (
    CompileDiagnostics,
    CompiledProgram,
    ProgramCompileError,
    ProgramPolicyError,
    ProgramSyntaxError,
    compile_program,
)
from .facades import ProgramScope, TaskRegistry, guarded_import
from .guards import (
    PROGRAM_MARKER,
    TYPE_OF,
    WRITABLE_TYPES,
    ClassFactory,
    SafeType,
    build_safe_builtins,
    check_resolved,
    guarded_getattr,
    guarded_super_init,
    write_guard,
    write_private_guard,
)
from .lossless import LosslessJsonError, escape_lone_surrogates, lone_surrogate, snapshot
from .policy import (
    CHECK_RESOLVED_NAME,
    ENTRY_NAME,
    NO_VALUE_NAME,
    SAFE_TYPE_NAME,
    SUPER_INIT_NAME,
    TYPE_NAME,
    TYPE_OF_NAME,
    WRITABLE_TYPES_NAME,
    WRITE_PRIVATE_NAME,
)

__all__ = (
    "DEFAULT_LOG_CAP_BYTES",
    "CompileDiagnostics",
    "CompiledProgram",
    "ProgramCompileError",
    "ProgramOutcome",
    "ProgramPolicyError",
    "ProgramSyntaxError",
    "ToolCallError",
    "compile_program",
    "format_program_exception",
    "run_program",
)

#: Defensive cap of the in-process print capture (the worker's ledger enforces the run's budget).
DEFAULT_LOG_CAP_BYTES: Final = 16 * 1024 * 1024
_PENDING_MAX: Final = 64 * 1024
_MESSAGE_MAX: Final = 16 * 1024
_FRAMES_MAX: Final = 40


@dataclass(frozen=True)
class ProgramOutcome:
    """How a run ended: a value (``has_value``) or an error (``error_kind``, ``error_message``)."""

    value: Any
    has_value: bool
    error_kind: str | None = None
    error_message: str | None = None


class _NoValue:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<no value>"


_NO_VALUE: Final = _NoValue()
_BUILTINS: Final = build_safe_builtins(guarded_import)
_CLASS_FACTORY: Final = ClassFactory()


class _Printer:
    """The run's ``print`` capture (RestrictedPython's ``_print`` collector protocol)."""

    __slots__ = ("_left", "_log", "_pending", "_printed")

    def __init__(self, log: Callable[[str], None], cap: int) -> None:
        self._log = log
        self._left = cap
        self._pending: list[str] = []
        self._printed: list[str] = []

    def __call__(self) -> str:
        """The text printed so far (what RestrictedPython's ``printed`` reads)."""
        return "".join(self._printed)

    def _call_print(self, *objects: object, sep: str | None = " ", end: str | None = "\n",
                    file: object = None, flush: bool = False) -> None:
        if file is not None:
            raise TypeError("print(file=...) is not available in the sandbox")
        if sep is not None and not isinstance(sep, str):
            raise TypeError(f"sep must be None or a string, not {type(sep).__name__}")
        if end is not None and not isinstance(end, str):
            raise TypeError(f"end must be None or a string, not {type(end).__name__}")
        text = (" " if sep is None else sep).join([str(item) for item in objects])
        text += "\n" if end is None else end
        index = lone_surrogate(text)
        if index >= 0:  # (as CPython's print to a UTF-8 stream with errors="strict")
            raise UnicodeEncodeError("utf-8", text, index, index + 1, "surrogates not allowed")
        self.write(text)

    def write(self, text: str) -> None:
        if self._left <= 0:
            return
        if "\n" in text:
            head, _, rest = text.rpartition("\n")
            self._pending.append(head)
            self._forward("".join(self._pending))
            self._pending = [rest] if rest else []
        elif text:
            self._pending.append(text)
            if sum(len(part) for part in self._pending) > _PENDING_MAX:
                self.flush()

    def _forward(self, entry: str) -> None:
        if self._left <= 0:
            return
        self._left -= len(entry.encode("utf-8", "surrogatepass")) + 1
        self._printed.append(entry + "\n")
        self._log(entry)

    def flush(self) -> None:
        """Forward a pending partial line, if any."""
        if self._pending:
            entry = "".join(self._pending)
            self._pending = []
            self._forward(entry)


class _PrintFactory:
    """``_print_``: every function's ``_print_(_getattr_)`` gets the run's one printer."""

    __slots__ = ("_printer",)

    def __init__(self, printer: _Printer) -> None:
        self._printer = printer

    def __call__(self, getattr_: object = None) -> _Printer:
        return self._printer


def _program_frames(exc: BaseException, compiled: CompiledProgram) -> list[str]:
    lines: list[str] = []
    tb = exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_filename == compiled.filename:
            name = "<program>" if code.co_name == ENTRY_NAME else code.co_name
            lineno = tb.tb_lineno
            lines.append(f"  line {lineno}, in {name}")
            if 0 < lineno <= len(compiled.source_lines):
                text = compiled.source_lines[lineno - 1].strip()
                if text:
                    lines.append(f"    {text[:200]}")
        tb = tb.tb_next
    if len(lines) > 2 * _FRAMES_MAX:
        lines = [*lines[:_FRAMES_MAX], "  ...", *lines[-_FRAMES_MAX:]]
    return lines


def _describe(exc: BaseException) -> str:
    try:
        # (str.__str__ makes an exact copy of a program's str subclass, whose hooks must not run here)
        message = str.__str__(str(exc))
    except BaseException:  # a program __str__ that fails (even with SystemExit) must not hide the error
        message = "<unprintable message>"
    if len(message) > _MESSAGE_MAX:
        message = message[:_MESSAGE_MAX] + f"... ({len(message) - _MESSAGE_MAX} more characters)"
    name = str.__str__(type(exc).__name__)  # (an enum-made exception class may have a program str name)
    return f"{name}: {message}" if message else name


def format_program_exception(exc: BaseException, compiled: CompiledProgram) -> str:
    """The model-facing text of a program exception: traceback lines of the program only, then the error."""
    frames = _program_frames(exc, compiled)
    head = ["Traceback (most recent call last):", *frames] if frames else []
    return escape_lone_surrogates("\n".join([*head, _describe(exc)]))


def _really_cancelled() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _install(namespace: dict[str, Any], printer: _Printer, tools: ToolsProxy) -> None:
    namespace.update({
        "__builtins__": dict(_BUILTINS),  # (a run's own copy: nothing one run does to it reaches another)
        "__name__": "program",
        "__metaclass__": _CLASS_FACTORY,
        "_getattr_": guarded_getattr,
        CHECK_RESOLVED_NAME: check_resolved,
        "_write_": write_guard,
        TYPE_NAME: type,
        TYPE_OF_NAME: TYPE_OF,
        SAFE_TYPE_NAME: SafeType,
        SUPER_INIT_NAME: guarded_super_init,
        WRITE_PRIVATE_NAME: write_private_guard,
        WRITABLE_TYPES_NAME: WRITABLE_TYPES,
        "_print_": _PrintFactory(printer),
        NO_VALUE_NAME: _NO_VALUE,
        PROGRAM_MARKER: True,
        "tools": tools,
        "ToolCallError": ToolCallError,
    })


def _result(value: object) -> ProgramOutcome:
    if value is _NO_VALUE:
        return ProgramOutcome(value=None, has_value=False)
    try:
        clean = snapshot(json_ready(value, "result"), root="result")
    except LosslessJsonError as exc:
        return ProgramOutcome(None, False, "invalid-output",
                              f"the program's result is not lossless JSON: {exc}")
    except RecursionError:
        return ProgramOutcome(None, False, "invalid-output", "the program's result could not be checked")
    except MemoryError:
        raise
    except Exception as exc:
        # Program code can still run while the value is checked (the collector finalises a suspended
        # generator: its ``finally`` may change the value under the walk); it must not end the worker.
        return ProgramOutcome(None, False, "invalid-output",
                              f"the program's result changed while it was checked "
                              f"({str.__str__(type(exc).__name__)})")
    return ProgramOutcome(value=clean, has_value=True)


async def run_program(compiled: CompiledProgram, *, tool_names: Sequence[str],
                      call_tool: Callable[[str, Any], Awaitable[Any]], log: Callable[[str], None],
                      globals_: dict[str, Any] | None = None,
                      log_cap_bytes: int = DEFAULT_LOG_CAP_BYTES) -> ProgramOutcome:
    """Run ``compiled`` once on the current event loop and report how it ended.

    ``globals_`` is the program's global namespace; pass the same dict to successive runs for notebook
    semantics (top-level names persist). ``call_tool(name, args)`` serves ``await tools.NAME(...)``; a
    :class:`~codemode.sandbox.errors.ToolCallFailure` it raises reaches the program as ``ToolCallError``.

    The program runs in the calling task, as the worker's own task does. An in-process caller that
    keeps cancel scopes of its own in that task (anyio, say) runs it in a task of its own: a program's
    ``asyncio.TaskGroup`` cancels its parent task when a child fails, as CPython's does.
    """
    namespace: dict[str, Any] = {} if globals_ is None else globals_
    printer = _Printer(log, log_cap_bytes)
    _install(namespace, printer, ToolsProxy(tool_names, call_tool))
    registry = TaskRegistry()
    scope = ProgramScope(registry)
    print_token = CURRENT_PRINT.set(printer._call_print)
    try:
        try:
            exec(compiled.code, namespace)
            entry = namespace.pop(ENTRY_NAME)
            try:
                value = await entry()
            finally:
                if globals_ is not None:
                    # (a session's worker lives on: the run's cyclic garbage is finalised now, in its
                    # own run, not by a collection during a later run that would own what it starts)
                    gc.collect()
                await registry.aclose()
        except MemoryError as exc:
            try:
                message = format_program_exception(exc, compiled)
            except MemoryError:
                message = "MemoryError"
            return ProgramOutcome(None, False, "memory-limit", message)
        except asyncio.CancelledError as exc:
            if _really_cancelled():
                raise
            return ProgramOutcome(None, False, "exception", format_program_exception(exc, compiled))
        except BaseException as exc:  # the program's own failure, of any kind
            return ProgramOutcome(None, False, "exception", format_program_exception(exc, compiled))
        try:
            return _result(value)
        except MemoryError:
            return ProgramOutcome(None, False, "memory-limit", "MemoryError: while checking the result")
    finally:
        CURRENT_PRINT.reset(print_token)
        scope.close()
        printer.flush()
        TYPE_OF.clear()  # (it would keep this run's classes, and through them its globals, alive)
