"""Tests for codemode.sandbox.facades: the allow-list, read-only facades, and the asyncio wrappers."""

from __future__ import annotations

import ast
import asyncio
import collections
import copy
import dataclasses
import datetime
import decimal
import enum
import fractions
import functools
import gc
import hashlib
import json
import keyword
import pickle
import random
import re
import statistics
import string
import textwrap
import types
import typing
import uuid

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from codemode.sandbox import Sandbox
from codemode.sandbox.facades import (
    ALLOWED_MODULES,
    CURRENT_TASKS,
    FACADES,
    ModuleFacade,
    ProgramScope,
    SafeAwaitable,
    TaskRegistry,
    coroutine_of,
    guarded_import,
)
from codemode.sandbox.guards import (
    NAMEDTUPLE_NAMES,
    PROGRAM_MARKER,
    ClassFactory,
    check_code_name,
    check_namespace_name,
    forbidden_reason,
    guarded_getattr,
    guarded_hasattr,
)
from codemode.sandbox.interpreter import compile_program, run_program

BRIEF_MODULES = {
    "json", "re", "math", "statistics", "datetime", "collections", "itertools", "functools", "string",
    "textwrap", "random", "decimal", "fractions", "typing", "dataclasses", "enum", "heapq", "bisect",
    "operator", "base64", "hashlib", "uuid", "copy", "asyncio",
    # the everyday surface of the wider standard library
    "abc", "array", "calendar", "contextlib", "csv", "difflib", "fnmatch", "graphlib", "html", "io",
    "numbers", "os", "os.path", "pathlib", "pprint", "secrets", "shlex", "struct", "time", "types",
    "unicodedata",
    "urllib", "urllib.parse", "zlib", "zoneinfo", "collections.abc",
}
_MUTABLE = (dict, list, set, bytearray, collections.deque)


@pytest.fixture
async def registry() -> object:
    tasks = TaskRegistry()
    token = CURRENT_TASKS.set(tasks)
    yield tasks
    await tasks.aclose()
    CURRENT_TASKS.reset(token)


def test_allow_list_is_exactly_the_reviewed_modules() -> None:
    """It offers every module of the allow-list and nothing else."""
    assert set(ALLOWED_MODULES) == BRIEF_MODULES
    assert list(ALLOWED_MODULES) == sorted(ALLOWED_MODULES)


@pytest.mark.parametrize("name", sorted(BRIEF_MODULES))
def test_facades_hold_no_modules_and_no_shared_mutable_state(name: str) -> None:
    """It exposes no module objects, no _-names and no mutable containers (members or their attributes)."""
    members = object.__getattribute__(FACADES[name], "_facade_members")
    for member_name, member in members.items():
        assert not member_name.startswith("_")
        assert not isinstance(member, types.ModuleType), member_name
        if isinstance(member, ModuleFacade):  # (a package's submodule: the same facade import gives)
            assert member is FACADES[f"{name}.{member_name}"], member_name
            continue
        assert not isinstance(member, _MUTABLE), member_name
        for attribute in dir(member):
            if attribute.startswith("_"):
                continue
            value = getattr(member, attribute, None)
            assert not isinstance(value, types.ModuleType), f"{member_name}.{attribute}"
            assert type(value) not in (dict, list, set, bytearray), f"{member_name}.{attribute}"


@pytest.mark.parametrize(("module", "member"), [
    ("operator", "setitem"), ("operator", "iadd"), ("os", "environ"), ("os", "system"), ("os", "getcwd"),
    ("os.path", "expanduser"), ("os.path", "expandvars"), ("os.path", "abspath"), ("os.path", "exists"),
    ("io", "open"), ("io", "FileIO"), ("pathlib", "Path"), ("csv", "register_dialect"),
    ("csv", "field_size_limit"), ("calendar", "setfirstweekday"), ("contextlib", "redirect_stdout"),
    ("contextlib", "chdir"), ("abc", "ABCMeta"), ("shlex", "shlex"), ("time", "get_clock_info"),
    ("typing", "get_type_hints"), ("typing", "ForwardRef"), ("string", "Formatter"), ("uuid", "uuid1"),
    ("uuid", "getnode"), ("hashlib", "file_digest"), ("json", "codecs"), ("json", "decoder"),
    ("asyncio", "get_running_loop"), ("asyncio", "ensure_future"), ("asyncio", "Future"),
    ("decimal", "DefaultContext"), ("enum", "EnumMeta"), ("dataclasses", "make_dataclass"),
    ("random", "_os"), ("collections", "_collections_abc"), ("random", "_inst"), ("typing", "get_overloads"),
])
def test_dangerous_members_are_left_out(module: str, member: str) -> None:
    """It leaves out the members that bypass a guard or reach the host."""
    with pytest.raises(AttributeError, match="in the sandbox"):
        getattr(FACADES[module], member)


def test_facades_are_read_only_and_uncopyable() -> None:
    """It refuses writes and pickling; copies are the facade itself."""
    facade = FACADES["json"]
    with pytest.raises(TypeError, match="read-only"):
        facade.dumps = None  # type: ignore[attr-defined]
    with pytest.raises(TypeError, match="read-only"):
        del facade.dumps  # type: ignore[attr-defined]
    assert copy.copy(facade) is facade
    assert copy.deepcopy(facade) is facade
    with pytest.raises(TypeError):
        pickle.dumps(facade)


@pytest.mark.parametrize("name", sorted(BRIEF_MODULES))
def test_facade_classes_are_sealed(name: str) -> None:
    """Each facade's own class refuses writes, calls and subclasses, for host code too; no instance state."""
    facade = FACADES[name]
    cls = type(facade)
    member = next(iter(object.__getattribute__(facade, "_facade_members")))
    with pytest.raises(TypeError, match="read-only"):
        setattr(cls, member, None)
    with pytest.raises(TypeError, match="read-only"):
        delattr(cls, member)
    with pytest.raises(TypeError, match="cannot be created"):
        cls()
    with pytest.raises(TypeError, match="subclassed"):
        type("Sub", (cls,), {})
    with pytest.raises(TypeError, match="subclassed"):
        type.__new__(type, "Sub", (cls,), {})
    with pytest.raises(AttributeError):
        object.__setattr__(facade, member, None)
    with pytest.raises(AttributeError):
        object.__getattribute__(facade, "__dict__")
    assert type(cls.__dict__) is types.MappingProxyType


@pytest.mark.parametrize("name", sorted(BRIEF_MODULES))
def test_facade_members_read_as_themselves(name: str) -> None:
    """Every member reads back as the very object reviewed (functions are not bound to the facade)."""
    facade = FACADES[name]
    for member_name, member in object.__getattribute__(facade, "_facade_members").items():
        assert getattr(facade, member_name) is member, member_name
        assert getattr(type(facade), member_name) is member, member_name


def test_facades_do_not_answer_their_name() -> None:
    """It refuses __name__, so ``from m import x`` cannot fall back to sys.modules."""
    with pytest.raises(AttributeError):
        FACADES["collections"].__name__  # noqa: B018


def test_import_hands_out_facades_only() -> None:
    """It returns the facade for allowed names and an ImportError naming the allow-list otherwise."""
    assert guarded_import("json") is FACADES["json"]
    assert guarded_import("os.path") is FACADES["os"]  # (import os.path binds os)
    assert guarded_import("os.path", None, None, ("join",)) is FACADES["os.path"]
    for bad in ("subprocess", "json.decoder", "sys", "builtins", "os.sys"):
        with pytest.raises(ImportError, match="allowed modules: abc, array, asyncio, base64"):
            guarded_import(bad)
    with pytest.raises(ImportError, match="relative"):
        guarded_import("json", None, None, (), 1)
    with pytest.raises(ImportError):
        guarded_import(42)


def test_json_refuses_a_custom_encoder_class() -> None:
    """It accepts the usual keyword arguments but not cls=."""
    dumps = FACADES["json"].dumps  # type: ignore[attr-defined]
    assert dumps({"b": 1, "a": 2}, sort_keys=True) == '{"a": 2, "b": 1}'
    with pytest.raises(TypeError):
        dumps({}, cls=object)


def test_hashlib_constants_are_immutable() -> None:
    """It hands in frozen copies of the algorithm sets."""
    assert isinstance(FACADES["hashlib"].algorithms_available, frozenset)  # type: ignore[attr-defined]


@pytest.mark.parametrize("helper", ["dataclass", "total_ordering"])
def test_class_rewriting_helpers_refuse_host_classes(helper: str) -> None:
    """It lets dataclass/total_ordering modify only program classes."""
    module = FACADES["dataclasses" if helper == "dataclass" else "functools"]
    with pytest.raises(TypeError, match="defined by the program"):
        getattr(module, helper)(collections.OrderedDict)


def test_wraps_refuses_host_functions() -> None:
    """It lets wraps/update_wrapper modify only program functions."""
    with pytest.raises(TypeError, match="defined by the program"):
        FACADES["functools"].wraps(len)(len)  # type: ignore[attr-defined]


@pytest.mark.anyio
async def test_awaitables_start_lazily_and_only_once(registry: TaskRegistry) -> None:
    """It starts the coroutine on await and refuses a second await."""
    aw = FACADES["asyncio"].sleep(0, "done")  # type: ignore[attr-defined]
    assert isinstance(aw, SafeAwaitable)
    assert await aw == "done"
    with pytest.raises(RuntimeError, match="already awaited"):
        await aw


@pytest.mark.anyio
async def test_gather_runs_concurrently_and_returns_a_list(registry: TaskRegistry) -> None:
    """It overlaps the awaitables and returns their results in order."""
    aio = FACADES["asyncio"]
    with anyio.fail_after(2):
        start = anyio.current_time()
        result = await aio.gather(aio.sleep(0.2, 1), aio.sleep(0.2, 2))  # type: ignore[attr-defined]
        assert result == [1, 2]
        assert anyio.current_time() - start < 0.39


@pytest.mark.anyio
async def test_gather_cancels_siblings_when_one_fails(registry: TaskRegistry) -> None:
    """It cancels the other awaitables when one raises (nothing keeps running)."""
    aio = FACADES["asyncio"]
    finished: list[str] = []

    async def slow() -> None:
        await asyncio.sleep(5)
        finished.append("slow")

    async def boom() -> None:
        raise ValueError("boom")

    with anyio.fail_after(2):
        with pytest.raises(ValueError):
            await aio.gather(slow(), boom())  # type: ignore[attr-defined]
        await asyncio.sleep(0.05)
    assert finished == []


@pytest.mark.anyio
async def test_gather_rejects_non_awaitables(registry: TaskRegistry) -> None:
    """It names what it accepts when handed something else."""
    with pytest.raises(TypeError, match="expects awaitables"):
        FACADES["asyncio"].gather(1)  # type: ignore[attr-defined]
    with pytest.raises(TypeError):
        coroutine_of(object(), "x")


@pytest.mark.anyio
async def test_as_completed_yields_in_completion_order(registry: TaskRegistry) -> None:
    """It yields awaitables that resolve in the order the inputs finish."""
    aio = FACADES["asyncio"]
    with anyio.fail_after(2):
        order = [await f for f in aio.as_completed([aio.sleep(0.1, "slow"), aio.sleep(0, "fast")])]
    assert order == ["fast", "slow"]


@pytest.mark.anyio
async def test_wait_for_times_out(registry: TaskRegistry) -> None:
    """It raises TimeoutError when the awaitable takes too long."""
    aio = FACADES["asyncio"]
    with anyio.fail_after(2), pytest.raises(TimeoutError):
        await aio.wait_for(aio.sleep(1), 0.01)  # type: ignore[attr-defined]


@pytest.mark.parametrize("delay", ["1", None, float("nan"), [1]])
def test_sleep_validates_its_delay(delay: object) -> None:
    """It refuses delays that are not numbers."""
    with pytest.raises(TypeError):
        FACADES["asyncio"].sleep(delay)  # type: ignore[attr-defined]


@pytest.mark.anyio
async def test_registry_cancels_leftover_tasks(registry: TaskRegistry) -> None:
    """It cancels tasks a run started but never awaited."""
    aio = FACADES["asyncio"]
    aio.gather(aio.sleep(10))  # type: ignore[attr-defined]
    with anyio.fail_after(2):
        await registry.aclose()


def test_helpers_need_a_running_program() -> None:
    """It refuses to start tasks outside a run."""
    aio = FACADES["asyncio"]

    async def body() -> None:
        with pytest.raises(RuntimeError, match="while a program runs"):
            aio.gather(aio.sleep(0))  # type: ignore[attr-defined]

    asyncio.run(body())


# -- helpers that take names from the program ------------------------------------------------------


def _program_function() -> types.FunctionType:
    namespace: dict[str, object] = {PROGRAM_MARKER: True}
    exec("def w(*a):\n    return a", namespace)
    function = namespace["w"]
    assert isinstance(function, types.FunctionType)
    return function


def _program_class(name: str, bases: tuple[type, ...] = (), **body: object) -> type:
    factory = ClassFactory()
    namespace = factory.__prepare__(name, bases)
    namespace.update(body)
    return factory(name, bases, namespace)


@pytest.mark.parametrize(("assigned", "updated"), [
    ((), ("__builtins__",)), ((), ("__globals__",)), (("__code__",), ()), (("__globals__",), ()),
    (("__dict__",), ()), (("__name__", "__defaults__"), ()), ((), ("__dict__", "__kwdefaults__")),
])
def test_update_wrapper_refuses_names_outside_its_defaults(assigned: tuple[str, ...],
                                                           updated: tuple[str, ...]) -> None:
    """It refuses assigned=/updated= names other than WRAPPER_ASSIGNMENTS / __dict__, for wraps too."""
    functools_facade = FACADES["functools"]
    wrapper = _program_function()
    before = dict(wrapper.__globals__)
    with pytest.raises(ValueError, match="may only name"):
        functools_facade.update_wrapper(wrapper, json.dumps, assigned, updated)  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="may only name"):
        functools_facade.wraps(json.dumps, assigned, updated)  # type: ignore[attr-defined]
    assert wrapper.__globals__ == before


def test_update_wrapper_keeps_its_ordinary_behaviour() -> None:
    """It copies the default names, merges __dict__, and gives a host function's annotations as a copy."""
    functools_facade = FACADES["functools"]
    wrapper = _program_function()
    made = functools_facade.wraps(json.dumps)(wrapper)  # type: ignore[attr-defined]
    assert made is wrapper and wrapper.__name__ == "dumps" and wrapper.__doc__ == json.dumps.__doc__
    other = _program_function()
    update_wrapper = functools_facade.update_wrapper  # type: ignore[attr-defined]
    update_wrapper(other, typing.cast, assigned=("__annotations__",), updated=())
    assert other.__annotations__ == typing.cast.__annotations__
    assert other.__annotations__ is not typing.cast.__annotations__
    named = _program_function()
    update_wrapper(named, wrapper, assigned=["__name__"], updated=iter(()))
    assert named.__name__ == "dumps"


@pytest.mark.parametrize("names", [
    [("__annotations__", {"x": int}), ("m", 1)], [("__reduce_ex__", len), ("A", 1)], "__copy__ A",
    "A,_missing_", ["_generate_next_value_"], {"__init_subclass__": classmethod(len)},
    [("_ignore_", ["A"]), ("A", 1)], [(1, 2)], ["A", 2],
])
def test_enum_functional_api_refuses_hook_names(names: object) -> None:
    """It refuses names starting with "_" (protocol and enum hooks) and names that are not str."""
    with pytest.raises((ValueError, TypeError), match="enum functional API"):
        FACADES["enum"].Enum("E", names)  # type: ignore[attr-defined]


def test_enum_functional_api_refuses_module_and_names_the_caller() -> None:
    """It refuses module= and records the calling program's module name, as CPython's frame hack does."""
    enum_facade = FACADES["enum"]
    with pytest.raises(TypeError, match="module="):
        enum_facade.Enum("E", "A", module="os")  # type: ignore[attr-defined]
    namespace: dict[str, object] = {"__name__": "program", "enum": enum_facade}
    exec("E = enum.IntFlag('E', 'A B', qualname='Q.E')", namespace)
    made = namespace["E"]
    assert isinstance(made, type)
    assert (made.__module__, made.__qualname__, made.B.value) == ("program", "Q.E", 2)  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", ["Enum", "Flag", "IntEnum", "IntFlag", "StrEnum"])
def test_facade_enums_stand_for_the_real_ones(name: str) -> None:
    """They answer isinstance/issubclass as the real classes, keep their repr, and lookups still work."""
    facade, real = getattr(FACADES["enum"], name), getattr(enum, name)
    assert facade is not real and issubclass(facade, real)
    assert repr(facade) == repr(real)
    assert issubclass(real, facade) and issubclass(facade, enum.Enum)
    sample = {"Enum": enum.Enum("S", "A").A, "Flag": re.A, "IntEnum": enum.IntEnum("S", "A").A,
              "IntFlag": re.A, "StrEnum": enum.StrEnum("S", "A").A}[name]
    assert isinstance(sample, facade)
    members = facade("Made", "X Y")
    assert members(members.Y.value) is members.Y
    assert members["X"].name == "X"


@pytest.mark.parametrize("name", ["__class__", "a b", "x=1", "class", "__x", "ｉｆ", "\u2163", 3, "x\n"])
def test_dataclass_refuses_field_names_that_are_not_plain_identifiers(name: object) -> None:
    """It refuses a program class whose annotation keys would be pasted into generated source."""
    typed = typing.TypedDict("T", {name: int})  # type: ignore[misc]
    target = _program_class("Q", (typed,))
    with pytest.raises((ValueError, TypeError), match=r"dataclasses\.dataclass field"):
        FACADES["dataclasses"].dataclass(target)  # type: ignore[attr-defined]


def test_dataclass_accepts_ordinary_fields_and_the_kw_only_marker() -> None:
    """It accepts identifiers, a single underscore (KW_ONLY) and _private names."""
    target = _program_class("Q", __annotations__={"x": int, "_": dataclasses.KW_ONLY, "_p": int, "é": int},
                            _p=0, é=1)
    made = FACADES["dataclasses"].dataclass(target)  # type: ignore[attr-defined]
    assert repr(made(1)) == "Q(x=1, _p=0, é=1)"


@given(st.text(max_size=12))
def test_every_code_name_accepted_is_one_plain_name_in_source(name: str) -> None:
    """A name check_code_name accepts, pasted into source, is exactly one name: no injection, no dunder."""
    try:
        check_code_name(name, "test")
    except ValueError:
        return
    tree = ast.parse(f"self.{name} = {name}")
    (statement,) = tree.body
    assert isinstance(statement, ast.Assign) and isinstance(statement.value, ast.Name)
    assert statement.value.id == name and not name.startswith("__") and not keyword.iskeyword(name)


@given(st.text(max_size=12))
def test_namespace_names_accepted_never_start_with_an_underscore(name: str) -> None:
    """check_namespace_name accepts exactly the str names that do not start with "_"."""
    try:
        check_namespace_name(name, "test")
    except ValueError:
        assert name.startswith("_")
    else:
        assert not name.startswith("_")


def test_namedtuple_refuses_module_and_names_the_caller() -> None:
    """It refuses module= and gives the class the calling program's module name."""
    with pytest.raises(TypeError, match="module="):
        FACADES["collections"].namedtuple("P", "x", module="os")  # type: ignore[attr-defined]
    namespace: dict[str, object] = {"__name__": "program", "collections": FACADES["collections"]}
    exec("P = collections.namedtuple('P', 'x y', defaults=[0])", namespace)
    made = namespace["P"]
    assert isinstance(made, type) and made.__module__ == "program" and made(1) == (1, 0)


def test_deepcopy_refuses_a_memo() -> None:
    """It refuses a memo (which would collect the originals) and copies without one."""
    with pytest.raises(TypeError, match="memo"):
        FACADES["copy"].deepcopy([1], {})  # type: ignore[attr-defined]
    source = {"a": [1]}
    copied = FACADES["copy"].deepcopy(source)  # type: ignore[attr-defined]
    assert copied == source and copied["a"] is not source["a"]


def test_overload_records_nothing() -> None:
    """It returns typing's placeholder without adding the function to the process-wide registry."""
    def f(x: int) -> int:
        return x

    placeholder = FACADES["typing"].overload(f)  # type: ignore[attr-defined]
    assert placeholder is typing.overload(lambda: None)
    assert typing.get_overloads(f) == []


# -- host state a program can reach ----------------------------------------------------------------


def _samples() -> dict[str, object]:
    """Values facade calls return (their classes and attributes are reachable too)."""
    def f() -> int:
        return 0

    @dataclasses.dataclass
    class D:
        x: int = 0

    return {
        "as_tuple": decimal.Decimal(1).as_tuple(), "cache_info": functools.lru_cache(f).cache_info(),
        "lru": functools.lru_cache(f), "regression": statistics.linear_regression([1, 2, 3], [1, 2, 3]),
        "match": re.compile("(?P<a>x)").match("x"), "isocalendar": datetime.date(2020, 1, 1).isocalendar(),
        "uuid": uuid.uuid4(), "hash": hashlib.sha256(), "namedtuple": collections.namedtuple("P", "x")(1),
        "template": string.Template("x"), "error": json.JSONDecodeError("m", "d", 0),
        "partial": functools.partial(len), "normal": statistics.NormalDist(),
        "fraction": fractions.Fraction(1, 3), "auto": enum.auto(), "typevar": typing.TypeVar("T"),
        "flag": re.A, "fields": dataclasses.fields(D), "now": datetime.datetime.now(),
        "alias": typing.Annotated[int, 0], "iterable": typing.Iterable, "counter": collections.Counter("ab"),
        "chainmap": collections.ChainMap(),
    }


def _walk(start: dict[str, object], depth: int = 4) -> dict[str, object]:
    """Every attribute a program can read from ``start`` (guarded reads), by path, breadth first."""
    seen: set[int] = set()
    reached: dict[str, object] = {}
    frontier = list(start.items())
    for _ in range(depth):
        following: list[tuple[str, object]] = []
        for path, obj in frontier:
            if id(obj) in seen or isinstance(obj, (str, bytes, int, float, complex, type(None))):
                continue
            seen.add(id(obj))
            names = [name for name in dir(obj) if not name.startswith("_")]
            names += [name for name in NAMEDTUPLE_NAMES if guarded_hasattr(obj, name)]
            for name in names:
                try:
                    value = guarded_getattr(obj, name)
                except Exception:
                    continue
                reached[f"{path}.{name}"] = value
                following.append((f"{path}.{name}", value))
            if not isinstance(obj, type):
                following.append((f"type({path})", type(obj)))
        frontier = following
    return reached


def _reachable() -> dict[str, object]:
    start: dict[str, object] = {}
    for module, facade in FACADES.items():
        for name, member in object.__getattribute__(facade, "_facade_members").items():
            start[f"{module}.{name}"] = member
    start.update(_samples())
    return _walk(start)


_DICT_VIEWS: tuple[type, ...] = (type({}.keys()), type({}.values()), type({}.items()))


def _unproxied(value: object) -> object:
    """A mappingproxy's mapping (``proxy == x`` and ``proxy | x`` hand it to a program's ``x``); a dict
    view's dict (its ``mapping`` is a proxy of it)."""
    if isinstance(value, _DICT_VIEWS):
        value = value.mapping
    if type(value) is types.MappingProxyType:
        (mapping,) = gc.get_referents(value)
        return mapping
    return value


def test_no_shared_mutable_object_is_reachable_from_a_facade() -> None:
    """No mutable object a program can read off a facade, off the classes of what facade calls return, or
    off those values, is shared: two independent walks (fresh values, fresh reads) never reach the same
    one, so nothing one run writes into it reaches another run."""
    mutable = (dict, list, set, bytearray, collections.deque, decimal.Context, textwrap.TextWrapper)
    first, second = _reachable(), _reachable()
    found = [path for path, value in first.items()
             if isinstance(_unproxied(value), mutable) and path in second]
    for path in found:
        assert _unproxied(first[path]) is not _unproxied(second[path]), f"{path} is shared between runs"
    assert "as_tuple._field_defaults" in found and "type(regression)._field_defaults" in found


def test_no_forbidden_function_hides_under_another_name() -> None:
    """Nothing a program can read off the facades (or off what they return) under any name is one of the
    functions the resolved-value rules refuse: those rules only run for the names that resolve to them."""
    reached = _reachable()
    assert len(reached) > 1000
    for path, value in reached.items():
        assert forbidden_reason(value) is None, path


@pytest.mark.anyio
async def test_program_scope_gives_each_run_its_own_decimal_context_and_random_sequence() -> None:
    """It replaces the decimal context for the run and restores it, and reseeds the facade's generator."""
    outer = decimal.getcontext()
    random_facade = FACADES["random"]
    random_facade.seed(7)  # type: ignore[attr-defined]
    scope = ProgramScope(TaskRegistry())
    try:
        inner = decimal.getcontext()
        assert inner is not outer and inner.prec == decimal.Context().prec
        inner.prec = 3
        assert random_facade.random() != random.Random(7).random()  # type: ignore[attr-defined]
    finally:
        scope.close()
    assert decimal.getcontext() is outer and outer.prec != 3
    assert random_facade.random.__self__ is not random.random.__self__  # type: ignore[attr-defined]


@pytest.mark.anyio
async def test_every_run_gets_its_own_builtins() -> None:
    """It gives each run a fresh copy of the builtins, so nothing one run does to them reaches the next."""
    first: dict[str, object] = {}
    second: dict[str, object] = {}
    for namespace in (first, second):
        await run_program(compile_program("return 1"), tool_names=(), call_tool=_no_tool, log=lambda s: None,
                          globals_=namespace)
    assert first["__builtins__"] is not second["__builtins__"]
    assert first["__builtins__"] == second["__builtins__"]


async def _no_tool(name: str, args: object) -> object:
    raise AssertionError("no tool calls expected")


@pytest.mark.anyio
async def test_a_session_run_does_not_see_what_an_earlier_run_did_to_facade_state() -> None:
    """In one persistent session, whatever a run changes in state reachable from a facade, a later run of
    the session does not see (each attempt either fails or changes a run's own copy)."""
    poison = textwrap.dedent("""
        import collections, decimal, functools, hashlib, json, random, statistics, textwrap, typing
        attempts = [
            lambda: setattr(decimal.getcontext(), "prec", 3),
            lambda: random.seed(7),
            lambda: decimal.Decimal(1).as_tuple()._field_defaults.update(sign=1),
            lambda: functools.lru_cache(len).cache_info()._field_defaults.update(hits=1),
            lambda: statistics.linear_regression([1, 2], [1, 2])._field_defaults.update(slope=1),
            lambda: typing.Iterable.register(Probe),
            lambda: hashlib.algorithms_available.add("poisoned"),
            lambda: textwrap.TextWrapper.unicode_whitespace_trans.update({0: "x"}),
            lambda: functools.update_wrapper(probe, json.dumps, (), ("__builtins__",)),
            lambda: decimal.DefaultContext,
        ]
        class Probe:
            pass
        def probe():
            pass
        failed = 0
        for attempt in attempts:
            try:
                attempt()
            except Exception:
                failed += 1
        return failed
    """)
    check = textwrap.dedent("""
        import decimal, functools, random, statistics, hashlib, textwrap, typing
        def can_open():
            try:
                open
            except NameError:
                return False
            return True
        return {
            "prec": decimal.getcontext().prec == 3,
            "seed": random.random() == random.Random(7).random(),
            "decimal-tuple": bool(decimal.Decimal(2).as_tuple()._field_defaults),
            "cache-info": bool(functools.lru_cache(len).cache_info()._field_defaults),
            "regression": bool(statistics.linear_regression([1, 2], [1, 2])._field_defaults),
            "register": isinstance(Probe(), typing.Iterable),
            "hashlib": "poisoned" in hashlib.algorithms_available,
            "textwrap": 0 in textwrap.TextWrapper.unicode_whitespace_trans,
            "builtins": can_open(),
        }
    """)
    async with Sandbox(warm=1) as sandbox:
        with anyio.fail_after(30):
            async with sandbox.open_session() as session:
                first = await sandbox.run(poison, tool_names=(), call_tool=_no_tool, session=session)
                second = await sandbox.run(check, tool_names=(), call_tool=_no_tool, session=session)
    assert first.error is None and first.value == 5, first  # (prec, seed and the copies "succeed")
    assert second.error is None, second.error
    assert isinstance(second.value, dict) and not any(second.value.values()), second.value


@pytest.mark.parametrize("first", ["codemode.sandbox._stdlib_facades", "codemode.sandbox._preload",
                                   "codemode.sandbox.guards", "codemode.sandbox.facades"])
def test_the_facade_modules_import_in_any_order(first: str) -> None:
    """A template whose executor imports the wider facades (or the preload) first still builds them."""
    import subprocess
    import sys

    code = (f"import {first}\nfrom codemode.sandbox._preload import warm_lazy_state\nwarm_lazy_state()\n"
            "from codemode.sandbox.facades import FACADES\nprint(len(FACADES))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) == len(FACADES)
