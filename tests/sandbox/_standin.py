"""A plain-CPython stand-in executor, private to the tests.

It runs the program as the body of an ``async def`` with *no* language restrictions, so isolation
tests can probe what the operating-system layers alone prevent (this is never shipped as the real
executor; the sandbox's own is ``codemode.sandbox.interpreter``).
"""

from __future__ import annotations

import builtins
import textwrap
import traceback
from dataclasses import dataclass
from typing import Any

from codemode.sandbox.errors import ToolCallFailure


@dataclass(frozen=True)
class Outcome:
    value: Any
    has_value: bool
    error_kind: str | None
    error_message: str | None


class StandinCompileError(Exception):
    def __init__(self, kind: str, message: str) -> None:
        self.kind = kind
        super().__init__(message)


_NO_VALUE = object()


def compile_program(source: str) -> Any:
    if "#policy-reject" in source:
        raise StandinCompileError("policy", "line 1: rejected by the stand-in policy")
    wrapped = "async def __program__(tools, print, ToolCallError):\n" + textwrap.indent(source, "    ")
    wrapped += "\n    return __no_value__\n"
    try:
        return compile(wrapped, "<program>", "exec")
    except SyntaxError as exc:
        raise StandinCompileError("syntax", f"line {exc.lineno}: {exc.msg}") from None


class _Tools:
    def __init__(self, names: tuple[str, ...], call_tool: Any) -> None:
        self._names = names
        self._call = call_tool

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name not in self._names:
            raise AttributeError(name)
        return self[name]

    def __getitem__(self, name: str) -> Any:
        async def call(args: Any = _NO_VALUE, **kwargs: Any) -> Any:
            return await self._call(name, kwargs if args is _NO_VALUE else args)

        return call


async def run_program(compiled: Any, *, tool_names: tuple[str, ...], call_tool: Any, log: Any,
                      globals_: dict[str, Any] | None = None) -> Outcome:
    namespace = globals_ if globals_ is not None else {}
    namespace["__builtins__"] = builtins
    namespace["__no_value__"] = _NO_VALUE
    exec(compiled, namespace)

    def emit(*args: Any, sep: str = " ", end: str = "") -> None:
        log(sep.join(str(a) for a in args))

    try:
        value = await namespace["__program__"](_Tools(tool_names, call_tool), emit, ToolCallFailure)
    except BaseException as exc:  # the stand-in reports everything, like the real executor
        text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        return Outcome(None, False, "exception", text)
    if value is _NO_VALUE:
        return Outcome(None, False, None, None)
    return Outcome(value, True, None, None)
