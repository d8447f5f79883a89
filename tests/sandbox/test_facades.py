"""Tests for codemode.sandbox.facades: the allow-list, read-only facades, and the asyncio wrappers."""

from __future__ import annotations

import asyncio
import collections
import copy
import pickle
import types

import anyio
import pytest

from codemode.sandbox.facades import (
    ALLOWED_MODULES,
    CURRENT_TASKS,
    FACADES,
    ModuleFacade,
    SafeAwaitable,
    TaskRegistry,
    coroutine_of,
    guarded_import,
)

BRIEF_MODULES = {
    "json", "re", "math", "statistics", "datetime", "collections", "itertools", "functools", "string",
    "textwrap", "random", "decimal", "fractions", "typing", "dataclasses", "enum", "heapq", "bisect",
    "operator", "base64", "hashlib", "uuid", "copy", "asyncio",
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
        assert not isinstance(member, (types.ModuleType, ModuleFacade)), member_name
        assert not isinstance(member, _MUTABLE), member_name
        for attribute in dir(member):
            if attribute.startswith("_"):
                continue
            value = getattr(member, attribute, None)
            assert not isinstance(value, types.ModuleType), f"{member_name}.{attribute}"
            assert type(value) not in (dict, list, set, bytearray), f"{member_name}.{attribute}"


@pytest.mark.parametrize(("module", "member"), [
    ("operator", "attrgetter"), ("operator", "methodcaller"), ("operator", "setitem"), ("operator", "iadd"),
    ("typing", "get_type_hints"), ("typing", "ForwardRef"), ("string", "Formatter"), ("uuid", "uuid1"),
    ("uuid", "getnode"), ("hashlib", "file_digest"), ("json", "codecs"), ("json", "decoder"),
    ("asyncio", "get_running_loop"), ("asyncio", "create_task"), ("asyncio", "ensure_future"),
    ("decimal", "DefaultContext"), ("enum", "EnumMeta"), ("dataclasses", "make_dataclass"),
    ("random", "_os"), ("collections", "abc"),
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


def test_facades_do_not_answer_their_name() -> None:
    """It refuses __name__, so ``from m import x`` cannot fall back to sys.modules."""
    with pytest.raises(AttributeError):
        FACADES["collections"].__name__  # noqa: B018


def test_import_hands_out_facades_only() -> None:
    """It returns the facade for allowed names and an ImportError naming the allow-list otherwise."""
    assert guarded_import("json") is FACADES["json"]
    for bad in ("os", "json.decoder", "sys", "builtins"):
        with pytest.raises(ImportError, match="allowed modules: asyncio, base64"):
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
