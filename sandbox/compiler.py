"""Compile a program: parse it, wrap it as the body of an async function, apply the policy, compile.

A program is the *body* of an ``async def``: top-level ``await`` and ``return`` work. The program is
parsed as a module and its statement list becomes the body of a generated ``async def`` (so every node
keeps the program's own line numbers). In a persistent session (``module_scope=True``, the default)
names the program binds at its top level are declared ``global`` in that function, so they live in the
run's globals exactly as in a module and survive into the next run. A one-shot run
(``module_scope=False``) keeps them as the function's fast locals, which makes loops over top-level
names about 1.7x faster; functions defined at the top level still see each other (as closures), and a
program that uses a ``global`` statement anywhere keeps module scope so its meaning never changes.

The policy's diagnostics of a program are reported at once, sorted by line, as one
:class:`ProgramPolicyError`: the first :data:`MAX_DIAGNOSTICS` of them (each cut at
:data:`MAX_DIAGNOSTIC_CHARS` characters), then one line counting the rest, so that a long program with
one mistake repeated on every line gets a short answer, not megabytes of it. A program that does not
parse (or that CPython's compiler rejects after the policy, e.g. ``await`` inside a plain ``def``)
raises :class:`ProgramSyntaxError`; one too large or too deep to parse says which limit it met. Both
carry ``kind`` (``"syntax"``/``"policy"``), a stable ``code`` and the :class:`CompileDiagnostics`.

The policy is a transformer written in Python, so compiling costs far more than CPython's own compile
(about 1-2.5 ms per KB of program on the benchmark machine, ``bench/compile_cost.py``). Compiled programs
are therefore kept in a least-recently-used cache (bounded in entries and in source text) keyed by
everything the result depends on:
the source, the file name, ``module_scope`` and the policy class. A hit returns the same immutable
:class:`CompiledProgram`; a rejected program is not cached (it is rejected again, with the same
diagnostics). The cache lives in the compiling process: a persistent session's worker reuses a program it
ran before; a one-shot worker is a fresh process that starts with the template's (empty) cache.
"""

from __future__ import annotations

import ast
import contextlib
import warnings
from collections import OrderedDict
from dataclasses import dataclass
from types import CodeType
from typing import ClassVar, Final

from .guards import is_private_name
from .policy import ENTRY_NAME, NO_VALUE_NAME, RESERVED_GLOBALS, ProgramPolicy

__all__ = (
    "CACHE_ENTRIES",
    "CACHE_SOURCE_CHARS",
    "CACHE_TOTAL_CHARS",
    "MAX_DIAGNOSTICS",
    "MAX_DIAGNOSTIC_CHARS",
    "CompileDiagnostics",
    "CompiledProgram",
    "ProgramCompileError",
    "ProgramPolicyError",
    "ProgramSyntaxError",
    "compile_cache_info",
    "compile_program",
)


#: How many policy diagnostics a rejection lists before it only counts the rest.
MAX_DIAGNOSTICS: Final = 20
#: The longest a listed diagnostic may be (one quoting a huge name or literal is cut).
MAX_DIAGNOSTIC_CHARS: Final = 500


def _capped(found: list[tuple[int, str]]) -> tuple[str, ...]:
    """The listed diagnostics: the first few, sorted by line, then a count of the rest."""
    ordered = sorted(dict.fromkeys(found), key=lambda item: item[0])
    lines = []
    for number, message in ordered[:MAX_DIAGNOSTICS]:
        line = f"line {number}: {message}"
        if len(line) > MAX_DIAGNOSTIC_CHARS:
            line = line[:MAX_DIAGNOSTIC_CHARS - 3] + "..."
        lines.append(line)
    rest = len(ordered) - MAX_DIAGNOSTICS
    if rest > 0:
        last = ordered[-1][0]
        lines.append(f"... and {rest} more problem{'s' if rest != 1 else ''} up to line {last} "
                     "(fix these first; the rest are often the same mistake)")
    return tuple(lines)


@dataclass(frozen=True)
class CompileDiagnostics:
    """Every problem found in a program, each as ``"line N: message"``."""

    errors: tuple[str, ...]


class ProgramCompileError(Exception):
    """A program was rejected before running; ``str(err)`` lists every diagnostic, one per line."""

    code: ClassVar[str] = "PROGRAM_REJECTED"
    kind: ClassVar[str] = "syntax"

    def __init__(self, diagnostics: CompileDiagnostics) -> None:
        self.diagnostics = diagnostics
        super().__init__("\n".join(diagnostics.errors))


class ProgramSyntaxError(ProgramCompileError):
    """The program is not valid Python (as the body of an async function)."""

    code: ClassVar[str] = "PROGRAM_SYNTAX"
    kind: ClassVar[str] = "syntax"


class ProgramPolicyError(ProgramCompileError):
    """The program uses a construct or a name the sandbox's language policy does not allow."""

    code: ClassVar[str] = "PROGRAM_POLICY"
    kind: ClassVar[str] = "policy"


@dataclass(frozen=True)
class CompiledProgram:
    """A program ready for :func:`codemode.sandbox.interpreter.run_program` (immutable, reusable)."""

    code: CodeType
    filename: str
    source_lines: tuple[str, ...]


def _syntax(line: int | None, message: str) -> ProgramSyntaxError:
    return ProgramSyntaxError(CompileDiagnostics((f"line {line or 0}: {message}",)))


class _TopLevelNames(ast.NodeVisitor):
    """Names bound by the program's top-level scope (not inside functions, classes or comprehensions)."""

    def __init__(self) -> None:
        self.names: dict[str, None] = {}

    def _bind(self, name: str) -> None:
        if (not name.startswith("_") or is_private_name(name)) and name not in RESERVED_GLOBALS:
            self.names[name] = None

    def visit_Name(self, node: ast.Name) -> None:
        if not isinstance(node.ctx, ast.Load):
            self._bind(node.id)

    def _visit_signature(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> None:
        for default in [*node.args.defaults, *node.args.kw_defaults]:
            if default is not None:
                self.visit(default)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._bind(node.name)
        for decorator in node.decorator_list:
            self.visit(decorator)
        self._visit_signature(node)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self._bind(node.name)
        for decorator in node.decorator_list:
            self.visit(decorator)
        self._visit_signature(node)

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self._visit_signature(node)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._bind(node.name)
        for child in [*node.decorator_list, *node.bases, *(k.value for k in node.keywords)]:
            self.visit(child)

    def _visit_comprehension(
            self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp) -> None:
        for generator in node.generators:
            self.visit(generator.iter)
            for condition in generator.ifs:
                self.visit(condition)
        for child in ([node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]):
            self.visit(child)

    visit_ListComp = visit_SetComp = visit_GeneratorExp = visit_DictComp = _visit_comprehension

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        if isinstance(node.target, ast.Name):
            self._bind(node.target.id)
        self.visit(node.value)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._bind(alias.asname or alias.name.split(".")[0])

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        for alias in node.names:
            if alias.name != "*":
                self._bind(alias.asname or alias.name)

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.name:
            self._bind(node.name)
        self.generic_visit(node)


def _quiet() -> contextlib.AbstractContextManager[object]:
    """Silence the parser's and compiler's warnings (SyntaxWarning and the like) for one call.

    A worker process ignores every warning from the start (``codemode.sandbox.worker`` installs the filter),
    so there it skips ``catch_warnings``, which copies and restores the global filter list twice
    per program; in a host process the filters are saved and restored around the call.
    """
    filters = warnings.filters
    if filters and filters[0] == _IGNORE_ALL:
        return contextlib.nullcontext()
    return warnings.catch_warnings(action="ignore")


#: The filter entry ``warnings.simplefilter("ignore")`` installs.
_IGNORE_ALL: Final = ("ignore", None, Warning, None, 0)


#: A source shorter than this that the parser answers with MemoryError nests too deeply (a parse of
#: it needs far less than any memory budget).
_SMALL_SOURCE: Final = 1 << 20


def _size(source: str) -> str:
    return f"{len(source.encode('utf-8', 'surrogatepass')):,} bytes, {source.count(chr(10)) + 1:,} lines"


def _parse(source: str, filename: str) -> ast.Module:
    try:
        with _quiet():
            return ast.parse(source, filename, "exec")
    except SyntaxError as exc:
        raise _syntax(exc.lineno, f"{type(exc).__name__}: {exc.msg}") from None
    except ValueError as exc:  # e.g. "source code string cannot contain null bytes"
        raise _syntax(0, f"SyntaxError: {exc}") from None
    except RecursionError:
        raise _syntax(0, "SyntaxError: the program nests too deeply for Python's parser (its recursion "
                         "limit); flatten the deepest expression or data literal") from None
    except MemoryError:
        if len(source) < _SMALL_SOURCE:  # (CPython's parser reports a too-deep stack as MemoryError too)
            raise _syntax(0, "SyntaxError: the program nests too deeply for Python's parser (its stack "
                             "limit); flatten the deepest expression or data literal") from None
        raise _syntax(0, f"SyntaxError: the program ({_size(source)}) is too large to parse within the "
                         "run's memory budget (memory_bytes); send a smaller program and keep data in "
                         "tools") from None


def _wrap(body: list[ast.stmt]) -> ast.Module:
    entry = ast.AsyncFunctionDef(
        name=ENTRY_NAME, args=ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[],
                                            kw_defaults=[], kwarg=None, defaults=[]),
        body=body, decorator_list=[], returns=None, type_comment=None)
    last_line = max((getattr(stmt, "end_lineno", 1) or 1 for stmt in body), default=1)
    entry.lineno, entry.end_lineno, entry.col_offset, entry.end_col_offset = 1, last_line, 0, 0
    return ast.Module(body=[entry], type_ignores=[])


def _compile_tree(module: ast.Module, filename: str) -> CodeType:
    """Compile the transformed tree, filling in missing source positions only if compile needs them.

    The parser and the policy's rewrites (which copy the positions of the nodes they replace) leave
    every node positioned, and walking the whole tree to check costs as much as compiling it; so the
    tree is compiled as it is and, should a generated node lack a required position, fixed and compiled
    again.
    """
    try:
        return compile(module, filename, "exec", dont_inherit=True)
    except (TypeError, ValueError):
        ast.fix_missing_locations(module)
        return compile(module, filename, "exec", dont_inherit=True)


#: How many compiled programs the cache keeps (the least recently used goes first).
CACHE_ENTRIES: Final = 64
#: Programs longer than this (in characters) are compiled every time, never kept.
CACHE_SOURCE_CHARS: Final = 1 << 16
#: The most source text (in characters) the kept programs may add up to: in a session's worker the
#: cache lives inside the program's memory budget, so it stays small beside it.
CACHE_TOTAL_CHARS: Final = 1 << 19

_CacheKey = tuple[str, str, bool, type[ProgramPolicy]]
_cache: OrderedDict[_CacheKey, CompiledProgram] = OrderedDict()
_cached_chars = 0
_hits = 0
_misses = 0


def compile_cache_info() -> tuple[int, int, int]:
    """``(hits, misses, entries)`` of this process's compile cache (for tests and benchmarks)."""
    return _hits, _misses, len(_cache)


def compile_program(source: str, *, filename: str = "<program>", module_scope: bool = True,
                    policy: type[ProgramPolicy] = ProgramPolicy, cache: bool = True) -> CompiledProgram:
    """Compile ``source`` as the body of an async function under the sandbox's language policy.

    ``module_scope=False`` (one-shot runs) keeps top-level names as fast locals unless the program uses
    a ``global`` statement. ``policy`` is the transformer class (the sandbox's own unless a caller
    tightens it). ``cache=False`` compiles even when the cache holds the program (and keeps nothing):
    the worker's warm-up uses it, since its purpose is to run the compiler.

    Raises :class:`ProgramSyntaxError` or :class:`ProgramPolicyError` (with every diagnostic at once);
    never anything else for any ``str`` input.
    """
    global _hits, _misses, _cached_chars
    if not isinstance(source, str):
        raise _syntax(0, f"a program must be text (str), not {type(source).__name__}")
    if not cache or len(source) > CACHE_SOURCE_CHARS:
        return _compile(source, filename, module_scope, policy)
    key = (source, filename, bool(module_scope), policy)
    found = _cache.get(key)
    if found is not None:
        _hits += 1
        _cache.move_to_end(key)
        return found
    _misses += 1
    compiled = _compile(source, filename, module_scope, policy)
    _cache[key] = compiled
    _cached_chars += len(source)
    while len(_cache) > CACHE_ENTRIES or _cached_chars > CACHE_TOTAL_CHARS:
        (gone, *_), _ = _cache.popitem(last=False)
        _cached_chars -= len(gone)
    return compiled


def _compile(source: str, filename: str, module_scope: bool,
             policy_type: type[ProgramPolicy]) -> CompiledProgram:
    tree = _parse(source, filename)
    collector = _TopLevelNames()
    module = _wrap(tree.body)
    policy = policy_type()
    # The top-level names matter only at module scope or under a `global` statement (which needs the
    # keyword in the text): a one-shot program without one skips the walk.
    collect = module_scope or "global" in source
    try:
        if collect:
            for stmt in tree.body:
                collector.visit(stmt)
        policy.visit(module)
    except RecursionError:
        raise ProgramPolicyError(CompileDiagnostics((
            "line 0: the program nests too deeply for the policy check (Python's recursion limit)",
        ))) from None
    except MemoryError:
        raise ProgramPolicyError(CompileDiagnostics((
            f"line 0: the program ({_size(source)}) is too large to check within the run's memory budget "
            "(memory_bytes)",))) from None
    if policy.diagnostics:
        raise ProgramPolicyError(CompileDiagnostics(_capped(policy.diagnostics)))
    entry = module.body[0]
    assert isinstance(entry, ast.AsyncFunctionDef)
    last_line = max((getattr(stmt, "end_lineno", 1) or 1 for stmt in entry.body), default=1)
    tail = ast.Return(value=ast.Name(NO_VALUE_NAME, ast.Load()))
    head: list[ast.stmt] = [ast.Global(names=list(collector.names))]
    if not module_scope and not policy.uses_global:
        head = []
    entry.body = [*(head if collector.names else []), *entry.body, tail]
    for node, line in ((entry, 1), *((stmt, 1) for stmt in head), (tail, last_line), (tail.value, last_line)):
        assert node is not None
        node.lineno = line
        node.end_lineno = last_line if node is entry else line
        node.col_offset = node.end_col_offset = 0
    try:
        with _quiet():
            code = _compile_tree(module, filename)
    except SyntaxError as exc:
        raise _syntax(exc.lineno, f"{type(exc).__name__}: {exc.msg}") from None
    except RecursionError:
        raise _syntax(0, "SyntaxError: the program nests too deeply for Python's compiler (its recursion "
                         "limit)") from None
    except MemoryError:
        raise _syntax(0, f"SyntaxError: the program ({_size(source)}) is too large to compile within the "
                         "run's memory budget (memory_bytes)") from None
    except ValueError as exc:
        raise _syntax(0, f"SyntaxError: the program cannot be compiled ({type(exc).__name__})") from None
    return CompiledProgram(code=code, filename=filename, source_lines=tuple(source.splitlines()))
