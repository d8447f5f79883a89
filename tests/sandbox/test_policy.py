"""Tests for codemode.sandbox.policy: async admitted with name checks, default-deny kept, native fast
paths."""

from __future__ import annotations

import ast
import importlib
import textwrap
from pathlib import Path
from types import CodeType
from typing import Any

import pytest

from codemode.sandbox.compiler import ProgramPolicyError, ProgramSyntaxError, compile_program
from codemode.sandbox.policy import (
    CHECK_RESOLVED_NAME,
    ENTRY_NAME,
    RESERVED_GLOBALS,
    ProgramPolicy,
    needs_guarded_getattr,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "programs"
ESCAPES = Path(__file__).resolve().parent / "escapes"


def _names(code: CodeType) -> set[str]:
    found = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, CodeType):
            found |= _names(const)
    return found


def _policy_errors(source: str) -> tuple[str, ...]:
    with pytest.raises(ProgramPolicyError) as caught:
        compile_program(source)
    return caught.value.diagnostics.errors


@pytest.mark.parametrize("source", [
    "async def f(a, /, b, *c, d, **e):\n    return await g()\n",
    "async def f():\n    return [await x for x in y]\n",
    "await tools.search(q=1)\n",
])
def test_async_def_and_await_are_admitted(source: str) -> None:
    """It compiles async functions and await with ordinary names."""
    compile_program(source)


@pytest.mark.parametrize("signature", ["_x, /", "_x", "*_x", "**_x", "*, _x", "_getattr_=1, /"])
def test_async_def_parameters_get_the_same_name_checks(signature: str) -> None:
    """It rejects reserved parameters (dunders, hook names "_x_") of every kind in async def."""
    reserved = signature.replace("_x", "__x")
    errors = _policy_errors(f"async def f({reserved}):\n    pass\n")
    assert any("_" in error and "reserved" in error for error in errors)


@pytest.mark.parametrize("signature", ["_x, /", "_x", "*_x", "**_x", "*, _x"])
def test_single_underscore_parameters_are_program_names(signature: str) -> None:
    """A private name "_x" is an ordinary name of the program."""
    compile_program(f"async def f({signature}):\n    pass\n")


@pytest.mark.parametrize("source", [
    "async for x in y:\n    pass\n",
    "async with y as x:\n    pass\n",
    "async def f():\n    return [x async for x in y]\n",
    "async def f():\n    yield 1\n",
    "match x:\n    case [1, *rest] | {'k': rest}:\n        pass\n",
    "def f():\n    x = 1\n    def g():\n        nonlocal x\n",
])
def test_ordinary_forms_compile(source: str) -> None:
    """async for/with, async comprehensions and generators, match and nonlocal compile."""
    compile_program(source)


@pytest.mark.parametrize(("source", "needle"), [
    ("yield 1\n", "top level"),
    ("match x:\n    case C(__class__=k):\n        pass\n", "class pattern"),
    ("match x:\n    case C(format=f):\n        pass\n", "class pattern"),
    ("match x:\n    case C(_secret=f):\n        pass\n", "class pattern"),
    ("match x:\n    case C.__class__:\n        pass\n", "match value pattern"),
    ("match x:\n    case a.__class__.b:\n        pass\n", "match value pattern"),
])
def test_refused_forms_say_what_to_do(source: str, needle: str) -> None:
    """Top-level yield and guarded names in match patterns are refused with an alternative."""
    assert any(needle in error for error in _policy_errors(source))


def test_plain_generators_stay_allowed() -> None:
    """It keeps yield inside plain functions."""
    compile_program("def g():\n    yield 1\n    yield from [2]\nreturn list(g())\n")


@pytest.mark.parametrize("source", [
    "try:\n    pass\nexcept* ValueError:\n    pass\n",
    "exec('1')\n",
    "eval('1')\n",
    "from json import *\n",
    "from . import x\n",
    "class C(metaclass=M):\n    pass\n",
])
def test_default_deny_is_kept(source: str) -> None:
    """It keeps RestrictedPython's rejections (and relative imports)."""
    assert _policy_errors(source)


@pytest.mark.parametrize("name", sorted(RESERVED_GLOBALS))
@pytest.mark.parametrize("template", [
    "{n} = 1\n", "def {n}():\n    pass\n", "class {n}:\n    pass\n", "import json as {n}\n",
    "for {n} in []:\n    pass\n", "def f():\n    global {n}\n",
    "try:\n    pass\nexcept E as {n}:\n    pass\n",
])
def test_sandbox_names_cannot_be_rebound(name: str, template: str) -> None:
    """It refuses to rebind tools and ToolCallError at the top level."""
    assert any(name in error for error in _policy_errors(template.format(n=name)))


def test_sandbox_names_may_be_parameters() -> None:
    """It lets helper functions take a parameter named tools (a local name)."""
    compile_program("def f(tools):\n    return tools\nreturn f(tools)\n")


@pytest.mark.parametrize(("source", "guarded"), [
    ("x.append(1)", False),
    ("x.items()", False),
    ("s.format(1)", True),
    ("s.format_map({})", True),
    ("e.obj", True),
    ("c.send(None)", True),
    ("fut.get_loop()", True),
    ("row.f_name", True),
    ("row.first", False),
    ("type(e).__name__", False),
    ("f.__qualname__", False),
    ("p._asdict()", True),
    ("P._fields", True),
])
def test_only_guarded_attribute_loads_call_the_hook(source: str, guarded: bool) -> None:
    """It leaves attribute loads native unless the name is in the guarded set.

    A guarded load calls ``_getattr_``, or for a name decided on the resolved value alone, the check of
    what the native load found.
    """
    hooks = {"_getattr_", CHECK_RESOLVED_NAME}
    assert bool(_names(compile_program(source).code) & hooks) is guarded


def test_item_loads_and_iteration_stay_native() -> None:
    """It emits no item, iteration, unpacking, in-place or apply hooks."""
    names = _names(compile_program(
        "a, (b, c) = x[0], (1, 2)\nfor i, j in y:\n    n += i\nf(*a, **k)\nz = [q for q in w]\n").code)
    assert not names & {"_getitem_", "_getiter_", "_iter_unpack_sequence_", "_unpack_sequence_",
                        "_inplacevar_", "_apply_"}


@pytest.mark.parametrize("source", ["x[1] = 2", "del x[1]", "x.a = 1", "del x.a", "x.a += 1", "x[0] -= 1"])
def test_stores_go_through_write(source: str) -> None:
    """It routes attribute and item stores, deletes and augmented stores through _write_."""
    assert "_write_" in _names(compile_program(source).code)


def test_augmented_store_of_a_guarded_attribute_is_rejected() -> None:
    """It rejects a.format += ... (its load half would skip the guard)."""
    assert _policy_errors("s.format += 1\n")


def test_annotations_are_allowed_and_dropped_at_top_level() -> None:
    """It admits annotated assignments (dataclasses need them), also for top-level globals."""
    compile_program("x: int = 1\ny: int\nclass P:\n    a: int\n    b: str = 'x'\nreturn x\n")


@pytest.mark.parametrize(("name", "guarded"), [
    ("format", True), ("get_field", True), ("obj", True), ("tb_next", True), ("co_consts", True),
    ("append", False), ("keys", False), ("formatted", False), ("objects", False),
])
def test_needs_guarded_getattr(name: str, guarded: bool) -> None:
    """It classifies attribute names exactly by the guarded set and prefixes."""
    assert needs_guarded_getattr(name) is guarded


def test_await_in_a_plain_function_is_a_syntax_error() -> None:
    """It lets CPython's compiler reject await outside async functions, with the program line."""
    with pytest.raises(ProgramSyntaxError, match="line 3"):
        compile_program("x = 1\ndef f():\n    await g()\n")


@pytest.mark.parametrize("name", ["__post_init__", "__repr__", "__str__", "__init__", "__eq__"])
def test_a_few_special_methods_may_be_defined_in_classes(name: str) -> None:
    """It admits the reviewed special methods inside a class body only."""
    compile_program(f"class C:\n    def {name}(self):\n        return 1\n")
    assert _policy_errors(f"def {name}(self):\n    return 1\n")


@pytest.mark.parametrize("name", ["__getattr__", "__del__", "__init_subclass__", "__class_getitem__",
                                  "__format__", "__reduce__", "__missing__", "__set_name__", "__new__"])
def test_other_special_methods_stay_rejected(name: str) -> None:
    """It rejects special methods that host code could call implicitly."""
    assert _policy_errors(f"class C:\n    def {name}(self):\n        return 1\n")


@pytest.mark.parametrize("source", [
    "x.__name__ = 'y'", "del x.__qualname__", "x._fields = ()", "del p._asdict", "p._asdict += 1",
    "class T(tuple):\n    _fields = ('a',)\n", "x.__class__", "x._source", "x.__dict__", "x._y_ = 1",
])
def test_readable_private_names_stay_read_only(source: str) -> None:
    """Only loads of __name__, __qualname__ and the namedtuple API pass; stores and others do not."""
    assert _policy_errors(source)


def test_super_init_is_the_only_private_attribute_load() -> None:
    """It routes super().__init__ through its hook and still rejects other __init__ loads."""
    names = _names(compile_program("class C(B):\n    def __init__(self):\n        super().__init__()\n").code)
    assert "_codemode_super_init_" in names
    assert _policy_errors("x = C.__init__\n")


class _StdlibTraversal(ProgramPolicy):
    """The policy with the stdlib's own dispatch and child traversal (the reference)."""

    def visit(self, node: ast.AST) -> Any:
        return ast.NodeVisitor.visit(self, node)

    def node_contents_visit(self, node: Any) -> Any:
        return ast.NodeTransformer.generic_visit(self, node)


def _corpus() -> list[tuple[str, str]]:
    programs = [(f"example:{path.name}", path.read_text()) for path in sorted(EXAMPLES.glob("*.py"))]
    for module in sorted(ESCAPES.glob("test_*.py")):
        loaded = importlib.import_module(f"tests.sandbox.escapes.{module.stem}")
        for attack in getattr(loaded, "ATTACKS", ()):
            programs.append((f"attack:{attack.id}", textwrap.dedent(attack.source).strip("\n")))
    return programs


def _transform(policy: ProgramPolicy, source: str) -> tuple[str, list[tuple[int, str]]]:
    module = ast.Module(body=[ast.AsyncFunctionDef(
        name=ENTRY_NAME, args=ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[],
                                            kw_defaults=[], kwarg=None, defaults=[]),
        body=ast.parse(source).body, decorator_list=[], returns=None, lineno=1, col_offset=0)],
        type_ignores=[])
    policy.visit(module)
    return ast.dump(module, include_attributes=True), policy.diagnostics


@pytest.mark.parametrize(("label", "source"), _corpus(), ids=lambda value: str(value)[:60])
def test_the_fast_traversal_transforms_exactly_like_the_stdlib(label: str, source: str) -> None:
    """It rewrites every program (attacks included) to the same tree, with the same diagnostics."""
    assert _transform(ProgramPolicy(), source) == _transform(_StdlibTraversal(), source)
