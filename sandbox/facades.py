"""Curated, read-only module facades and the restricted ``import`` that hands them out.

A real module object leaks everything it imports (``json.codecs.sys.modules["os"]``), so a program never
gets one. ``import json`` binds a :class:`ModuleFacade`: a read-only object holding only members that
were reviewed one by one. The rules behind the lists:

* Functions and classes of the allowed modules are fine to hand in when everything they can return is a
  fresh value, a program callable's result, or another reviewed object: their ``__globals__``,
  ``__self__`` and ``__module__`` are ``_``-names and unreachable.
* Left out, because they bypass a guard or reach the host: ``operator.setitem``/``delitem`` and the
  in-place operators (writes that skip ``_write_``), ``typing.get_type_hints``/``ForwardRef`` (``eval``
  of strings), ``string.Formatter`` (attribute walks in C), ``uuid.uuid1``/``getnode`` (may spawn
  processes), ``hashlib.file_digest``,
  ``decimal.DefaultContext`` and friends (shared mutable contexts), ``enum.EnumMeta``,
  ``dataclasses.make_dataclass``, ``json``'s ``cls=`` hook, ``asyncio`` everything but the members below.
* Mutable module constants are handed in as immutable copies (``hashlib.algorithms_available``,
  ``textwrap.TextWrapper.unicode_whitespace_trans``); a test walks everything reachable from the
  facades (and from what their functions return) for shared mutable objects.
* Helpers that modify the class or function they are given (``dataclasses.dataclass``,
  ``functools.total_ordering``/``wraps``/``update_wrapper``) accept only the program's own.
* Helpers that act on *names* a program chose are held to names a program could have written itself:
  ``update_wrapper``/``wraps`` copy only their default names (``assigned=``/``updated=`` cannot name
  ``__globals__``, ``__builtins__``, ``__code__`` ...); enum's functional API (a metaclass on the
  facade's enum bases) refuses names starting with ``_`` (they would define protocol or enum hooks) and
  ``module=``; ``dataclass`` refuses field names that are not plain identifiers before ``dataclasses``
  pastes them into the source it ``exec``s; ``namedtuple`` refuses ``module=`` (it checks the names
  itself); ``copy.deepcopy`` refuses a ``memo`` (it would collect the originals, a host object's real
  ``__dict__`` among them); ``typing.overload`` records nothing in the process-wide registry.
* Host state behind a facade function does not outlive a run (:class:`ProgramScope`): each run has its
  own ``decimal`` context and the ``random`` functions are methods of the facade's own generator,
  reseeded for every run (the host's global generator is not reachable).
* The audit of every entry point, what it reaches in the real stdlib and how it is guarded, is
  :mod:`codemode.sandbox._audit` (one escape test per row).
* The wider standard library (``csv``, ``io``, ``time``, ``os.path``, the asyncio coordination
  primitives, ``operator.attrgetter``/``methodcaller`` through the attribute guard, ...) is declared in
  :mod:`codemode.sandbox._stdlib_facades`. ``import os.path`` binds the ``os`` facade (which holds only
  ``path`` and the separators); the stdlib's C code importing ``time`` or ``_strptime`` for itself (a
  list ``fromlist``, which programs never pass) gets the real module.
* ``asyncio`` returns :class:`SafeAwaitable` objects only: a program never holds a real Future, Task,
  event loop or a coroutine of host code. Tasks started for ``gather``/``as_completed`` are recorded in
  the run's :class:`TaskRegistry`, which the executor cancels when the run ends (nothing outlives it);
  when one awaitable of a ``gather`` fails, the others are cancelled.

Facade attribute lookups (including the ``__name__`` that ``from m import x`` consults before falling
back to ``sys.modules``) only ever answer the reviewed members. Each facade is the one instance of its
own sealed class (named ``module``, as a module's class is), whose class attributes are the members, so
``math.sqrt`` is a native attribute read; :class:`_FacadeType` says what closes that class.
"""

from __future__ import annotations

import asyncio
import base64
import bisect
import collections
import contextvars
import copy
import dataclasses
import datetime
import decimal
import enum
import fractions
import functools
import hashlib
import heapq
import importlib
import itertools
import json
import math
import operator
import random
import re
import statistics
import string
import sys
import textwrap
import types
import typing
import uuid
from collections.abc import Callable, Coroutine, Generator, Iterable, Iterator, Mapping
from typing import Any, Final, NoReturn, cast

from .guards import (
    PROGRAM_MARKER,
    check_code_name,
    check_field_reads,
    check_namespace_name,
    check_value_equality,
    is_program_class,
    is_program_function,
    register_program_class,
)

__all__ = (
    "ALLOWED_MODULES",
    "CURRENT_TASKS",
    "FACADES",
    "ModuleFacade",
    "ProgramScope",
    "SafeAwaitable",
    "TaskRegistry",
    "coroutine_of",
    "guarded_import",
)


class _FacadeType(type):
    """The metaclass of :class:`ModuleFacade` and of its per-module classes: sealed and read-only.

    Each facade is the one instance of its own class, whose class attributes are the module's members,
    so ``math.sqrt`` is an ordinary attribute read (a type-cache hit in C) instead of a Python
    ``__getattr__`` after a failed lookup. What a program could do with the class (``type(math)``) is
    closed here, for every caller, host code included: the classes cannot be called (no new facades),
    written (``setattr``/``delattr`` on the class) or subclassed; their ``__dict__`` is CPython's
    read-only mapping proxy, and instances have no ``__dict__`` or slots to write.
    """

    def __new__(mcls, name: str, bases: tuple[type, ...], namespace: dict[str, Any],
                token: object = None) -> _FacadeType:
        if token is not _BUILD:
            raise TypeError("module facades cannot be subclassed in the sandbox")
        made: _FacadeType = super().__new__(mcls, name, bases, namespace)
        return made

    def __init__(cls, name: str, bases: tuple[type, ...], namespace: dict[str, Any],
                 token: object = None) -> None:
        super().__init__(name, bases, namespace)

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        if cls is not ModuleFacade or kwargs or len(args) != 2:
            raise TypeError("modules cannot be created in the sandbox; use import")
        return _make_facade(*args)

    # (every facade class stands for ``module``: isinstance(json, type(math)) holds, as in CPython)
    def __instancecheck__(cls, instance: Any) -> bool:
        return type.__instancecheck__(ModuleFacade, instance)

    def __subclasscheck__(cls, subclass: Any) -> bool:
        return type.__subclasscheck__(ModuleFacade, subclass)

    def _deny_class(cls, *args: object) -> NoReturn:
        name = cls.__dict__.get("_facade_name", cls.__name__)
        raise TypeError(f"module {name!r} is read-only in the sandbox")

    __setattr__ = __delattr__ = _deny_class


#: Proof that a facade class is being built here (the metaclass refuses every other subclass).
_BUILD: Final = object()


class _Hidden:
    """A class attribute that reads as missing, on the class and on its instances."""

    __slots__ = ()

    def __get__(self, instance: object, owner: object = None) -> NoReturn:
        raise AttributeError("not available in the sandbox")

    def __set__(self, instance: object, value: object) -> NoReturn:
        raise AttributeError("not available in the sandbox")


class ModuleFacade(metaclass=_FacadeType, token=_BUILD):
    """A read-only stand-in for a module: only the reviewed members, no writes, no copies.

    ``ModuleFacade(name, members)`` returns the one instance of a new per-module subclass whose class
    attributes are ``members`` (see :class:`_FacadeType`); a member that is a descriptor (a Python
    function) is stored as a ``staticmethod`` so that reading it through the facade does not bind it.
    """

    __slots__ = ()
    _facade_name: str = "module"
    _facade_members: Mapping[str, object] = types.MappingProxyType({})
    #: ``type(m).mro()`` would list this class, whose call makes facades (shadows ``type.mro``; the
    #: metaclass computes the real MRO through its own type, not through this attribute).
    mro = _Hidden()

    def __getattr__(self, attr: str) -> Any:
        # (only reached when the normal lookup failed: the name is not a member)
        raise AttributeError(f"module {self._facade_name!r} has no attribute {attr!r} in the sandbox",
                             name=attr)

    def _deny(self, *args: object) -> NoReturn:
        raise TypeError(f"module {self._facade_name!r} is read-only in the sandbox")

    __setattr__ = __delattr__ = _deny

    def __repr__(self) -> str:
        return f"<module {self._facade_name!r} (sandbox)>"

    def __copy__(self) -> ModuleFacade:
        return self

    def __deepcopy__(self, memo: object) -> ModuleFacade:
        return self

    def __reduce_ex__(self, protocol: object) -> NoReturn:
        raise TypeError("modules cannot be pickled or copied in the sandbox")


def _make_facade(name: str, members: Mapping[str, object]) -> ModuleFacade:
    table = dict(members)
    # (named as CPython names a module's class: type(json).__name__ == "module")
    namespace: dict[str, Any] = {"__slots__": (), "__module__": "builtins", "__qualname__": "module",
                                 "__doc__": None, "_facade_name": name,
                                 "_facade_members": types.MappingProxyType(table)}
    for member, value in table.items():
        if type(member) is not str or member.startswith("_") or not member.isidentifier():
            raise ValueError(f"facade {name!r}: {member!r} is not a public member name")
        # (a descriptor would bind to the facade or run its __get__; staticmethod hands it out as is)
        namespace[member] = staticmethod(cast(Any, value)) if hasattr(type(value), "__get__") else value
    cls: Any = _FacadeType("module", (ModuleFacade,), namespace, token=_BUILD)
    facade: ModuleFacade = object.__new__(cls)
    return facade


# -- awaitables and tasks --------------------------------------------------------------------------


class SafeAwaitable:
    """An opaque awaitable: starts its (host) coroutine only when awaited, and only once."""

    __slots__ = ("_label", "_start", "_used")

    def __init__(self, start: Callable[[], Coroutine[Any, Any, Any]], label: str) -> None:
        self._start = start
        self._label = label
        self._used = False

    def _begin(self) -> Coroutine[Any, Any, Any]:
        if self._used:
            raise RuntimeError(f"{self._label} was already awaited; call it again for a new result")
        self._used = True
        return self._start()

    def __await__(self) -> Generator[Any, None, Any]:
        return self._begin().__await__()

    def __repr__(self) -> str:
        return f"<awaitable {self._label}>"

    def __reduce_ex__(self, protocol: object) -> NoReturn:
        raise TypeError("awaitables cannot be copied")


def coroutine_of(awaitable: object, where: str) -> Coroutine[Any, Any, Any]:
    """The coroutine behind a program-held awaitable, or a TypeError saying what is accepted."""
    if isinstance(awaitable, SafeAwaitable):
        return awaitable._begin()
    _check_awaitable(awaitable, where)
    assert isinstance(awaitable, types.CoroutineType)
    return awaitable


def _check_awaitable(awaitable: object, where: str) -> None:
    if not isinstance(awaitable, (SafeAwaitable, types.CoroutineType)):
        raise TypeError(f"{where} expects awaitables (tools.NAME(...) calls, asyncio calls or calls of "
                        f"async functions), not {type(awaitable).__name__!r}")


class _ProgramExit(Exception):
    """A ``SystemExit``/``KeyboardInterrupt`` a program raised inside a task, carried as an ordinary error.

    asyncio re-raises those two out of the event loop when they leave a task (ending the worker, or
    the host's loop in process), where no ``try`` of the program can catch them; the facade carries
    them to the awaiting program instead (:func:`_released`), where they are raised as they were.
    """


async def _contained(coro: Coroutine[Any, Any, Any]) -> Any:
    try:
        return await coro
    except (SystemExit, KeyboardInterrupt) as exc:
        raise _ProgramExit(exc) from None


def _contained_task(coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
    task = asyncio.ensure_future(_contained(coro))
    # (a task cancelled before its first step never starts the wrapper: close what it holds, unawaited)
    task.add_done_callback(lambda _: coro.close())
    return task


def _released(error: BaseException) -> BaseException:
    return error.args[0] if type(error) is _ProgramExit else error


class TaskRegistry:
    """The tasks one run started through the asyncio facade; :meth:`aclose` cancels the leftovers.

    A closed registry starts nothing: program code can still run after :meth:`aclose` (a generator's
    ``finally`` run by the collector while the result is checked), and a task it started then would
    live on into the next run of a session.
    """

    def __init__(self) -> None:
        #: Each unfinished task with the program coroutine it runs (closed when the task is done).
        self._tasks: dict[asyncio.Task[Any], Coroutine[Any, Any, Any]] = {}
        #: Set once :meth:`aclose` is done: nothing may start in the run after that.
        self.closed = False

    def spawn(self, coro: Coroutine[Any, Any, Any],
              start: Callable[[Coroutine[Any, Any, Any]], asyncio.Task[Any]] = asyncio.ensure_future,
              ) -> asyncio.Task[Any]:
        """Run ``coro`` as a task of this run (``start`` makes the task: a task group's, say)."""
        if self.closed:
            coro.close()
            raise RuntimeError("asyncio helpers are only available while a program runs")
        task = start(_contained(coro))
        self._tasks[task] = coro
        task.add_done_callback(self._finished)
        return task

    def _finished(self, task: asyncio.Task[Any]) -> None:
        coro = self._tasks.pop(task, None)
        if coro is not None:  # (a task cancelled before its first step never started it: no warning)
            coro.close()

    async def aclose(self) -> None:
        """Cancel every unfinished task and wait for all of them (their errors are discarded)."""
        try:
            while self._tasks:
                pending = list(self._tasks)
                for task in pending:
                    task.cancel()
                await asyncio.gather(*pending, return_exceptions=True)
                for task in pending:
                    self._finished(task)
        finally:
            self.closed = True


#: The registry of the run in progress (set by the executor for the duration of a run).
CURRENT_TASKS: contextvars.ContextVar[TaskRegistry | None] = contextvars.ContextVar(
    "codemode_sandbox_tasks", default=None)


def _spawn(coro: Coroutine[Any, Any, Any],
           start: Callable[[Coroutine[Any, Any, Any]], asyncio.Task[Any]] = asyncio.ensure_future,
           ) -> asyncio.Task[Any]:
    registry = CURRENT_TASKS.get()
    if registry is None:
        coro.close()
        raise RuntimeError("asyncio helpers are only available while a program runs")
    return registry.spawn(coro, start)


def _number(value: object, what: str, *, optional: bool = False) -> float | None:
    if value is None and optional:
        return None
    if type(value) not in (int, float) or value != value:
        raise TypeError(f"{what} must be a number, not {type(value).__name__!r}")
    return float(value)  # type: ignore[arg-type]


def _gather(*awaitables: object, return_exceptions: bool = False) -> SafeAwaitable:
    if type(return_exceptions) is not bool:
        raise TypeError("return_exceptions must be True or False")
    for item in awaitables:
        _check_awaitable(item, "asyncio.gather()")
    tasks = [_spawn(coroutine_of(item, "asyncio.gather()")) for item in awaitables]

    async def wait() -> list[Any]:
        try:
            results = await asyncio.gather(*tasks, return_exceptions=return_exceptions)
        except BaseException as exc:
            for task in tasks:
                task.cancel()
            if type(exc) is _ProgramExit:
                raise _released(exc) from None
            raise
        return [_released(item) if type(item) is _ProgramExit else item for item in results]

    return SafeAwaitable(wait, "asyncio.gather(...)")


def _sleep(delay: float, result: object = None) -> SafeAwaitable:
    seconds = _number(delay, "asyncio.sleep() delay")
    return SafeAwaitable(lambda: asyncio.sleep(seconds or 0.0, result), "asyncio.sleep(...)")


def _wait_for(awaitable: object, timeout: float | None) -> SafeAwaitable:
    _check_awaitable(awaitable, "asyncio.wait_for()")
    seconds = _number(timeout, "asyncio.wait_for() timeout", optional=True)
    async def wait() -> Any:
        try:
            return await asyncio.wait_for(_contained_task(coroutine_of(awaitable, "asyncio.wait_for()")),
                                          seconds)
        except _ProgramExit as exc:
            raise _released(exc) from None

    return SafeAwaitable(wait, "asyncio.wait_for(...)")


def _as_completed(awaitables: Iterable[object], *, timeout: float | None = None) -> Any:
    items = list(awaitables)
    for item in items:
        _check_awaitable(item, "asyncio.as_completed()")
    seconds = _number(timeout, "asyncio.as_completed() timeout", optional=True)
    loop = asyncio.get_running_loop()
    deadline = None if seconds is None else loop.time() + seconds
    finished: asyncio.Queue[asyncio.Task[Any]] = asyncio.Queue()
    for item in items:
        _spawn(coroutine_of(item, "asyncio.as_completed()")).add_done_callback(finished.put_nowait)

    async def next_done() -> Any:
        if deadline is None:
            task = await finished.get()
        else:
            task = await asyncio.wait_for(finished.get(), max(0.0, deadline - loop.time()))
        try:
            return task.result()
        except _ProgramExit as exc:
            raise _released(exc) from None

    return iter([SafeAwaitable(next_done, "asyncio.as_completed(...) item") for _ in items])


# -- helpers that modify what they are given -------------------------------------------------------


def _require_program_class(cls: object, where: str) -> type:
    if not is_program_class(cls):
        raise TypeError(f"{where} only accepts classes defined by the program")
    assert isinstance(cls, type)
    return cls


def _check_field_names(cls: type) -> None:
    """Refuse a class whose field names ``dataclasses`` would paste into generated source."""
    annotations = cls.__dict__.get("__annotations__")  # noqa: RUF063 (exactly what dataclasses reads)
    names: list[object] = []
    if annotations is not None:
        if type(annotations) is not dict:
            raise TypeError("dataclasses.dataclass needs the class's own annotations")
        names.extend(annotations)
    for base in cls.__mro__[1:]:
        fields = base.__dict__.get("__dataclass_fields__")
        if type(fields) is dict:
            names.extend(fields)
    for name in names:
        check_code_name(name, "dataclasses.dataclass field")


def _dataclass(cls: object = None, /, **options: Any) -> Any:
    def wrap(target: object) -> type:
        checked = _require_program_class(target, "dataclasses.dataclass")
        _check_field_names(checked)
        made: type = dataclasses.dataclass(checked, **options)
        register_program_class(made)
        check_field_reads(made)
        check_value_equality(made)
        return made

    return wrap if cls is None else wrap(cls)


def _total_ordering(cls: object) -> type:
    ordered: type = functools.total_ordering(_require_program_class(cls, "functools.total_ordering"))
    return ordered


#: The names ``update_wrapper``/``wraps`` may copy (their defaults): each is a plain value or the
#: program function's own ``__dict__``. A program-chosen name would read and write any attribute
#: (``updated=("__globals__",)`` merges a host module's globals into the program's).
_WRAPPER_ASSIGNMENTS: Final = frozenset(functools.WRAPPER_ASSIGNMENTS)
_WRAPPER_UPDATES: Final = frozenset(functools.WRAPPER_UPDATES)


def _wrapper_names(names: Any, allowed: frozenset[str], what: str) -> tuple[str, ...]:
    listed = tuple(names)
    for name in listed:
        if type(name) is not str or name not in allowed:
            raise ValueError(f"functools.update_wrapper/wraps: {what}= may only name "
                             f"{', '.join(sorted(allowed))} in the sandbox, not {name!r}")
    return listed


def _update_wrapper(wrapper: object, wrapped: object, assigned: Any = functools.WRAPPER_ASSIGNMENTS,
                    updated: Any = functools.WRAPPER_UPDATES) -> Any:
    if not is_program_function(wrapper):
        raise TypeError("functools.update_wrapper/wraps only accept functions defined by the program")
    function = cast(types.FunctionType, wrapper)
    assigned = _wrapper_names(assigned, _WRAPPER_ASSIGNMENTS, "assigned")
    updated = _wrapper_names(updated, _WRAPPER_UPDATES, "updated")
    functools.update_wrapper(function, cast(Callable[..., Any], wrapped), assigned, updated)
    if "__annotations__" in assigned and not is_program_function(wrapped):
        annotations = function.__annotations__
        if type(annotations) is dict:  # (a host function's own dict: the program gets a copy)
            function.__annotations__ = dict(annotations)
    return function


def _wraps(wrapped: object, assigned: Any = functools.WRAPPER_ASSIGNMENTS,
           updated: Any = functools.WRAPPER_UPDATES) -> Callable[[object], Any]:
    assigned = _wrapper_names(assigned, _WRAPPER_ASSIGNMENTS, "assigned")
    updated = _wrapper_names(updated, _WRAPPER_UPDATES, "updated")

    def decorate(wrapper: object) -> Any:
        return _update_wrapper(wrapper, wrapped, assigned, updated)

    return decorate


def _caller_module(depth: int = 2) -> Any:
    """The ``__name__`` of the calling program's globals (what the stdlib's frame hack reads)."""
    return sys._getframe(depth).f_globals.get("__name__", "__main__")


def _namedtuple(typename: Any, field_names: Any, *, rename: bool = False, defaults: Any = None,
                module: Any = None) -> type:
    # namedtuple checks every name itself (exact str identifiers, no keywords, no "_" unless renamed)
    # before it evals its __new__; module= would claim a real module (and its globals) for the class.
    if module is not None:
        raise TypeError("namedtuple(module=...) is not available in the sandbox: a program's classes "
                        "belong to the program")
    return _NAMEDTUPLE(typename, field_names, rename=rename, defaults=defaults, module=_caller_module())


_NAMEDTUPLE: Final[Callable[..., type]] = collections.namedtuple


def _deepcopy(x: object, memo: Any = None) -> Any:
    # A memo collects the originals it copied (a host object's real __dict__ among them) in
    # memo[id(memo)]: handing one in would give the program those objects, writable.
    if memo is not None:
        raise TypeError("copy.deepcopy(x, memo) is not available in the sandbox; call deepcopy(x)")
    return copy.deepcopy(x)


def _overload(func: object) -> Any:
    # typing.overload records every decorated function in a process-wide registry; the program
    # gets the same placeholder without the record.
    return typing._overload_dummy  # type: ignore[attr-defined]


# -- enum ------------------------------------------------------------------------------------------


def _enum_names(names: Any) -> Any:
    """The functional API's ``names`` in a form enum reads the same way, every name checked."""
    where = "enum functional API"
    if isinstance(names, str):
        return [check_namespace_name(name, where) for name in str.split(str.replace(names, ",", " "))]
    if isinstance(names, (tuple, list)) and names and isinstance(names[0], str):
        return [check_namespace_name(name, where) for name in names]
    pairs: list[tuple[str, object]] = []
    for item in names:
        if isinstance(item, str):
            pairs.append((check_namespace_name(item, where), names[item]))
        else:
            name, value = item
            pairs.append((check_namespace_name(name, where), value))
    return pairs


class _EnumType(enum.EnumType):
    """The metaclass of the facade's enum bases (and so of every enum a program defines).

    Its one job: the functional API (``Enum("Color", "RED GREEN")``) binds program-chosen names in a
    class namespace, so each name is checked (:func:`~codemode.sandbox.guards.check_namespace_name`)
    and ``module=`` is refused. The facade classes answer ``isinstance``/``issubclass`` as the real
    ``enum`` classes they stand for, so ``isinstance(re.A, enum.Flag)`` holds as in CPython.
    """

    def __call__(cls, value: Any, names: Any = None, *, module: Any = None,
                 qualname: Any = None, type: Any = None, start: Any = 1, boundary: Any = None) -> Any:
        if names is None:
            return super().__call__(value)
        if module is not None:
            raise TypeError("the enum functional API's module= is not available in the sandbox: "
                            "a program's classes belong to the program")
        return super().__call__(value, _enum_names(names), module=_caller_module(), qualname=qualname,
                                type=type, start=start, boundary=boundary)

    def __instancecheck__(cls, instance: Any) -> bool:
        return type.__instancecheck__(_REAL_ENUMS.get(cls, cls), instance)

    def __subclasscheck__(cls, subclass: Any) -> bool:
        return type.__subclasscheck__(_REAL_ENUMS.get(cls, cls), subclass)


#: Facade enum base -> the real ``enum`` class it stands for.
_REAL_ENUMS: Final[dict[type, type]] = {}


def _facade_enum(real: type) -> type:
    """A member-less subclass of ``real`` whose metaclass guards the functional API."""
    namespace = _EnumType.__prepare__(real.__name__, (real,))
    namespace.update({"__module__": "enum", "__qualname__": real.__qualname__, "__doc__": real.__doc__})
    made = _EnumType(real.__name__, (real,), namespace)
    _REAL_ENUMS[made] = real
    return made


# -- per-run state -----------------------------------------------------------------------------------

#: The generator behind the ``random`` facade's functions (the host's own global one stays the host's).
_RANDOM: Final = random.Random()


class ProgramScope:
    """The facades' per-run state, entered by the executor around a run.

    Host state a program reaches through a facade function must not carry from one run to the next (a
    persistent session runs many programs in one process, and the in-process executor runs them in the
    host): the run's task registry (:data:`CURRENT_TASKS`), a fresh ``decimal`` context for
    ``getcontext``/``setcontext`` (the previous one is restored on exit), and the ``random`` facade's
    generator, reseeded on entry (so ``random.seed`` in one run decides nothing in another, and forked
    workers do not share a sequence).
    """

    __slots__ = ("_decimal", "_hooks", "_registry", "_token")

    def __init__(self, registry: TaskRegistry) -> None:
        self._token = CURRENT_TASKS.set(registry)
        _RANDOM.seed(random.getrandbits(128))
        self._decimal = decimal.getcontext()
        decimal.setcontext(decimal.Context())
        # An abandoned async generator's ``finally`` runs in a task the event loop's finalizer starts: a
        # program's must be one of the run's tasks (cancelled at its end), never code that runs later.
        self._registry = registry
        self._hooks = sys.get_asyncgen_hooks()
        sys.set_asyncgen_hooks(firstiter=self._hooks.firstiter, finalizer=self._finalize)

    def _finalize(self, agen: Any) -> None:
        frame = agen.ag_frame
        if frame is None or frame.f_globals.get(PROGRAM_MARKER) is not True:
            if self._hooks.finalizer is not None:
                self._hooks.finalizer(agen)
        elif not self._registry.closed:
            self._registry.spawn(agen.aclose())
        # (after the run, a program's generator is dropped: its finally never runs)

    def close(self) -> None:
        """Restore what the run replaced."""
        # (typing caches aliases by their arguments, a program's objects with their own __eq__ included:
        # left in, they would answer the next run's lookups, and the host's)
        for clear_cache in typing._cleanups:  # type: ignore[attr-defined]
            clear_cache()
        sys.set_asyncgen_hooks(firstiter=self._hooks.firstiter, finalizer=self._hooks.finalizer)
        decimal.setcontext(self._decimal)
        CURRENT_TASKS.reset(self._token)


def _json_dumps(obj: object, *, skipkeys: bool = False, ensure_ascii: bool = True,
                check_circular: bool = True, allow_nan: bool = True, indent: Any = None,
                separators: Any = None, default: Any = None, sort_keys: bool = False) -> str:
    return json.dumps(obj, skipkeys=skipkeys, ensure_ascii=ensure_ascii, check_circular=check_circular,
                      allow_nan=allow_nan, indent=indent, separators=separators, default=default,
                      sort_keys=sort_keys)


def _json_loads(text: str | bytes, *, object_hook: Any = None, parse_float: Any = None, parse_int: Any = None,
                parse_constant: Any = None, object_pairs_hook: Any = None) -> Any:
    return json.loads(text, object_hook=object_hook, parse_float=parse_float, parse_int=parse_int,
                      parse_constant=parse_constant, object_pairs_hook=object_pairs_hook)


class _Table(Mapping[Any, Any]):
    """An immutable mapping for a shared table: a proxy over a dict hands that dict to ``proxy == x``
    (and ``proxy | x``) of a program's ``x``, this hands out only itself."""

    __slots__ = ("_entries",)

    def __init__(self, entries: dict[Any, Any]) -> None:
        self._entries = dict(entries)

    def __getitem__(self, key: object) -> Any:
        return self._entries[key]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return repr(self._entries)


class _TextWrapper(textwrap.TextWrapper):
    """``textwrap.TextWrapper`` without its class-level translation dict (shared, mutable state)."""

    unicode_whitespace_trans = types.MappingProxyType(  # type: ignore[assignment]
        _Table(textwrap.TextWrapper.unicode_whitespace_trans))


_TextWrapper.__name__ = _TextWrapper.__qualname__ = "TextWrapper"


# -- the facades -----------------------------------------------------------------------------------


def _present(module: str, **wrappers: Callable[..., Any]) -> dict[str, Callable[..., Any]]:
    """Give wrapper functions the public names they stand in for (repr shows no internal names)."""
    for name, wrapper in wrappers.items():
        wrapper.__name__ = wrapper.__qualname__ = name
        wrapper.__module__ = module
    return wrappers


def _pick(module: types.ModuleType, names: Iterable[str]) -> dict[str, object]:
    return {name: getattr(module, name) for name in names}


def _public(module: types.ModuleType, exclude: Iterable[str] = ()) -> dict[str, object]:
    skip = set(exclude)
    return {name: getattr(module, name) for name in dir(module)
            if not name.startswith("_") and name not in skip
            and not isinstance(getattr(module, name), types.ModuleType)}


_OPERATOR: Final = (
    "abs", "add", "and_", "concat", "contains", "countOf", "eq", "floordiv", "ge", "getitem", "gt", "index",
    "indexOf", "inv", "invert", "is_", "is_not", "itemgetter", "le", "length_hint", "lshift", "lt", "matmul",
    "mod", "mul", "ne", "neg", "not_", "or_", "pos", "pow", "rshift", "sub", "truediv", "truth", "xor",
)
_STATISTICS: Final = (
    "NormalDist", "StatisticsError", "correlation", "covariance", "fmean", "geometric_mean",
    "harmonic_mean", "linear_regression", "mean", "median", "median_grouped", "median_high", "median_low",
    "mode", "multimode", "pstdev", "pvariance", "quantiles", "stdev", "variance",
)
_RANDOM_FUNCTIONS: Final = (
    "betavariate", "choice", "choices", "expovariate", "gauss", "getrandbits", "lognormvariate",
    "normalvariate", "randbytes", "randint", "random", "randrange", "sample", "seed", "shuffle",
    "triangular", "uniform", "vonmisesvariate", "weibullvariate",
)
_TYPING: Final = (
    "Annotated", "Any", "AsyncIterator", "Awaitable", "Callable", "ClassVar", "Collection", "Container",
    "Coroutine", "Counter", "DefaultDict", "Deque", "Dict", "Final", "FrozenSet", "Generic", "Hashable",
    "Iterable", "Iterator", "List", "Literal", "Mapping", "MutableMapping", "MutableSequence",
    "MutableSet", "NamedTuple", "Never", "NoReturn", "Optional", "OrderedDict", "Protocol", "Self",
    "Sequence", "Set", "Sized", "Tuple", "Type", "TypeAlias", "TypeVar", "TypedDict", "Union", "cast",
    "overload",
)
_DECIMAL: Final = (
    "BasicContext", "Clamped", "Context", "ConversionSyntax", "Decimal", "DecimalException",
    "DivisionByZero", "DivisionImpossible", "DivisionUndefined", "FloatOperation", "Inexact",
    "InvalidContext", "InvalidOperation", "MAX_EMAX", "MAX_PREC", "MIN_EMIN", "MIN_ETINY", "Overflow",
    "ROUND_05UP", "ROUND_CEILING", "ROUND_DOWN", "ROUND_FLOOR", "ROUND_HALF_DOWN", "ROUND_HALF_EVEN",
    "ROUND_HALF_UP", "ROUND_UP", "Rounded", "Subnormal", "Underflow", "getcontext", "localcontext",
    "setcontext",
)
_BASE64: Final = (
    "a85decode", "a85encode", "b16decode", "b16encode", "b32decode", "b32encode", "b32hexdecode",
    "b32hexencode", "b64decode", "b64encode", "b85decode", "b85encode", "decodebytes", "encodebytes",
    "standard_b64decode", "standard_b64encode", "urlsafe_b64decode", "urlsafe_b64encode",
)
_HASHLIB: Final = (
    "blake2b", "blake2s", "md5", "new", "pbkdf2_hmac", "sha1", "sha224", "sha256", "sha384", "sha3_224",
    "sha3_256", "sha3_384", "sha3_512", "sha512", "shake_128", "shake_256",
)


def _build_facades() -> dict[str, ModuleFacade]:
    decimal_members = _pick(decimal, [n for n in _DECIMAL if n != "BasicContext"])
    members: dict[str, Any] = {
        "asyncio": {"CancelledError": asyncio.CancelledError, "TimeoutError": TimeoutError,
                    **_present("asyncio", as_completed=_as_completed, gather=_gather, sleep=_sleep,
                               wait_for=_wait_for)},
        "base64": _pick(base64, _BASE64),
        "bisect": _public(bisect),
        "collections": {**_pick(collections, ("ChainMap", "Counter", "OrderedDict", "defaultdict", "deque")),
                        **_present("collections", namedtuple=_namedtuple)},
        "copy": {**_pick(copy, ("Error", "copy")), **_present("copy", deepcopy=_deepcopy)},
        "dataclasses": {**_pick(dataclasses, ("FrozenInstanceError", "KW_ONLY", "MISSING", "asdict",
                                              "astuple", "field", "fields", "is_dataclass", "replace")),
                        **_present("dataclasses", dataclass=_dataclass)},
        "datetime": _pick(datetime, ("MAXYEAR", "MINYEAR", "UTC", "date", "datetime", "time", "timedelta",
                                     "timezone", "tzinfo")),
        "decimal": decimal_members,
        "enum": {**_pick(enum, ("auto", "unique")),
                 **{name: _facade_enum(getattr(enum, name))
                    for name in ("Enum", "Flag", "IntEnum", "IntFlag", "StrEnum")}},
        "fractions": _pick(fractions, ("Fraction",)),
        "functools": {**_pick(functools, ("cache", "cached_property", "cmp_to_key", "lru_cache", "partial",
                                          "reduce")),
                      **_present("functools", total_ordering=_total_ordering,
                                 update_wrapper=_update_wrapper, wraps=_wraps)},
        "hashlib": {**_pick(hashlib, _HASHLIB),
                    "algorithms_available": frozenset(hashlib.algorithms_available),
                    "algorithms_guaranteed": frozenset(hashlib.algorithms_guaranteed)},
        "heapq": _public(heapq),
        "itertools": _public(itertools),
        "json": {"JSONDecodeError": json.JSONDecodeError,
                 **_present("json", dumps=_json_dumps, loads=_json_loads)},
        "math": _public(math),
        "operator": _pick(operator, _OPERATOR),
        "random": {"Random": random.Random, **{name: getattr(_RANDOM, name) for name in _RANDOM_FUNCTIONS}},
        "re": {**_pick(re, ("A", "ASCII", "DOTALL", "I", "IGNORECASE", "L", "LOCALE", "M", "MULTILINE",
                            "Match", "NOFLAG", "Pattern", "RegexFlag", "S", "U", "UNICODE", "VERBOSE", "X",
                            "compile", "error", "escape", "findall", "finditer", "fullmatch", "match",
                            "purge", "search", "split", "sub", "subn")), "DEBUG": 0},
        "statistics": _pick(statistics, _STATISTICS),
        "string": _pick(string, ("Template", "ascii_letters", "ascii_lowercase", "ascii_uppercase",
                                 "capwords", "digits", "hexdigits", "octdigits", "printable", "punctuation",
                                 "whitespace")),
        "textwrap": {**_pick(textwrap, ("dedent", "fill", "indent", "shorten", "wrap")),
                     "TextWrapper": _TextWrapper},
        "typing": {**_pick(typing, [n for n in _TYPING if n != "overload"]), "TYPE_CHECKING": False,
                   **_present("typing", overload=_overload)},
        "uuid": _pick(uuid, ("NAMESPACE_DNS", "NAMESPACE_OID", "NAMESPACE_URL", "NAMESPACE_X500", "UUID",
                             "uuid3", "uuid4", "uuid5")),
    }
    from ._stdlib_facades import extra_members

    for name, table in extra_members().items():
        if isinstance(table, dict) and name in members:
            members[name] = {**members[name], **table}
        else:
            members[name] = table
    return {name: table if isinstance(table, ModuleFacade) else ModuleFacade(name, table)  # type: ignore[call-arg]
            for name, table in members.items()}


#: One facade per allowed module name (built once per process; they are immutable).
FACADES: Final[Mapping[str, ModuleFacade]] = types.MappingProxyType(_build_facades())
#: The importable module names, sorted (quoted in ImportError messages).
ALLOWED_MODULES: Final[tuple[str, ...]] = tuple(sorted(FACADES))


#: Modules the stdlib's C code imports for itself while a program runs (see :func:`guarded_import`).
_INTERNAL_IMPORTS: Final = frozenset({"time", "_strptime"})


def guarded_import(name: object, globals: object = None, locals: object = None,
                   fromlist: object = (), level: object = 0) -> ModuleFacade:
    """``__import__`` for programs: a facade for an allowed name, ImportError naming the list otherwise."""
    if level != 0:
        raise ImportError("relative imports are not available in the sandbox")
    if type(name) is str and type(fromlist) is list and name in _INTERNAL_IMPORTS:
        # (C code of the stdlib importing what it needs: datetime imports time, strptime _strptime.
        # Programs' own imports pass None or a tuple as fromlist; the module goes to that C code only.)
        return importlib.import_module(name)  # type: ignore[return-value]
    if type(name) is str and "." in name and not fromlist and name in FACADES:
        name = name.partition(".")[0]  # (import os.path binds os)
    facade = FACADES.get(name) if type(name) is str else None
    if facade is None:
        raise ImportError(f"module {name!r} is not available in the sandbox; "
                          f"allowed modules: {', '.join(ALLOWED_MODULES)}", name=str(name))
    return facade
