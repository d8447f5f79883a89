"""Tests for codemode.sandbox.compiler: wrapping, line numbers, and one error with every diagnostic."""

from __future__ import annotations

import ast
import dataclasses
import uuid
import warnings
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codemode.sandbox.compiler import (
    CACHE_ENTRIES,
    CACHE_SOURCE_CHARS,
    CACHE_TOTAL_CHARS,
    CompileDiagnostics,
    CompiledProgram,
    ProgramCompileError,
    ProgramPolicyError,
    ProgramSyntaxError,
    _compile_tree,
    compile_cache_info,
    compile_program,
)
from codemode.sandbox.policy import ProgramPolicy


def test_compiles_a_program_body() -> None:
    """It returns an immutable CompiledProgram keeping the filename and the source lines."""
    compiled = compile_program("x = 1\nreturn x", filename="<mine>")
    assert isinstance(compiled, CompiledProgram)
    assert compiled.filename == "<mine>"
    assert compiled.source_lines == ("x = 1", "return x")
    with pytest.raises(dataclasses.FrozenInstanceError):
        compiled.filename = "other"  # type: ignore[misc]


@pytest.mark.parametrize("source", ["", "   \n", "# only a comment"])
def test_empty_programs_compile(source: str) -> None:
    """It accepts programs without statements."""
    assert compile_program(source).source_lines == tuple(source.splitlines())


def test_top_level_await_and_return_are_allowed() -> None:
    """It compiles top-level await and return (the program is an async function body)."""
    compile_program("import asyncio\nawait asyncio.sleep(0)\nreturn 1")


@pytest.mark.parametrize(("source", "line"), [
    ("x = 1\ny = (\n", 2),
    ("x = 1\n\n  y = 2\n", 3),
    ("def f():\n    await g()\n", 2),
    ("x = 1\nlambda: (await y)\n", 2),
    ("for x in y:\n    pass\nbreak\n", 3),
])
def test_syntax_errors_carry_program_line_numbers(source: str, line: int) -> None:
    """It raises ProgramSyntaxError naming the program's own line."""
    with pytest.raises(ProgramSyntaxError) as caught:
        compile_program(source)
    assert caught.value.kind == "syntax"
    assert caught.value.diagnostics.errors[0].startswith(f"line {line}: ")


def test_every_policy_diagnostic_is_reported_at_once() -> None:
    """It collects all policy problems, sorted by line, into one ProgramPolicyError."""
    source = "a = ().__class__\nb = 1\nc = __secret\nd = 2\nmatch a:\n    case C(_x=1):\n        pass\n"
    with pytest.raises(ProgramPolicyError) as caught:
        compile_program(source)
    errors = caught.value.diagnostics.errors
    assert [e.split(":")[0] for e in errors] == ["line 1", "line 3", "line 6"]
    assert str(caught.value) == "\n".join(errors)
    assert caught.value.kind == "policy"


@pytest.mark.parametrize("source", ["x = 1\x00", "(" * 500 + ")" * 500, "-" * 200_000 + "1",
                                    "[" * 150 + "]" * 150, "x = " + "f(" * 3000 + ")" * 3000])
def test_hostile_sources_fail_cleanly(source: str) -> None:
    """It turns null bytes and absurd nesting into a compile error, never a crash."""
    try:
        compile_program(source)
    except ProgramCompileError as exc:
        assert exc.diagnostics.errors
        assert all(e.startswith("line ") for e in exc.diagnostics.errors)


def test_non_text_programs_are_rejected() -> None:
    """It refuses bytes with a syntax error instead of decoding them with a coding cookie."""
    with pytest.raises(ProgramSyntaxError, match="must be text"):
        compile_program(b"return 1")  # type: ignore[arg-type]


def test_error_classes_have_stable_distinct_codes() -> None:
    """It gives each compile error class its own code and kind."""
    assert ProgramSyntaxError.code != ProgramPolicyError.code
    assert {ProgramSyntaxError.kind, ProgramPolicyError.kind} == {"syntax", "policy"}
    error = ProgramPolicyError(CompileDiagnostics(("line 1: a", "line 2: b")))
    assert str(error) == "line 1: a\nline 2: b"


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_arbitrary_text_never_escapes_the_documented_errors(source: str) -> None:
    """It either compiles any text or raises one of the two documented errors."""
    try:
        compile_program(source)
    except (ProgramSyntaxError, ProgramPolicyError) as exc:
        assert exc.diagnostics.errors


def _entry_code(compiled: CompiledProgram) -> Any:
    return next(const for const in compiled.code.co_consts if hasattr(const, "co_varnames"))


def test_one_shot_runs_keep_top_level_names_as_fast_locals() -> None:
    """It compiles top-level names as locals of the entry function when module scope is not needed."""
    source = "total = 0\nfor i in range(3):\n    total += i\nreturn total"
    one_shot = _entry_code(compile_program(source, module_scope=False))
    session = _entry_code(compile_program(source, module_scope=True))
    assert {"total", "i"} <= set(one_shot.co_varnames)
    assert not {"total", "i"} & set(session.co_varnames)


def test_a_global_statement_keeps_module_scope() -> None:
    """It keeps module scope for a program that uses `global`, so the statement keeps its meaning."""
    source = "counter = 0\ndef bump():\n    global counter\n    counter += 1\nbump()\nreturn counter"
    entry = _entry_code(compile_program(source, module_scope=False))
    assert "counter" not in entry.co_varnames


@pytest.mark.parametrize(("source", "module_scope", "walks"), [
    ("total = 1\nreturn total", False, False),
    ("total = 1\nreturn total", True, True),
    ("def f():\n    global total\n    total = 2\nf()\nreturn total", False, True),
])
def test_top_level_names_are_collected_only_when_they_matter(
        monkeypatch: pytest.MonkeyPatch, source: str, module_scope: bool, walks: bool) -> None:
    """The top-level name walk runs at module scope or under `global`; a one-shot program skips it."""
    from codemode.sandbox import compiler

    visited: list[str] = []
    original = compiler._TopLevelNames.visit

    def counting(self: Any, node: ast.AST) -> Any:
        visited.append(type(node).__name__)
        return original(self, node)

    monkeypatch.setattr(compiler._TopLevelNames, "visit", counting)
    compile_program(source, module_scope=module_scope)
    assert bool(visited) is walks


def test_a_generated_node_without_a_position_still_compiles() -> None:
    """It fills in missing source positions when a rewritten tree needs them (and only then)."""
    module = ast.parse("x = 1")
    module.body.append(ast.Expr(value=ast.Name(id="x", ctx=ast.Load())))  # no lineno anywhere
    code = _compile_tree(module, "<program>")
    namespace: dict[str, Any] = {}
    exec(code, namespace)
    assert namespace["x"] == 1
    assert module.body[1].lineno == 1  # took its parent's position


_WARNING_PROGRAM = "x = '\\d'\nif x is 'a':\n    pass\nreturn x"  # an invalid escape, `is` with a literal


def test_compiling_leaves_the_host_warning_filters_alone() -> None:
    """In a host process a program's SyntaxWarnings are silenced and the filters restored as they were."""
    before = list(warnings.filters)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        inside = list(warnings.filters)
        compile_program(_WARNING_PROGRAM)
        assert list(warnings.filters) == inside
    assert caught == [] and list(warnings.filters) == before


def test_under_an_ignore_all_filter_the_compiler_does_not_touch_the_filters(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker ignores every warning: compiling then neither saves nor restores the filter list."""
    calls: list[object] = []
    original = warnings.catch_warnings

    def counting(*args: object, **kwargs: object) -> object:
        calls.append(kwargs)
        return original(*args, **kwargs)  # type: ignore[arg-type]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        monkeypatch.setattr(warnings, "catch_warnings", counting)
        compile_program(_WARNING_PROGRAM)
        monkeypatch.undo()
    assert calls == []
    compile_program(_WARNING_PROGRAM)  # (no ignore-all filter in front: it saves and restores)


# --- the compile cache ------------------------------------------------------------------------------


class _NoWhile(ProgramPolicy):
    """A tighter policy: rejects ``while`` loops (a different policy must never be served a cached
    program compiled under another)."""

    def visit_While(self, node: ast.While) -> ast.AST:
        self.diagnostics.append((node.lineno, "while loops are not allowed here"))
        return node


def test_a_cached_program_is_reused_for_the_same_source_and_policy() -> None:
    """The second compile of the same text under the same policy is a hit: the very same object."""
    source = f"n = 0\nwhile n < 3:\n    n += 1\nreturn n  # {uuid.uuid4().hex}"
    hits, misses, _ = compile_cache_info()
    first = compile_program(source, module_scope=False)
    assert compile_cache_info()[:2] == (hits, misses + 1)
    again = compile_program(source, module_scope=False)
    assert again is first and compile_cache_info()[:2] == (hits + 1, misses + 1)


def test_a_different_policy_scope_or_name_misses_the_cache() -> None:
    """Everything the result depends on is in the key: the policy class, module scope and file name."""
    source = f"n = 0\nwhile n < 3:\n    n += 1\nreturn n  # {uuid.uuid4().hex}"
    plain = compile_program(source, module_scope=False)
    with pytest.raises(ProgramPolicyError, match="while loops are not allowed here"):
        compile_program(source, module_scope=False, policy=_NoWhile)
    with pytest.raises(ProgramPolicyError):  # (a rejection is not cached: it is rejected again)
        compile_program(source, module_scope=False, policy=_NoWhile)
    scoped = compile_program(source, module_scope=True)
    assert scoped is not plain and scoped.code != plain.code
    assert compile_program(source, module_scope=False, filename="<other>").filename == "<other>"
    assert compile_program(source, module_scope=False) is plain


def test_cache_false_and_long_programs_compile_every_time() -> None:
    """``cache=False`` and programs over CACHE_SOURCE_CHARS never return a kept object."""
    source = f"return 1  # {uuid.uuid4().hex}"
    kept = compile_program(source)
    assert compile_program(source, cache=False) is not kept
    long = "x = 1\n" * (CACHE_SOURCE_CHARS // 6 + 1) + "return x"
    assert compile_program(long) is not compile_program(long)


def test_the_cache_is_bounded() -> None:
    """It never holds more than CACHE_ENTRIES programs; the least recently used goes first."""
    first = compile_program(f"return 0  # {uuid.uuid4().hex}")
    for index in range(CACHE_ENTRIES):
        compile_program(f"return {index}  # {uuid.uuid4().hex}")
    assert compile_cache_info()[2] == CACHE_ENTRIES
    assert compile_program(first.source_lines[0]) is not first


def test_the_cache_is_bounded_in_source_text() -> None:
    """Large programs evict older ones once the kept text would pass CACHE_TOTAL_CHARS."""
    size = CACHE_SOURCE_CHARS - 64
    count = CACHE_TOTAL_CHARS // size + 2
    programs = [f"x = '{'a' * (size - 42)}'\nreturn x  # {uuid.uuid4().hex}" for _ in range(count)]
    kept = [compile_program(program) for program in programs]
    assert compile_cache_info()[2] <= CACHE_TOTAL_CHARS // size
    assert compile_program(programs[-1]) is kept[-1] and compile_program(programs[0]) is not kept[0]
