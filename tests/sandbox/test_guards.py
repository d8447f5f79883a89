"""Tests for codemode.sandbox.guards: attribute refusals, the write guard, the type gate, the builtins."""

from __future__ import annotations

import abc
import asyncio
import asyncio.futures
import collections
import collections.abc
import datetime
import enum
import re
import string
import types
import typing
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from codemode.sandbox.facades import FACADES, guarded_import
from codemode.sandbox.guards import (
    PROGRAM_MARKER,
    READABLE_NAMES,
    RESOLVED_NAMES,
    TYPE_OF,
    WRITABLE_TYPES,
    ClassFactory,
    SafeType,
    build_safe_builtins,
    check_resolved,
    forbidden_reason,
    guarded_delattr,
    guarded_dir,
    guarded_getattr,
    guarded_hasattr,
    guarded_setattr,
    guarded_super_init,
    guarded_vars,
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


def test_super_init_hook_needs_a_real_super(program_class: type) -> None:
    """It answers __init__ for super objects over the program's own objects only."""
    assert guarded_super_init(super(program_class, program_class())) is not None
    with pytest.raises(AttributeError):
        guarded_super_init(FACADES["json"])


@pytest.mark.parametrize("target", [typing.Iterable, typing.Annotated[int, 0], typing.Callable,
                                    FACADES["json"], re.A, ValueError("x"), collections.OrderedDict()],
                         ids=repr)
def test_super_init_refuses_to_reinitialise_host_objects(target: object) -> None:
    """``super(type(x), x).__init__`` on a host object (a cached typing alias shared by every run) is a
    write the program may not make; a container it created is its own."""
    proxy = super(type(target), target)
    if isinstance(target, collections.OrderedDict):
        assert guarded_super_init(proxy) is not None
        return
    with pytest.raises(TypeError, match="only modify objects it created"):
        guarded_super_init(proxy)
    with pytest.raises(TypeError, match="only modify objects it created"):
        guarded_super_init(super(type(target)))


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
    """It leaves out exec, eval, compile, open, input, breakpoint, help, globals, locals; dir and vars
    are the guarded ones."""
    table = build_safe_builtins(guarded_import)
    forbidden = {"exec", "eval", "compile", "open", "input", "breakpoint", "help", "globals", "locals",
                 "memoryview", "exit", "quit", "__loader__", "__spec__"}
    assert table["dir"] is guarded_dir and table["vars"] is guarded_vars
    assert not forbidden & set(table)
    assert table["getattr"] is guarded_getattr
    assert table["type"] is SafeType
    assert table["__import__"] is guarded_import
    for name in ("list", "dict", "set", "tuple", "sorted", "zip", "enumerate", "min", "max", "sum", "any",
                 "all", "map", "filter", "reversed", "iter", "next", "isinstance", "super"):
        assert name in table


# -- refusals keyed on the resolved function ---------------------------------------------------------


def _program_str(**body: object) -> type:
    factory = ClassFactory()
    namespace = factory.__prepare__("S", (str,))
    namespace.update(body)
    return factory("S", (str,), namespace)


def _program_error(**body: object) -> type:
    factory = ClassFactory()
    namespace = factory.__prepare__("E", (AttributeError,))
    namespace.update(body)
    return factory("E", (AttributeError,), namespace)


def _refused_routes() -> list[tuple[str, object, str]]:
    e_class = _program_error()
    error = e_class("x", name="n", obj=object())
    formatter = type("F", (string.Formatter,), {})
    return [
        ("formatter-subclass", formatter(), "vformat"),
        ("formatter-super", super(formatter, formatter()), "get_field"),
        ("coroutine-class", types.CoroutineType, "send"),
        ("coroutine-alias", typing.Annotated[types.CoroutineType, 0], "throw"),
        ("future-class", asyncio.Future, "get_loop"),
        ("py-future-class", asyncio.futures._PyFuture, "get_loop"),  # type: ignore[attr-defined]
        ("task-class", asyncio.Task, "get_coro"),
        ("error-super", super(e_class, error), "obj"),
        ("error-class", AttributeError, "obj"),
        ("error-subclass", e_class, "obj"),
        ("error-alias", typing.Annotated[AttributeError, 0], "obj"),
        ("host-abc-alias", typing.Iterable, "register"),
        ("host-abc", collections.abc.Hashable, "register"),
        ("generator-descriptor", types.GeneratorType, "gi_running"),
        ("code-descriptor", types.CodeType, "co_consts"),
    ]


def _format_routes() -> list[tuple[str, Callable[[str], object], str, bool]]:
    """(route, make the receiver from a format text, method name, text passed as first argument)."""
    s_class = _program_str()
    return [
        ("literal", str, "format", False),
        ("literal-map", str, "format_map", False),
        ("str-subclass", s_class, "format", False),
        ("super-of-instance", lambda text: super(s_class, s_class(text)), "format", False),
        ("super-of-class", lambda text: super(s_class, s_class), "format", True),
        ("unbound", lambda text: str, "format", True),
        ("unbound-map", lambda text: str, "format_map", True),
        ("alias-forwarding", lambda text: typing.Annotated[str, 0], "format", True),
        ("str-enum-member", lambda text: enum.StrEnum("E", {"A": text}).A, "format", False),
    ]


@pytest.mark.parametrize(("route", "make", "name", "leading"), _format_routes(),
                         ids=lambda value: str(value)[:24])
def test_format_is_the_guarded_formatter_however_it_is_reached(
        route: str, make: Callable[[str], object], name: str, leading: bool) -> None:
    """Every route to str.format/format_map gives the guarded formatter: CPython's output for public
    fields, the attribute guard's refusal for private ones."""
    field = "p" if name == "format_map" else "0"
    argument: Any = {"p": 7} if name == "format_map" else 7
    for text, refused in ((f"{{{field}.real}}|{{{field}:>3}}", False), (f"{{{field}.__class__}}", True)):
        method = guarded_getattr(make(text), name)
        assert "format" in repr(method)
        args = (text, argument) if leading else (argument,)
        if refused:
            with pytest.raises(AttributeError, match="not available in the sandbox"):
                method(*args)
        else:
            assert method(*args) == "7|  7"


@pytest.mark.parametrize(("route", "obj", "name"), _refused_routes(), ids=lambda value: str(value)[:24])
def test_refusals_follow_the_function_however_it_is_reached(route: str, obj: object, name: str) -> None:
    """A subclass, a super proxy, the class itself or a forwarding alias reaches the same refusal.

    ``hasattr`` reads it as missing and ``getattr`` with a default gives the default.
    """
    with pytest.raises(AttributeError, match="not available in the sandbox"):
        guarded_getattr(obj, name)
    assert guarded_hasattr(obj, name) is False
    assert guarded_getattr(obj, name, 7) == 7


@pytest.mark.anyio
async def test_refusals_cover_bound_methods_of_live_coroutines_and_futures() -> None:
    """``c.send`` and ``future.get_loop`` are refused as bound methods too."""
    async def coro() -> None:
        return None

    c = coro()
    future = asyncio.get_running_loop().create_future()
    try:
        for obj, name in ((c, "send"), (c, "throw"), (future, "get_loop")):
            assert forbidden_reason(getattr(obj, name)) is not None
            with pytest.raises(AttributeError):
                guarded_getattr(obj, name)
    finally:
        c.close()


def test_a_program_s_own_methods_of_those_names_are_its_own() -> None:
    """Keyed on the function, the rules leave a program's own ``format``, ``obj`` and ``register`` alone."""
    namespace: dict[str, object] = {PROGRAM_MARKER: True}
    exec("def own(self, *args):\n    return 'mine'\n", namespace)
    own = namespace["own"]
    s_class = _program_str(format=own)
    assert guarded_getattr(s_class("x"), "format")() == "mine"
    e_class = _program_error(obj="plain")
    assert guarded_getattr(e_class("x"), "obj") == "plain"
    factory = ClassFactory()
    abc_class = factory("Mine", (abc.ABC,), factory.__prepare__("Mine", ()))
    assert guarded_getattr(abc_class, "register") == abc_class.register
    # (below a host ABC, a registration would change that ABC's answers too)
    hashable = factory("Mine", (collections.abc.Hashable,), factory.__prepare__("Mine", ()))
    with pytest.raises(AttributeError, match="register"):
        guarded_getattr(hashable, "register")
    assert guarded_getattr(_gen(), "send") is not None
    assert guarded_getattr(typing.Annotated[str, 0], "upper") is str.upper


def test_forbidden_reason_knows_the_functions_and_nothing_else() -> None:
    """It names the format family, the coroutine and asyncio accessors and AttributeError.obj, bound or
    unbound, and nothing that merely shares a name."""
    for value in (str.format, "x".format, "x".format_map, string.Formatter.vformat, string.Formatter().parse,
                  types.CoroutineType.send, asyncio.Future.get_loop, AttributeError.obj,
                  collections.abc.Iterable.register):
        assert forbidden_reason(value) is not None, value
    for value in (str.upper, "x".upper, bytes.decode, _gen().send, format, len, print, object(), None,
                  datetime.date.strftime, collections.abc.Iterable.__subclasshook__):
        assert forbidden_reason(value) is None, value


def test_field_defaults_are_handed_out_as_copies() -> None:
    """A namedtuple's _field_defaults is a fresh copy per read (the class's own dict stays untouched)."""
    point = collections.namedtuple("point", ["x", "y"], defaults=[0])
    first = guarded_getattr(point, "_field_defaults")
    first["y"] = 9
    assert guarded_getattr(point(1), "_field_defaults") == {"y": 0}
    assert point._field_defaults == {"y": 0}


# -- the fast decisions agree with the full ones ------------------------------------------------------


def _reachable_values() -> list[object]:
    """Facade members, their public attributes, and forbidden functions bound to many receivers."""
    class Text(str):
        pass

    class Program:
        def format(self) -> int:
            return 1

        def send(self) -> int:
            return 1

    async def coro() -> None:
        return None

    pending = coro()
    factory = ClassFactory()
    program_abc = factory("Base", (abc.ABC,), factory.__prepare__("Base", (abc.ABC,)))
    receivers: list[object] = [
        "{0}", Text("{0}"), string.Formatter(), _gen(), pending, Program(), re.A, enum.Enum,
        abc.ABC, program_abc,
        abc.ABCMeta, asyncio.Future, asyncio.Task, types.CoroutineType, AttributeError("x"),
        asyncio.futures._PyFuture,  # type: ignore[attr-defined]
    ]
    values: list[object] = []
    for receiver in receivers:
        for name in sorted(GUARDED_NAMES_FOR_TEST):
            for owner in (receiver, type(receiver)):
                value = getattr(owner, name, None)
                if value is not None:
                    values.append(value)
    for facade in FACADES.values():
        for member in object.__getattribute__(facade, "_facade_members").values():
            values.append(member)
            for attribute in dir(member):
                if not attribute.startswith("_"):
                    value = getattr(member, attribute, None)
                    if value is not None:
                        values.append(value)
    pending.close()
    return values


GUARDED_NAMES_FOR_TEST = frozenset({"format", "format_map", "send", "throw", "get_loop", "get_coro",
                                    "get_stack", "register", "get_field", "vformat", "parse", "obj"})


def test_check_resolved_refuses_exactly_what_forbidden_reason_names() -> None:
    """Its fast paths decide as :func:`forbidden_reason` does, on everything a program can reach."""
    values = _reachable_values()
    assert any(forbidden_reason(value) is not None for value in values)
    for value in values:
        refused = forbidden_reason(value) is not None
        try:
            assert check_resolved(value, "name") is value
        except AttributeError:
            assert refused, value
        else:
            assert not refused, value


@given(st.sampled_from(_reachable_values()))
def test_check_resolved_agrees_with_guarded_getattr_for_any_reachable_value(value: object) -> None:
    """The property: refused by the fast check iff the full rule names a reason."""
    try:
        check_resolved(value, "name")
    except AttributeError:
        assert forbidden_reason(value) is not None
    else:
        assert forbidden_reason(value) is None


_TYPED: list[object] = [
    1, "s", b"b", 1.5, None, [], {}, int, type, SafeType, enum.Enum, re.A, FACADES["math"],
    type(FACADES["math"]), _gen(), len, list, list[int], collections.OrderedDict, datetime.date(2020, 1, 1),
    abc.ABC,
    ClassFactory(),
]


@given(st.sampled_from(_TYPED))
def test_type_of_answers_what_safe_type_answers(obj: object) -> None:
    """The inlined ``type(x)``'s table gives exactly the one-argument SafeType call's answer."""
    assert TYPE_OF[type(obj)] is SafeType(obj)


def _receivers() -> list[object]:
    class Text(str):
        pass

    class Program:
        def format(self) -> int:
            return 1

    factory = ClassFactory()
    program_abc = factory("Base", (abc.ABC,), factory.__prepare__("Base", (abc.ABC,)))
    return ["{0}", Text("{0}"), str, string.Formatter(), string.Formatter, _gen(), Program(), Program, re.A,
            enum.Enum, abc.ABC, program_abc, asyncio.Future, asyncio.Task, types.CoroutineType,
            asyncio.futures._PyFuture, typing.Annotated[str, 0], super(Text, Text("x"))]  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", sorted(RESOLVED_NAMES))
def test_literal_loads_decide_as_getattr_does(name: str) -> None:
    """A literal load (native load + check_resolved) gives what the program's getattr gives, or refuses.

    Compared with ``getattr(obj, name, default)``, which takes guarded_getattr's full path: a change to
    how that path finishes a value (a safe replacement instead of a refusal) must reach both.
    """
    missing = object()
    for receiver in _receivers():
        full = guarded_getattr(receiver, name, missing)
        try:
            fast = check_resolved(getattr(receiver, name), name)
        except AttributeError:
            fast = missing
        assert type(fast) is type(full) and fast == full, (receiver, name)


def _made(name: str, bases: tuple[type, ...] = (), **body: object) -> type:
    factory = ClassFactory()
    namespace = factory.__prepare__(name, bases)
    namespace.update(body)
    return factory(name, bases, namespace)


@pytest.mark.parametrize("name", ["_x", "_cache", "_a1"])
def test_private_names_are_the_programs_on_its_own_objects(name: str) -> None:
    """_x names read and write on instances and classes of plain program classes (own or builtin bases)."""
    base = _made("Base", (Exception,))
    cls = _made("C", (base,), _shared=1)
    obj = cls()
    guarded_setattr(obj, name, 5)
    assert guarded_getattr(obj, name) == 5
    assert guarded_getattr(cls, "_shared") == 1
    assert guarded_vars(obj) == {name: 5}
    assert name in guarded_dir(obj)
    guarded_delattr(obj, name)
    assert guarded_hasattr(obj, name) is False


@pytest.mark.parametrize("make", [
    lambda: types.SimpleNamespace(_x=1),
    lambda: asyncio.Queue(),
    lambda: _made("Q", (asyncio.Queue,))(),
    lambda: _made("W", (string.Template,))("x"),
], ids=["host-instance", "host-queue", "subclass-of-host", "template-subclass"])
def test_private_names_of_other_objects_stay_refused(make: Callable[[], object]) -> None:
    """Host objects, subclasses of host classes and a class's metaclass keep their _x names private."""
    obj = make()
    for name in ("_x", "_loop", "_get_loop", "_dump_registry", "_invalid"):
        with pytest.raises(AttributeError, match="private"):
            guarded_getattr(obj, name)
    with pytest.raises(AttributeError, match="private"):
        guarded_setattr(obj, "_x", 1)


def test_a_program_abc_keeps_its_metaclass_private() -> None:
    """A class deriving from abc.ABC has its own _x names, not ABCMeta's (_dump_registry, _abc_impl)."""
    cls = _made("A", (abc.ABC,), _mine=1)
    assert guarded_getattr(cls, "_mine") == 1
    for name in ("_dump_registry", "_abc_registry_clear", "_abc_impl"):
        with pytest.raises(AttributeError, match="private"):
            guarded_getattr(cls, name)


@pytest.mark.parametrize("name", ["__x", "_x_", "_abc_impl", "_fields", "_print", "__dict__"])
def test_reserved_underscore_names_stay_refused_on_program_objects(name: str) -> None:
    """Dunders, mangled names, sunders, ABC state and the namedtuple API are not private program names."""
    obj = _made("P")()
    with pytest.raises(AttributeError, match="not available"):
        guarded_setattr(obj, name, 1)
