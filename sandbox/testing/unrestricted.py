"""An executor that runs the program as plain CPython: it exists ONLY to test the OS layers.

``Sandbox(executor="codemode.sandbox.testing.unrestricted")`` runs each program text as the body of an
``async def`` with the real builtins, any import (of what the worker can still import: after the empty
root, only what the template loaded; :data:`PRELOAD` adds what attacks typically reach for) and
``ctypes`` for raw system calls: no language layer at all. The worker around it is made exactly as in
production (the same template, fork, layers and protocol), so whatever a program cannot do here, the
operating-system layers alone prevent. That is what the assume-breach suite (``tests/sandbox/breach``)
proves with it.

Never use it for anything else: with it, the worker process is the only boundary left. It is never a
default anywhere.

Contract (as every executor's): ``compile_program(source)`` returns something ``run_program`` runs or
raises an exception whose ``kind`` is ``"syntax"``; ``run_program(compiled, tool_names=, call_tool=,
log=, globals_=)`` never raises for what the program does and returns an outcome with ``value``,
``has_value``, ``error_kind`` and ``error_message``. ``tools.NAME(args)`` and ``tools["NAME"](args)``
call the host's tools; ``print`` goes to the run's log.
"""

from __future__ import annotations

import builtins
import textwrap
import traceback
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from types import CodeType
from typing import Any, Final

from ..errors import ToolCallFailure

__all__ = ("PRELOAD", "Outcome", "UnrestrictedCompileError", "compile_program", "run_program")

#: Modules an attack reaches for, imported by the template before it gives up the file system; and the
#: production executor, so the worker holds (and an attacker finds) what a production worker holds.
PRELOAD: Final = (
    "ctypes", "errno", "fcntl", "mmap", "os", "resource", "select", "signal", "socket", "stat", "struct",
    "subprocess", "threading", "time", "codemode.sandbox.interpreter",
)

_ENTRY: Final = "__unrestricted_program__"


@dataclass(frozen=True)
class Outcome:
    """How a run ended (the shape the worker reads)."""

    value: Any
    has_value: bool
    error_kind: str | None = None
    error_message: str | None = None


class UnrestrictedCompileError(Exception):
    """The program is not valid Python; ``kind`` is always ``"syntax"``."""

    kind: Final = "syntax"


class _NoValue:
    __slots__ = ()


_NO_VALUE: Final = _NoValue()


def compile_program(source: str) -> CodeType:
    """Compile ``source`` as the body of an ``async def`` (``return`` gives the run's value)."""
    wrapped = (f"async def {_ENTRY}(tools, print, ToolCallError, __no_value__):\n"
               f"{textwrap.indent(source, '    ') or '    pass'}\n    return __no_value__\n")
    try:
        return compile(wrapped, "<program>", "exec")
    except SyntaxError as exc:
        raise UnrestrictedCompileError(f"line {exc.lineno}: {exc.msg}") from None


class _Tools:
    """``tools.NAME(args)``: one host call per await (no checks: the host validates every frame)."""

    def __init__(self, names: Sequence[str], call_tool: Callable[[str, Any], Awaitable[Any]]) -> None:
        self._names = tuple(names)
        self._call = call_tool

    def __getattr__(self, name: str) -> Callable[..., Awaitable[Any]]:
        if name.startswith("_") or name not in self._names:
            raise AttributeError(name)
        return self[name]

    def __getitem__(self, name: str) -> Callable[..., Awaitable[Any]]:
        async def call(args: Any = None, **kwargs: Any) -> Any:
            return await self._call(name, kwargs if args is None else args)

        return call


async def run_program(compiled: CodeType, *, tool_names: Sequence[str],
                      call_tool: Callable[[str, Any], Awaitable[Any]], log: Callable[[str], None],
                      globals_: dict[str, Any] | None = None) -> Outcome:
    """Run the program once; its failures become ``error_kind="exception"`` with the traceback's last
    line (the exception type and message, e.g. ``PermissionError: [Errno 1] ...``)."""
    namespace: dict[str, Any] = {} if globals_ is None else globals_
    namespace["__builtins__"] = builtins
    exec(compiled, namespace)
    entry = namespace.pop(_ENTRY)

    def emit(*objects: object, sep: str = " ", end: str = "\n") -> None:
        log(sep.join(str(item) for item in objects))

    try:
        value = await entry(_Tools(tool_names, call_tool), emit, ToolCallFailure, _NO_VALUE)
    except MemoryError:
        return Outcome(None, False, "memory-limit", "MemoryError")
    except BaseException as exc:  # everything the program does is reported, never raised
        text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        return Outcome(None, False, "exception", text)
    if value is _NO_VALUE:
        return Outcome(None, False)
    return Outcome(value, True)
