"""Runtime guards: the hooks the policy's generated code calls, and the builtins a program gets.

Why each guard exists:

* :func:`guarded_getattr` (``_getattr_`` and the program's ``getattr``) refuses ``_``-names (but
  reads of :data:`READABLE_NAMES`, plain strings, and of the namedtuple API on namedtuples), every
  frame/code/generator/coroutine/async-generator/traceback internal, ``str.format``/``format_map`` (they
  walk attributes in C), ``string.Formatter`` field resolution, ``AttributeError.obj`` (it can hold the
  object behind a facade) and the asyncio internals that lead to the real event loop. The policy routes
  only names in :data:`GUARDED_ATTRIBUTES` / :data:`GUARDED_PREFIXES` through it; for every other literal
  name it would be exactly ``getattr`` (see :mod:`codemode.sandbox.policy`). A refused name reads as a missing
  one to ``hasattr`` (False) and to ``getattr`` with a default (the default): nothing is revealed.
* :func:`write_guard` (``_write_``) lets a program mutate only what it created: builtin containers and
  their subclasses' instances, a few stdlib value types that are always fresh (deques, decimal contexts,
  text wrappers) and instances of classes it defined, and those classes. Modules facades, host classes,
  the ``tools`` proxy, functions and builtins come back wrapped in a view that refuses every write.
* :data:`SafeType` is the program's ``type``: one argument only, and the type of any class is reported
  as ``SafeType`` itself, so ``type(int)('X', (), {...})`` cannot reach the real three-argument form.
* :class:`ClassFactory` (``__metaclass__``) builds the classes of ``class`` statements with the metaclass
  Python would pick and records them as program classes.
* The iteration hook is the builtin ``iter`` (nothing reachable needs an iteration check), so the C
  helpers that iterate (``sorted``, ``zip``, ``list`` ...) are equivalent to guarded versions and are
  handed in as they are. ``exec``, ``eval``, ``compile``, ``open``, ``input``, ``breakpoint``, ``help``,
  ``globals``, ``vars``, ``locals``, ``dir`` and ``memoryview`` are simply not there.
"""

from __future__ import annotations

import asyncio
import builtins
import collections
import decimal
import string
import textwrap
import types
import weakref
from collections.abc import Callable
from typing import Any, Final, NoReturn

from RestrictedPython.Guards import safe_builtins
from RestrictedPython.transformer import INSPECT_ATTRIBUTES

__all__ = (
    "GUARDED_ATTRIBUTES",
    "GUARDED_PREFIXES",
    "NAMEDTUPLE_NAMES",
    "PROGRAM_MARKER",
    "READABLE_NAMES",
    "WRITABLE_TYPES",
    "ClassFactory",
    "SafeType",
    "build_safe_builtins",
    "guarded_delattr",
    "guarded_getattr",
    "guarded_hasattr",
    "guarded_setattr",
    "guarded_super_init",
    "is_program_class",
    "is_program_function",
    "register_program_class",
    "write_guard",
)

#: Key set to ``True`` in every program globals dict; marks functions a program defined.
PROGRAM_MARKER: Final = "__codemode_program_globals__"

_FORMAT_NAMES: Final = frozenset({"format", "format_map"})
_FORMATTER_NAMES: Final = frozenset({"format", "get_field", "get_value", "vformat", "parse",
                                     "convert_field", "format_field"})
_COROUTINE_NAMES: Final = frozenset({"send", "throw"})
_ASYNCIO_NAMES: Final = frozenset({"get_loop", "get_stack", "print_stack", "get_coro", "get_context"})

#: ``_``-names a program may read on any object: they are plain strings (``type(err).__name__``).
READABLE_NAMES: Final = frozenset({"__name__", "__qualname__"})
#: The namedtuple API, ``_``-prefixed so as not to clash with field names: readable on namedtuple
#: classes and instances only (checked at run time, so their loads go through ``_getattr_``).
NAMEDTUPLE_NAMES: Final = frozenset({"_asdict", "_replace", "_make", "_fields", "_field_defaults"})

#: Literal attribute names whose loads keep the ``_getattr_`` call (all other loads are native).
GUARDED_ATTRIBUTES: Final[frozenset[str]] = (
    frozenset(INSPECT_ATTRIBUTES) | _FORMAT_NAMES | _FORMATTER_NAMES | _COROUTINE_NAMES | _ASYNCIO_NAMES
    | NAMEDTUPLE_NAMES | {"obj"}
)
#: Attribute name prefixes of frame, code, generator, coroutine, async-generator and traceback internals.
GUARDED_PREFIXES: Final = ("f_", "co_", "gi_", "cr_", "ag_", "tb_")

_INTERNAL_TYPES: Final = (types.FrameType, types.CodeType, types.GeneratorType, types.CoroutineType,
                          types.AsyncGeneratorType, types.TracebackType)
_ASYNCIO_TYPES: Final = (asyncio.Future, asyncio.AbstractEventLoop)
_MISSING: Final = object()

_PROGRAM_CLASSES: weakref.WeakSet[type] = weakref.WeakSet()


def _refuse(name: str, why: str) -> NoReturn:
    raise AttributeError(f'attribute "{name}" is not available in the sandbox: {why}')


def _is_namedtuple(obj: object) -> bool:
    cls = obj if isinstance(obj, type) else type(obj)
    return issubclass(cls, tuple) and type(getattr(cls, "_fields", None)) is tuple


def _check_attribute(obj: object, name: object, *, read: bool = False) -> str:
    if type(name) is not str:
        raise TypeError("attribute name must be a str")
    if name.startswith("_"):
        if read and (name in READABLE_NAMES or (name in NAMEDTUPLE_NAMES and _is_namedtuple(obj))):
            return name
        _refuse(name, 'names starting with "_" are private')
    if name in INSPECT_ATTRIBUTES or (name.startswith(GUARDED_PREFIXES) and isinstance(obj, _INTERNAL_TYPES)):
        _refuse(name, "frame, code, generator, coroutine and traceback internals are off limits")
    if name in _FORMAT_NAMES and (isinstance(obj, str) or (isinstance(obj, type) and issubclass(obj, str))):
        _refuse(name, "str.format and format_map can read attributes; use an f-string")
    if name in _FORMATTER_NAMES and (isinstance(obj, string.Formatter)
                                     or (isinstance(obj, type) and issubclass(obj, string.Formatter))):
        _refuse(name, "string.Formatter can read attributes")
    if name in _COROUTINE_NAMES and isinstance(obj, (types.CoroutineType, types.AsyncGeneratorType)):
        _refuse(name, "drive coroutines with await")
    if name in _ASYNCIO_NAMES and isinstance(obj, _ASYNCIO_TYPES):
        _refuse(name, "event loop internals are off limits")
    if name == "obj" and isinstance(obj, AttributeError):
        _refuse(name, "AttributeError.obj can expose sandbox internals")
    return name


def guarded_getattr(obj: object, name: str, default: Any = _MISSING) -> Any:
    """``getattr`` for programs: refuses private and introspection names (see module docstring).

    With a default, a refused name gives the default, as a missing attribute does.
    """
    if default is _MISSING:
        _check_attribute(obj, name, read=True)
        return getattr(obj, name)
    try:
        _check_attribute(obj, name, read=True)
    except AttributeError:
        return default
    return getattr(obj, name, default)


def guarded_super_init(proxy: object) -> Any:
    """``super().__init__`` for programs: only a real ``super`` object has its ``__init__`` looked up."""
    if type(proxy) is not super:
        raise AttributeError('"__init__" can only be reached as super().__init__')
    return proxy.__init__  # type: ignore[misc]


def guarded_hasattr(obj: object, name: str) -> bool:
    """``hasattr`` for programs: False for a refused name, as for a missing one (a non-str name raises)."""
    try:
        _check_attribute(obj, name, read=True)
    except AttributeError:
        return False
    return hasattr(obj, name)


def guarded_setattr(obj: object, name: str, value: object) -> None:
    """``setattr`` for programs: a public name, on an object the program may write (:func:`write_guard`)."""
    _check_attribute(obj, name)
    setattr(write_guard(obj), name, value)


def guarded_delattr(obj: object, name: str) -> None:
    """``delattr`` for programs, with the checks of :func:`guarded_setattr`."""
    _check_attribute(obj, name)
    delattr(write_guard(obj), name)


# -- writes ----------------------------------------------------------------------------------------

_WRITABLE_BASES: Final = (dict, list, set, bytearray, collections.deque, decimal.Context,
                          textwrap.TextWrapper)
#: Exact types whose instances a program may always write: the builtin containers, every program
#: class, and every other type :func:`write_guard` has found writable. The policy inlines the
#: membership test (``type(x) in WRITABLE_TYPES``) for stores into a plain name, which is exactly the
#: first branch of :func:`write_guard`. Never holds a metaclass.
WRITABLE_TYPES: Final[set[type]] = {dict, list, set, bytearray}
_refused_types: set[type] = set()


class _ReadOnly:
    """What :func:`write_guard` returns for an object the program may not modify: every write raises."""

    __slots__ = ("_what",)

    def __init__(self, what: str) -> None:
        object.__setattr__(self, "_what", what)

    def _deny(self, *args: object) -> NoReturn:
        raise TypeError(f"cannot modify {object.__getattribute__(self, '_what')}: "
                        "a program may only modify objects it created")

    __setattr__ = __delattr__ = __setitem__ = __delitem__ = __getattr__ = __getitem__ = _deny


def _describe(obj: object) -> str:
    if isinstance(obj, type):
        return f"class {obj.__name__!r}"
    return f"{type(obj).__name__!r} object"


def is_program_class(cls: object) -> bool:
    """Whether ``cls`` was created by a program's ``class`` statement (or inherits from one)."""
    return isinstance(cls, type) and any(base in _PROGRAM_CLASSES for base in cls.__mro__)


def register_program_class(cls: type) -> None:
    """Record ``cls`` as the program's (for helpers that replace a program class with a new one)."""
    _PROGRAM_CLASSES.add(cls)
    if not issubclass(cls, type):
        WRITABLE_TYPES.add(cls)


def is_program_function(fn: object) -> bool:
    """Whether ``fn`` is a plain function defined by a program (its globals carry the marker)."""
    return isinstance(fn, types.FunctionType) and fn.__globals__.get(PROGRAM_MARKER) is True


def write_guard(obj: Any) -> Any:
    """``_write_``: ``obj`` itself when the program may modify it, else a view that refuses writes.

    The first test is the fast path: builtin containers and instances of program classes are always
    the program's own, because nothing the sandbox hands in contains or returns a shared mutable
    container (a facade test checks every member's attributes). A type seen for the first time is
    classified once and remembered.
    """
    cls = type(obj)
    if cls in WRITABLE_TYPES:
        return obj
    if isinstance(obj, type):
        return obj if obj in _PROGRAM_CLASSES else _ReadOnly(_describe(obj))
    if cls not in _refused_types:
        if issubclass(cls, _WRITABLE_BASES) or is_program_class(cls):
            WRITABLE_TYPES.add(cls)
            return obj
        _refused_types.add(cls)
    return _ReadOnly(_describe(obj))


# -- classes and type ------------------------------------------------------------------------------


class _TypeGate(type):
    """Metaclass of :class:`SafeType`: calls are one-argument ``type``, checks mean ``type``."""

    def __call__(cls, *args: object, **kwargs: object) -> Any:
        if len(args) != 1 or kwargs:
            raise TypeError("type() takes exactly one argument in the sandbox; "
                            "define classes with a class statement")
        found = type(args[0])
        if issubclass(found, type):
            return SafeType
        return found

    def __instancecheck__(cls, obj: object) -> bool:
        return isinstance(obj, type)

    def __subclasscheck__(cls, sub: type) -> bool:
        return isinstance(sub, type) and issubclass(sub, type)

    def __repr__(cls) -> str:
        return "<class 'type'>"


class SafeType(metaclass=_TypeGate):
    """The program's ``type``: ``type(x)`` and ``isinstance(x, type)`` work; ``type(n, b, d)`` does not."""


def _most_derived_metaclass(bases: tuple[Any, ...]) -> type:
    winner: type = type
    for base in bases:
        meta = type(base)
        if meta is _TypeGate:
            raise TypeError("classes cannot derive from type in the sandbox")
        if issubclass(winner, meta):
            continue
        if issubclass(meta, winner):
            winner = meta
            continue
        raise TypeError("metaclass conflict: the bases of this class have incompatible metaclasses")
    return winner


class ClassFactory:
    """``__metaclass__`` for ``class`` statements: the metaclass Python would pick, recorded as program's."""

    __slots__ = ()

    def __prepare__(self, name: str, bases: tuple[Any, ...], **kwargs: Any) -> Any:
        meta = _most_derived_metaclass(bases)
        return meta.__prepare__(name, bases, **kwargs)

    def __call__(self, name: str, bases: tuple[Any, ...], namespace: Any, **kwargs: Any) -> type:
        meta = _most_derived_metaclass(bases)
        cls: type = meta(name, bases, namespace, **kwargs)
        register_program_class(cls)
        return cls

    def __repr__(self) -> str:
        return "<class factory>"


# -- builtins --------------------------------------------------------------------------------------

_EXTRA_BUILTINS: Final = (
    "all", "any", "ascii", "bin", "bytearray", "bytes", "classmethod", "dict", "enumerate", "filter",
    "format", "frozenset", "iter", "list", "map", "max", "min", "next", "object", "property", "reversed",
    "set", "sorted", "staticmethod", "sum", "super", "tuple", "zip", "NotImplemented",
    "ConnectionError", "FileExistsError", "FileNotFoundError", "ModuleNotFoundError", "PermissionError",
    "RecursionError", "StopAsyncIteration", "TimeoutError",
)
_REMOVED_BUILTINS: Final = ("_getattr_", "setattr", "delattr")


def build_safe_builtins(import_: Callable[..., Any]) -> dict[str, Any]:
    """The ``__builtins__`` of a program: RestrictedPython's safe set, the guarded extras, ``import_``."""
    table = {name: value for name, value in safe_builtins.items() if name not in _REMOVED_BUILTINS}
    for name in _EXTRA_BUILTINS:
        table[name] = getattr(builtins, name)
    table.update({
        "getattr": guarded_getattr,
        "hasattr": guarded_hasattr,
        "setattr": guarded_setattr,
        "delattr": guarded_delattr,
        "type": SafeType,
        "__import__": import_,
    })
    return table
