"""Type-check a ``run_code`` program against the generated stubs, before running it.

A program is the *body* of an async function in which exactly ``tools`` and ``ToolCallError`` exist.
:func:`check_program` wraps it in a generated module::

    from codemode_tools import ToolCallError, tools      # the stub written next to it
    from typing import Any as _CodemodeAny


    async def _codemode_program() -> _CodemodeAny:
    <TAB>...every program line, prefixed by one tab...
    <TAB>pass

runs mypy on it through ``mypy.api.run`` and maps each diagnostic back to the program's own line and
column. A single tab is the prefix because it shifts every indentation level uniformly under both of
CPython's tab rules, so a consistently indented program stays consistent. Diagnostics on the header
lines are dropped (they concern the wrapper); one on the trailing ``pass`` is reported on the program's
last line. Only the program's own diagnostics are reported, never the stub's.

The sandbox's compile-time policy is applied first (:func:`codemode.sandbox.compiler.compile_program`):
whatever it refuses (``exec``/``eval`` of strings, dunder names, ``except*`` ...) is reported with code
``sandbox`` before mypy's findings, so a program the check passes also compiles in the sandbox.

The TypedDict names are deliberately *not* imported: they do not exist at run time, so a program that
constructs ``FooArgs(...)`` is rightly reported as using an undefined name.

Speed: mypy's cache lives in a per-user directory under the system temp dir (override with
``cache_dir``), so only the first check pays for analysing ``builtins``/``typing``; later checks take a
few hundred milliseconds. The call is synchronous and blocking; from async code run it in a worker
thread (``anyio.to_thread.run_sync``). In-process mypy runs are serialised by a lock, and the
process-wide settings mypy changes (recursion limit, garbage-collector tuning) are restored after each.
"""

from __future__ import annotations

import ast
import gc
import json
import os
import sys
import tempfile
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from codemode.sandbox.compiler import ProgramCompileError, compile_program
from codemode.sdk.signature import ToolSignature
from codemode.sdk.stubs import STUB_MODULE, render_stub_module

__all__ = ("HEADER_LINES", "Diagnostic", "check_program", "default_cache_dir")

Severity = Literal["error", "note"]

_PREFIX = "\t"
_HEADER = (
    f"from {STUB_MODULE} import ToolCallError, tools",
    "from typing import Any as _CodemodeAny",
    "",
    "",
    "async def _codemode_program() -> _CodemodeAny:",
)
HEADER_LINES = len(_HEADER)
"""How many generated lines precede the program's first line in the wrapper module."""

_PROGRAM_FILE = "program.py"
# mypy is not re-entrant and changes process-wide settings while it runs: one in-process run at a time.
_MYPY_LOCK = threading.Lock()
_MAX_HINT_LINES = 6


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """One finding about the program, positioned in the program's own text."""

    line: int
    """1-based line in the program as given (``\\r\\n`` and ``\\r`` count as one line break)."""
    column: int
    """1-based column (character) in that line."""
    severity: Severity
    """``error`` fails the check; ``note`` adds detail to the error before it."""
    message: str
    """What is wrong, in mypy's words."""
    code: str | None = None
    """The checker's error code (``arg-type``, ``syntax``, ...), when it has one."""

    def render(self, path: str = "program") -> str:
        """``path:line:column: severity: message  [code]`` - the CLI's output line."""
        suffix = f"  [{self.code}]" if self.code else ""
        return f"{path}:{self.line}:{self.column}: {self.severity}: {self.message}{suffix}"


def default_cache_dir() -> Path:
    """The persistent mypy cache: per user and per mypy version, under the system temp dir."""
    import mypy.version

    user = os.getuid() if hasattr(os, "getuid") else "user"
    return Path(tempfile.gettempdir()) / f"codemode-mypy-cache-{user}-{mypy.version.__version__}"


def _syntax_diagnostics(source: str) -> list[Diagnostic] | None:
    """Errors the parser finds, positioned exactly; None when the program parses."""
    try:
        ast.parse(source, filename="program")
    except SyntaxError as error:
        return [
            Diagnostic(max(error.lineno or 1, 1), max(error.offset or 1, 1), "error", error.msg, "syntax")
        ]
    except (ValueError, RecursionError, MemoryError) as error:
        reason = "program is too deeply nested to check" if not isinstance(error, ValueError) else str(error)
        return [Diagnostic(1, 1, "error", reason, "syntax")]
    return None


def _sandbox_diagnostics(source: str) -> list[Diagnostic]:
    """What the sandbox's compile-time policy refuses, so a program the check passes also compiles there."""
    try:
        compile_program(source, module_scope=False)
    except ProgramCompileError as refused:
        found = []
        for entry in refused.diagnostics.errors:
            head, _, message = entry.partition(": ")
            number = head.removeprefix("line ")
            line = int(number) if number.isdigit() and int(number) > 0 else 1
            found.append(Diagnostic(line, 1, "error", message or entry, "sandbox"))
        return found
    return []


def _wrap(lines: list[str]) -> str:
    body = [_PREFIX + line for line in lines]
    return "\n".join((*_HEADER, *body, _PREFIX + "pass", ""))


def _to_program(record: dict[str, object], lines: list[str]) -> list[Diagnostic]:
    """One mypy JSON record in program coordinates (with its hint as notes), or nothing for the wrapper.

    mypy's columns are exact on ASCII lines; on lines with non-ASCII text before the position they can
    fall short, so columns are only clamped into the line, never invented.
    """
    raw_line, raw_column = record.get("line"), record.get("column")
    if not isinstance(raw_line, int) or not isinstance(raw_column, int):
        return []
    line = raw_line - HEADER_LINES
    if line < 1:
        return []
    if line > len(lines):
        line, column = max(len(lines), 1), 1
    else:
        column = min(max(raw_column - len(_PREFIX), 0) + 1, len(lines[line - 1]) + 1)
    severity: Severity = "note" if record.get("severity") == "note" else "error"
    code = record.get("code")
    code_text = code if isinstance(code, str) else None
    found = [Diagnostic(line, column, severity, str(record.get("message", "")), code_text)]
    hint = record.get("hint")
    if isinstance(hint, str) and hint.strip():
        parts = [part.strip() for part in hint.splitlines() if part.strip()]
        if len(parts) > _MAX_HINT_LINES:
            parts = [*parts[: _MAX_HINT_LINES - 1], f"... and {len(parts) - _MAX_HINT_LINES + 1} more"]
        found.extend(Diagnostic(line, column, "note", part) for part in parts)
    return found


def _run_mypy(workdir: Path, cache_dir: Path) -> tuple[str, str, int]:
    from mypy import api

    config = workdir / "mypy.ini"
    config.write_text("[mypy]\n", encoding="utf-8")
    arguments = [
        "--config-file",
        str(config),
        "--python-version",
        f"{sys.version_info.major}.{sys.version_info.minor}",
        "--no-site-packages",
        "--check-untyped-defs",
        "--allow-redefinition",
        "--strict-equality",
        "--output",
        "json",
        "--cache-dir",
        str(cache_dir),
        str(workdir / _PROGRAM_FILE),
    ]
    # mypy tunes process-wide state for itself (recursion limit, garbage-collector thresholds and
    # state); the host keeps its own.
    with _MYPY_LOCK:
        limit, thresholds, collecting = sys.getrecursionlimit(), gc.get_threshold(), gc.isenabled()
        try:
            return api.run(arguments)
        finally:
            sys.setrecursionlimit(limit)
            gc.set_threshold(*thresholds)
            (gc.enable if collecting else gc.disable)()


def check_program(
    source: str,
    signatures: Iterable[ToolSignature],
    *,
    cache_dir: str | os.PathLike[str] | None = None,
) -> list[Diagnostic]:
    """Type-check ``source`` (a program body) against the stubs for ``signatures``.

    Returns the diagnostics in program coordinates, in mypy's order; an empty list means the program
    type-checks. Never raises for a bad program: a syntax error is reported at its own position without
    running mypy, and a checker crash becomes one ``error`` diagnostic on line 1.
    """
    if not isinstance(source, str):
        raise TypeError(f"check_program() needs the program as str, not {type(source).__name__}")
    text = source.replace("\r\n", "\n").replace("\r", "\n")
    syntax = _syntax_diagnostics(text)
    if syntax is not None:
        return syntax
    refused = _sandbox_diagnostics(text)
    lines = text.split("\n")
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    with tempfile.TemporaryDirectory(prefix="codemode-check-") as scratch:
        workdir = Path(scratch)
        (workdir / f"{STUB_MODULE}.pyi").write_text(render_stub_module(signatures), encoding="utf-8")
        (workdir / _PROGRAM_FILE).write_text(_wrap(lines), encoding="utf-8")
        try:
            stdout, stderr, status = _run_mypy(workdir, cache)
        except Exception as error:  # mypy itself failed: report, never crash the host
            return [Diagnostic(1, 1, "error", f"type checker failed: {error!r}", "internal")]
    found: list[Diagnostic] = []
    for raw in stdout.splitlines():
        try:
            record = json.loads(raw)
        except ValueError:
            continue
        if isinstance(record, dict) and Path(str(record.get("file", ""))).name == _PROGRAM_FILE:
            found.extend(_to_program(record, lines))
    if refused:
        return [*refused, *found]
    if status >= 2 and not found:
        detail = (stderr or stdout).strip().splitlines()
        message = detail[-1] if detail else f"exit status {status}"
        return [Diagnostic(1, 1, "error", f"type checker failed: {message}", "internal")]
    return found
