"""Run one program under plain CPython and in the sandbox, and say what each printed and returned.

A program is the body of an async function, as the sandbox runs it. Under plain CPython it is compiled
as exactly that (real builtins, real modules, the same ``tools`` proxy and ``ToolCallError``), its
``print`` output captured from standard output, its value passed through ``json.dumps``/``json.loads``
(what the sandbox promises for a result). In the sandbox it runs through the real isolated worker.
Each side reports an :class:`Outcome`: the printed text, the value, and the error line
(``"TypeName: message"``) if it raised.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import io
import json
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

from codemode.sandbox import Sandbox, SandboxLimits
from codemode.sandbox._proxy import ToolCallError, ToolsProxy
from codemode.sandbox.compiler import _TopLevelNames
from codemode.sandbox.facades import CURRENT_TASKS, TaskRegistry
from codemode.sandbox.policy import ENTRY_NAME

PROGRAMS = Path(__file__).parent / "programs"
TOOL_NAMES = ("echo", "fail")
LIMITS = SandboxLimits(wall_seconds=10.0, cpu_seconds=5.0)
_HEADER = re.compile(r"^# --- (?P<name>[\w.-]+)(?: expect: (?P<expect>.*))?$", re.MULTILINE)


@dataclass(frozen=True)
class Program:
    """One program of a file: ``expect`` is the refusal text a documented refusal must contain."""

    id: str
    source: str
    expect: str | None = None


@dataclass(frozen=True)
class Outcome:
    """What a run printed, returned (JSON) and raised."""

    printed: str
    value: Any
    error: str | None


def load(pattern: str = "*.txt") -> list[Program]:
    """Every program of the files matching ``pattern``: ``# --- name`` starts one."""
    found: list[Program] = []
    for path in sorted(PROGRAMS.glob(pattern)):
        text = path.read_text(encoding="utf-8")
        heads = list(_HEADER.finditer(text))
        for index, head in enumerate(heads):
            end = heads[index + 1].start() if index + 1 < len(heads) else len(text)
            body = textwrap.dedent(text[head.end():end]).strip("\n")
            found.append(Program(f"{path.stem}/{head['name']}", body + "\n", head["expect"]))
    return found


async def echo(name: str, args: Any) -> Any:
    """The tool handler: ``fail`` fails, every other tool echoes its arguments."""
    from codemode.sandbox import ToolCallFailure

    if name == "fail":
        raise ToolCallFailure("the tool failed on purpose", "E_PURPOSE")
    return {"tool": name, "args": args}


def _error_line(text: str) -> str:
    return text.strip().splitlines()[-1]


def _as_function(source: str) -> ast.Module:
    """The program as the body of ``async def __program__()``; with a ``global`` statement, its
    top-level names are globals (as the sandbox runs such a program)."""
    body = ast.parse(source).body
    if "global" in source:
        names = _TopLevelNames()
        for stmt in body:
            names.visit(stmt)
        if names.names:
            body = [ast.Global(list(names.names)), *body]
    arguments = ast.arguments([], [], None, [], [], None, [])
    entry = ast.AsyncFunctionDef(ENTRY_NAME, arguments, body, [])
    return ast.fix_missing_locations(ast.Module([entry], []))


async def _plain_body(program: Program) -> Any:
    namespace: dict[str, Any] = {"tools": ToolsProxy(TOOL_NAMES, echo), "ToolCallError": ToolCallError,
                                 "__name__": "program"}
    registry = TaskRegistry()
    token = CURRENT_TASKS.set(registry)
    try:
        exec(compile(_as_function(program.source), "<program>", "exec", dont_inherit=True), namespace)
        return await asyncio.wait_for(namespace[ENTRY_NAME](), 10)
    finally:
        await registry.aclose()
        CURRENT_TASKS.reset(token)


def _run_plain(program: Program) -> Outcome:
    out = io.StringIO()
    error = None
    try:
        with contextlib.redirect_stdout(out):
            value = asyncio.run(_plain_body(program))
        value = json.loads(json.dumps(value))
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
        value = None
    printed = out.getvalue()
    return Outcome(printed[:-1] if printed.endswith("\n") else printed, value, error)


async def run_cpython(program: Program) -> Outcome:
    """The program under plain CPython, as the body of an async function, on its own event loop."""
    return await anyio.to_thread.run_sync(_run_plain, program)


async def run_sandbox(sandbox: Sandbox, program: Program) -> Outcome:
    """The program in the sandbox (through the isolated worker)."""
    with anyio.fail_after(30):
        result = await sandbox.run(program.source, tool_names=TOOL_NAMES, call_tool=echo, limits=LIMITS)
    error = None if result.error is None else _error_line(result.error.message)
    return Outcome("\n".join(result.logs), result.value, error)
