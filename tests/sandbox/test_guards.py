"""Tests for codemode.sandbox.guards: attribute refusals, the write guard, the type gate, the builtins."""

from __future__ import annotations

import asyncio
import collections
import enum
import string
import types

import pytest
from hypothesis import given
from hypothesis import strategies as st

from codemode.sandbox.facades import FACADES, guarded_import
from codemode.sandbox.guards import (
    READABLE_NAMES,
    WRITABLE_TYPES,
    ClassFactory,
    SafeType,
    build_safe_builtins,
    guarded_delattr,
    guarded_getattr,
    guarded_hasattr,
    guarded_setattr,
    guarded_super_init,
    is_program_class,
    write_guard,
)


def _gen() -> types.GeneratorType:  # type: ignore[type-arg]
    yield 1


@pytest.fixture
def program_class() -> type:
    factory = ClassFactory()
    namespace = factory.__prepare__("Point", ())
    namespace["x"] = 1
    return factory("Point", (), namespace)


@pytest.mark.parametrize(("obj", "name"), [
    ((), "__class__"),
    (len, "__self__"),
    (_gen(), "gi_frame"),
    (_gen(), "gi_code"),
    ("{0}", "format"),
    ("{0}", "format_map"),
    (str, "format"),
    (string.Formatter(), "get_field"),
    (string.Formatter, "vformat"),
    (AttributeError("x"), "obj"),
])
def test_getattr_refuses_private_and_introspection_names(obj: object, name: str) -> None:
    """It raises AttributeError for _-names, frame/generator internals, formatting and error holders.

    ``hasattr`` and ``getattr`` with a default read a refused name as a missing one, revealing nothing.
    """
    with pytest.raises(AttributeError, match="not available in the sandbox"):
        guarded_getattr(obj, name)
    assert guarded_hasattr(obj, name) is False
    sentinel = object()
    assert guarded_getattr(obj, name, sentinel) is sentinel


def test_hasattr_still_requires_a_str() -> None:
    """A name that is not an exact str is a TypeError for hasattr too, as in CPython."""
    with pytest.raises(TypeError):
        guarded_hasattr((), 3)  # type: ignore[arg-type]


@pytest.mark.parametrize(("obj", "expected"), [
    (ValueError, "ValueError"), (len, "len"), (collections.OrderedDict, "OrderedDict"),
])
def test_names_and_qualified_names_are_readable(obj: object, expected: str) -> None:
    """``__name__`` and ``__qualname__`` are plain strings: readable, never writable."""
    assert guarded_getattr(obj, "__name__") == expected
    assert guarded_getattr(obj, "__qualname__").endswith(expected)
    assert guarded_hasattr(obj, "__name__") is True
    with pytest.raises(AttributeError, match="private"):
        guarded_setattr(obj, "__name__", "other")
    with pytest.raises(AttributeError, match="private"):
        guarded_delattr(obj, "__qualname__")


def test_the_namedtuple_api_is_readable_on_namedtuples_only(program_class: type) -> None:
    """``_asdict``, ``_replace``, ``_make``, ``_fields`` and ``_field_defaults`` of namedtuples work."""
    point = collections.namedtuple("point", ["x", "y"], defaults=[0])
    p = point(1, 2)
    assert guarded_getattr(p, "_asdict")() == {"x": 1, "y": 2}
    assert guarded_getattr(p, "_replace")(y=5) == (1, 5)
    assert guarded_getattr(point, "_make")([3, 4]) == (3, 4)
    assert guarded_getattr(point, "_fields") == ("x", "y")
    assert guarded_getattr(p, "_field_defaults") == {"y": 0}
    for other in ((1, 2), program_class, (), "text", types.SimpleNamespace(_fields=("x",))):
        with pytest.raises(AttributeError, match="private"):
            guarded_getattr(other, "_fields")
    with pytest.raises(AttributeError, match="private"):
        guarded_setattr(point, "_fields", ("z",))
    with pytest.raises(AttributeError, match="private"):
        guarded_getattr(p, "_source")  # (only the listed names)


@pytest.mark.anyio
async def test_getattr_refuses_coroutine_driving_and_loop_access() -> None:
    """It refuses send/throw on coroutines and get_loop on futures."""
    async def coro() -> None:
        return None

    c = coro()
    with pytest.raises(AttributeError):
        guarded_getattr(c, "send")
    c.close()
    future = asyncio.get_running_loop().create_future()
    with pytest.raises(AttributeError):
        guarded_getattr(future, "get_loop")


def test_getattr_allows_ordinary_names_and_defaults() -> None:
    """It returns ordinary attributes, and the default when one is given."""
    assert guarded_getattr([], "append") is not None
    assert guarded_getattr(object(), "missing", 7) == 7
    assert guarded_getattr(_gen(), "send") is not None  # plain generators are fine


def test_getattr_requires_an_exact_str() -> None:
    """It refuses str subclasses that could lie about their content."""
    class Lying(str):
        pass

    with pytest.raises(TypeError):
        guarded_getattr((), Lying("__class__"))


@given(st.text(min_size=1).map(lambda s: "_" + s).filter(lambda name: name not in READABLE_NAMES))
def test_every_underscore_name_is_refused(name: str) -> None:
    """It refuses every _-prefixed name but the readable strings, whatever follows."""
    with pytest.raises(AttributeError, match="not available in the sandbox"):
        guarded_getattr(object(), name)


@pytest.mark.parametrize("obj", [{}, [], set(), bytearray(), collections.deque(), collections.Counter()])
def test_write_guard_passes_containers_through(obj: object) -> None:
    """It returns program-created containers themselves."""
    assert write_guard(obj) is obj


def test_write_guard_passes_program_classes_and_instances(program_class: type) -> None:
    """It lets a program write to its own classes and their instances."""
    assert is_program_class(program_class)
    instance = program_class()
    assert write_guard(program_class) is program_class
    assert write_guard(instance) is instance
    guarded_setattr(instance, "y", 2)
    guarded_delattr(instance, "y")


@pytest.mark.parametrize("obj", [
    FACADES["json"], collections.Counter, int, len, (lambda: 0), types, ValueError("x"), string.Template("x"),
    enum.Enum,
])
def test_write_guard_refuses_everything_else(obj: object) -> None:
    """It wraps modules, host classes, functions and host instances in a view that refuses writes."""
    view = write_guard(obj)
    assert view is not obj
    for attempt in (lambda: setattr(view, "a", 1), lambda: delattr(view, "a"),
                    lambda: view.__setitem__("a", 1), lambda: view.__delitem__("a"), lambda: view.a):
        with pytest.raises(TypeError, match="only modify objects it created"):
            attempt()


def test_writable_types_never_hold_metaclasses(program_class: type) -> None:
    """It remembers writable instance types only, so the inlined fast path never admits a class."""
    write_guard(program_class())
    write_guard(collections.OrderedDict())
    assert program_class in WRITABLE_TYPES
    assert collections.OrderedDict in WRITABLE_TYPES
    assert not any(issubclass(t, type) for t in WRITABLE_TYPES)


def test_super_init_hook_needs_a_real_super() -> None:
    """It answers __init__ for super objects only."""
    class Base:
        pass

    assert guarded_super_init(super(Base, Base())) is not None
    with pytest.raises(AttributeError):
        guarded_super_init(FACADES["json"])


def test_setattr_checks_the_name() -> None:
    """It refuses private names in setattr even on writable objects."""
    with pytest.raises(AttributeError):
        guarded_setattr({}, "__class__", int)


def test_type_gate() -> None:
    """It answers one-argument type(), refuses three arguments, and hides the real type."""
    assert SafeType(1) is int
    assert SafeType(int) is SafeType
    assert isinstance(int, SafeType)
    assert not isinstance(1, SafeType)
    assert issubclass(enum.EnumMeta, SafeType)
    with pytest.raises(TypeError, match="exactly one argument"):
        SafeType("X", (), {})
    with pytest.raises(TypeError):
        SafeType(SafeType)("X", (), {})


def test_class_factory_picks_the_right_metaclass() -> None:
    """It builds enums (and other metaclass-driven classes) like a class statement would."""
    factory = ClassFactory()
    namespace = factory.__prepare__("Color", (enum.Enum,))
    namespace["RED"] = 1
    color = factory("Color", (enum.Enum,), namespace)
    assert color.RED.value == 1
    assert is_program_class(color)


def test_class_factory_refuses_type_subclasses() -> None:
    """It refuses to derive program metaclasses from the type gate."""
    with pytest.raises(TypeError):
        ClassFactory()("Meta", (SafeType,), {})


def test_builtins_hold_no_side_doors() -> None:
    """It leaves out exec, eval, compile, open, input, breakpoint, help, globals, vars, locals, dir."""
    table = build_safe_builtins(guarded_import)
    forbidden = {"exec", "eval", "compile", "open", "input", "breakpoint", "help", "globals", "vars",
                 "locals", "dir", "memoryview", "exit", "quit", "__loader__", "__spec__", "ExceptionGroup"}
    assert not forbidden & set(table)
    assert table["getattr"] is guarded_getattr
    assert table["type"] is SafeType
    assert table["__import__"] is guarded_import
    for name in ("list", "dict", "set", "tuple", "sorted", "zip", "enumerate", "min", "max", "sum", "any",
                 "all", "map", "filter", "reversed", "iter", "next", "isinstance", "super"):
        assert name in table
