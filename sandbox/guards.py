"""Runtime guards: the hooks the policy's generated code calls, and the builtins a program gets.

Why each guard exists:

* :func:`guarded_getattr` (``_getattr_`` and the program's ``getattr``) refuses ``_``-names (but
  reads of :data:`READABLE_NAMES`, plain strings, and of the namedtuple API on namedtuples) and every
  frame/code/generator/coroutine/async-generator/traceback internal by *name*, before any lookup. A
  second kind of rule is keyed on what the lookup *resolves to*, never on the receiver's type, so
  subclasses, ``super()`` proxies, unbound access through the class (``type(x).name``) and objects
  that forward attribute reads (``typing.Annotated[str, 0].format``) cannot route around it: the
  resolved value is refused when it is one of :func:`forbidden_reason`'s functions (``str.format`` /
  ``format_map`` and ``string.Formatter``'s methods walk attributes in C; ``coroutine.send``/``throw``
  drive a coroutine by hand and hand out the event loop's futures; the asyncio ``Future``/``Task``
  accessors of the loop, the coroutine and the stack; ``ABCMeta.register`` of a class the program did
  not define mutates a host registry) or a bound method of one. ``AttributeError.obj`` holds whatever
  object a failed lookup was made on, so it is refused when the lookup would resolve to that member
  descriptor (checked on the receiver's MRO, or the ``super`` proxy's remaining MRO, before the read).
  The namedtuple API's ``_field_defaults`` is handed out as a copy (the class's own dict is shared by
  every run of the process). The policy routes only names in :data:`GUARDED_ATTRIBUTES` /
  :data:`GUARDED_PREFIXES` through it; for every other literal name it would be exactly ``getattr``
  (see :mod:`codemode.sandbox.policy`). A refused name reads as a missing one to ``hasattr`` (False)
  and to ``getattr`` with a default (the default): nothing is revealed.

  The resolved-value rules run for the names that can resolve to those functions (``_VALUE_CHECKED``,
  all in :data:`GUARDED_ATTRIBUTES`); a test walks everything reachable from the facades to check that
  no forbidden function hides under another name. For the names decided on the resolved value alone
  (:data:`RESOLVED_NAMES`: all of them but ``obj`` and the proxy names, which finish by copying) the
  policy compiles a native load followed by
  :func:`check_resolved`, which makes :func:`forbidden_reason`'s decision without a call in the common
  cases (a property test checks that the two agree on everything reachable).

  Widening the language keeps these invariants: a new rule is keyed on the function or descriptor
  (:func:`forbidden_reason`), never on the receiver's type; the ``_VALUE_CHECKED`` and
  :data:`NAMEDTUPLE_NAMES` loads stay routed through ``_getattr_`` even if ``_private`` names become
  readable; a safe ``str.format`` resolves every field through :func:`guarded_getattr` (and replaces
  the entry in :func:`_forbidden_functions` by itself); ``match`` class patterns read attributes in C,
  so admitting them means applying :func:`guarded_getattr`'s rules to every attribute a pattern names
  (``case AttributeError(obj=o)``); helpers that bind names for a program keep refusing dunders and
  sunders (:func:`check_namespace_name`, :func:`check_code_name`).
* :func:`write_guard` (``_write_``) lets a program mutate only what it created: builtin containers and
  their subclasses' instances, a few stdlib value types that are always fresh (deques, decimal contexts,
  text wrappers) and instances of classes it defined, and those classes. Modules facades, host classes,
  the ``tools`` proxy, functions and builtins come back wrapped in a view that refuses every write.
* :data:`SafeType` is the program's ``type``: one argument only, and the type of any class is reported
  as ``SafeType`` itself, so ``type(int)('X', (), {...})`` cannot reach the real three-argument form.
  The policy inlines ``type(x)`` as a lookup in :data:`TYPE_OF` (the same answer, without the
  metaclass's Python ``__call__``) while the name ``type`` still means ``SafeType``.
* :class:`ClassFactory` (``__metaclass__``) builds the classes of ``class`` statements with the metaclass
  Python would pick and records them as program classes.
* The iteration hook is the builtin ``iter`` (nothing reachable needs an iteration check), so the C
  helpers that iterate (``sorted``, ``zip``, ``list`` ...) are equivalent to guarded versions and are
  handed in as they are. ``exec``, ``eval``, ``compile``, ``open``, ``input``, ``breakpoint``, ``help``,
  ``globals``, ``locals`` and ``memoryview`` are simply not there; ``dir`` and ``vars`` are
  :func:`guarded_dir`/:func:`guarded_vars` (the program's own objects only).
* ``_private`` names (:func:`is_private_name`) are readable and writable on objects of classes the
  program defined whose every base is the program's or a ``builtins`` type (:func:`private_access_ok`):
  whatever such a name resolves to, the program put there. A subclass of a host class does not qualify
  (its instances hold the host class's private state: an event loop, a module).
* ``str.format``/``format_map`` resolve to a guarded formatter
  (:class:`codemode.sandbox._formatting.SafeFormat`) however they are reached; the real methods stay in
  the forbidden table, so nothing else can hand them out.
"""

from __future__ import annotations

import abc
import array
import asyncio
import builtins
import collections
import collections.abc
import decimal
import keyword
import numbers
import string
import textwrap
import types
import typing
import unicodedata
import weakref
from asyncio import futures, tasks
from collections.abc import Callable
from typing import Any, Final, NoReturn

from RestrictedPython.Guards import safe_builtins
from RestrictedPython.transformer import INSPECT_ATTRIBUTES

from ._formatting import make_formats

__all__ = (
    "GUARDED_ATTRIBUTES",
    "GUARDED_PREFIXES",
    "NAMEDTUPLE_NAMES",
    "PROGRAM_MARKER",
    "READABLE_NAMES",
    "RESOLVED_NAMES",
    "TYPE_OF",
    "WRITABLE_TYPES",
    "ClassFactory",
    "SafeType",
    "build_safe_builtins",
    "check_code_name",
    "check_field_reads",
    "check_namespace_name",
    "check_resolved",
    "check_value_equality",
    "forbidden_reason",
    "guarded_delattr",
    "guarded_dir",
    "guarded_getattr",
    "guarded_hasattr",
    "guarded_setattr",
    "guarded_super_init",
    "guarded_vars",
    "is_private_name",
    "is_program_class",
    "is_program_function",
    "private_access_ok",
    "register_program_class",
    "write_guard",
    "write_private_guard",
)

#: Key set to ``True`` in every program globals dict; marks functions a program defined.
PROGRAM_MARKER: Final = "__codemode_program_globals__"

_FORMAT_NAMES: Final = frozenset({"format", "format_map"})
_FORMATTER_NAMES: Final = frozenset({"format", "get_field", "get_value", "vformat", "parse",
                                     "convert_field", "format_field"})
_COROUTINE_NAMES: Final = frozenset({"send", "throw"})
_ASYNCIO_NAMES: Final = frozenset({"get_loop", "get_stack", "print_stack", "get_coro", "get_context"})

#: ``_``-names a program may read on any object: plain strings (``type(err).__name__``, ``f.__doc__``)
#: an exception's cause and context (exceptions; their ``__traceback__`` stays refused) and an enum's
#: ``__members__`` (a proxy over a copy of its members: loads go through ``_getattr_``).
READABLE_NAMES: Final = frozenset({"__name__", "__qualname__", "__doc__", "__module__", "__cause__",
                                   "__context__", "__members__"})
#: The namedtuple API, ``_``-prefixed so as not to clash with field names: readable on namedtuple
#: classes and instances only (checked at run time, so their loads go through ``_getattr_``).
NAMEDTUPLE_NAMES: Final = frozenset({"_asdict", "_replace", "_make", "_fields", "_field_defaults"})
#: Public names whose value can be a mappingproxy over shared host state (a compiled pattern's group
#: index, kept in ``re``'s cache; a dataclass field's metadata): a proxy hands its real dict to the other
#: side's ``__eq__``, so these loads get a proxy over a copy.
_PROXY_NAMES: Final = frozenset({"groupindex", "metadata"})
#: Names whose loads are checked on the value they resolve to (see :func:`forbidden_reason`).
_VALUE_CHECKED: Final = (_FORMAT_NAMES | _FORMATTER_NAMES | _COROUTINE_NAMES | _ASYNCIO_NAMES | _PROXY_NAMES
                         | {"obj", "register"})

#: Names whose loads are decided on the resolved value alone (no check before the lookup): the policy
#: compiles ``a.send`` to ``check_resolved(a.send, "send")`` (see :func:`check_resolved`).
#: (Not the proxy names: their loads finish by copying, in :func:`guarded_getattr`'s full path.)
RESOLVED_NAMES: Final = _VALUE_CHECKED - {"obj"} - _PROXY_NAMES

#: Literal attribute names whose loads keep the ``_getattr_`` call (all other loads are native).
GUARDED_ATTRIBUTES: Final[frozenset[str]] = (frozenset(INSPECT_ATTRIBUTES) | _VALUE_CHECKED
                                              | NAMEDTUPLE_NAMES)
#: Attribute name prefixes of frame, code, generator, coroutine, async-generator and traceback internals.
GUARDED_PREFIXES: Final = ("f_", "co_", "gi_", "cr_", "ag_", "tb_")

_INTERNAL_TYPES: Final = (types.FrameType, types.CodeType, types.GeneratorType, types.CoroutineType,
                          types.AsyncGeneratorType, types.TracebackType)
_DESCRIPTOR_TYPES: Final = (types.GetSetDescriptorType, types.MemberDescriptorType)
_MISSING: Final = object()
_ABSENT: Final = object()

_WHY_FORMAT: Final = "str.format and format_map can read attributes; use an f-string"
_WHY_FORMATTER: Final = "string.Formatter can read attributes"
_WHY_COROUTINE: Final = "drive coroutines with await"
_WHY_ASYNCIO: Final = "event loop internals are off limits"
_WHY_ERROR_OBJ: Final = "AttributeError.obj can expose sandbox internals"
_WHY_INTERNAL: Final = "frame, code, generator, coroutine and traceback internals are off limits"
_WHY_REGISTER: Final = ("only classes the program defined (below no host ABC but abc.ABC) can register "
                        "virtual subclasses")

# How a read must be finished (what _check_read returns).
_PLAIN: Final = 0
_CHECK_VALUE: Final = 1
_COPY_DICT: Final = 2

_PROGRAM_CLASSES: weakref.WeakSet[type] = weakref.WeakSet()


def _async_generator_awaitables() -> tuple[type, ...]:
    """The types of ``agen.asend(v)``, ``agen.athrow(e)`` and ``anext(agen, default)`` (their
    ``send``/``throw`` drive it by hand)."""
    async def probe() -> Any:
        yield None

    generator = probe()
    sending, throwing, defaulted = generator.asend(None), generator.athrow(GeneratorExit), anext(generator, 0)
    kinds = (type(sending), type(throwing), type(defaulted))
    for awaitable in (sending, throwing, defaulted):
        awaitable.close()
    return kinds


def _forbidden_functions() -> tuple[tuple[object, str], ...]:
    """Every host function (or descriptor) a program may never hold, with the reason.

    A function is listed by the object its owner's class dict holds, so it is recognised however it
    is reached; a bound method of one is recognised through :func:`forbidden_reason`.
    """
    table: list[tuple[object, str]] = []

    def forbid(owner: type, names: frozenset[str], why: str) -> None:
        for name in sorted(names):
            entry = owner.__dict__.get(name, _MISSING)
            if entry is not _MISSING:
                table.append((entry, why))

    forbid(str, _FORMAT_NAMES, _WHY_FORMAT)
    forbid(string.Formatter, _FORMATTER_NAMES, _WHY_FORMATTER)
    forbid(types.CoroutineType, _COROUTINE_NAMES, _WHY_COROUTINE)
    for owner in _async_generator_awaitables():  # (ag.asend(v).send(None) drives an async generator by hand)
        forbid(owner, _COROUTINE_NAMES, _WHY_COROUTINE)
    # (asyncio.futures._PyFuture and asyncio.tasks._PyTask are the pure-Python twins of the C types)
    for owner in (asyncio.Future, asyncio.Task, futures._PyFuture, tasks._PyTask):  # type: ignore[attr-defined]
        forbid(owner, _ASYNCIO_NAMES, _WHY_ASYNCIO)
    forbid(AttributeError, frozenset({"obj"}), _WHY_ERROR_OBJ)
    forbid(abc.ABCMeta, frozenset({"register"}), _WHY_REGISTER)
    return tuple(table)


#: The forbidden functions and descriptors (see :func:`_forbidden_functions`), by identity.
_FORBIDDEN: Final[dict[int, tuple[object, str]]] = {id(entry): (entry, why)
                                                    for entry, why in _forbidden_functions()}


def _by_name(forbidden: dict[int, tuple[object, str]]) -> dict[str, tuple[tuple[Any, str], ...]]:
    table: dict[str, list[tuple[Any, str]]] = {}
    for entry, why in forbidden.values():
        if isinstance(entry, types.MethodDescriptorType):
            table.setdefault(entry.__name__, []).append((entry, why))
    return {name: tuple(pairs) for name, pairs in table.items()}


#: The C methods among them by name, to recognise their bound forms (``"{}".format``).
_FORBIDDEN_C_METHODS: Final = _by_name(_FORBIDDEN)
_ABC_REGISTER: Final = abc.ABCMeta.__dict__["register"]
#: The classes those C methods belong to (a bound C method of anything else is not one of them).
_FORBIDDEN_C_OWNERS: Final = tuple({descriptor.__objclass__: None for pairs in _FORBIDDEN_C_METHODS.values()
                                    for descriptor, _ in pairs})


def forbidden_reason(value: object) -> str | None:
    """Why ``value`` may never be handed to a program, or ``None`` when it may.

    Keyed on the function itself: the listed functions and descriptors, unbound or bound to any
    receiver (a ``str`` subclass, an enum member, a ``super`` proxy's instance), the getset and member
    descriptors of frames, code, generators, coroutines and tracebacks, and ``ABCMeta.register`` bound
    to a class the program did not define.
    """
    kind = type(value)
    if kind is types.MethodType:
        function = value.__func__  # type: ignore[attr-defined]
        if function is _ABC_REGISTER:
            return None if _registers_only_program_classes(value.__self__) else _WHY_REGISTER  # type: ignore[attr-defined]
        value = function
    elif kind is types.BuiltinMethodType:
        candidates = _FORBIDDEN_C_METHODS.get(value.__name__)  # type: ignore[attr-defined]
        if candidates:
            owner = value.__self__  # type: ignore[attr-defined]
            for descriptor, why in candidates:
                if isinstance(owner, descriptor.__objclass__) and descriptor.__get__(owner) == value:
                    return why
        return None
    elif kind in _DESCRIPTOR_TYPES and value.__objclass__ in _INTERNAL_TYPES:  # type: ignore[attr-defined]
        return _WHY_INTERNAL
    held = _FORBIDDEN.get(id(value))
    return held[1] if held is not None and held[0] is value else None


#: The types of every value :func:`forbidden_reason` can refuse; any other value is let through unexamined.
_SUSPECT_KINDS: Final = frozenset({types.MethodType, types.BuiltinMethodType, *_DESCRIPTOR_TYPES,
                                   *(type(entry) for entry, _ in _FORBIDDEN.values())})


def check_resolved(value: Any, name: str) -> Any:
    """``value`` (what a load of ``name`` resolved to) if a program may hold it, else AttributeError.

    Exactly ``forbidden_reason(value) is None``, decided without a call for the common cases: a value
    of a type no forbidden entry has, a bound method whose function is not listed, a bound C method
    of an object none of the listed C methods belongs to. The policy calls it for the literal loads of
    :data:`RESOLVED_NAMES`; :func:`guarded_getattr` for the same names read by ``getattr``.
    """
    kind = type(value)
    if kind is types.MethodType:
        function = value.__func__
        if function is not _ABC_REGISTER and id(function) not in _FORBIDDEN:
            return value
    elif kind is types.BuiltinMethodType:
        owner = value.__self__
        if not isinstance(owner, _FORBIDDEN_C_OWNERS):
            return value
        for descriptor, reason in _FORBIDDEN_C_METHODS.get(value.__name__, ()):
            if isinstance(owner, descriptor.__objclass__) and descriptor.__get__(owner) == value:
                return _swap_or_refuse(value, name, reason)
        return value
    elif kind not in _SUSPECT_KINDS:
        return value
    why = forbidden_reason(value)
    if why is None:
        return value
    return _swap_or_refuse(value, name, why)


def _swap_or_refuse(value: object, name: str, why: str) -> Any:
    """The guarded formatter for a refused ``str.format``/``format_map``, else the refusal."""
    if name in _FORMAT_NAMES:
        safe = _safe_format(value)
        if safe is not None:
            return safe
    _refuse(name, why)


def _registers_only_program_classes(cls: object) -> bool:
    """Whether ``cls.register(x)`` changes the answers of the program's ABCs only.

    A virtual subclass of ``cls`` is one of every ABC above it too (``issubclass`` walks the ABC's
    subclasses), so ``cls`` and each ABC in its MRO (``abc.ABC`` aside) must be the program's: a program
    subclass of ``numbers.Integral`` registering ``float`` would make ``isinstance(1.5, numbers.Integral)``
    true for the whole process.
    """
    return isinstance(cls, type) and cls in _PROGRAM_CLASSES and all(
        klass in _PROGRAM_CLASSES or klass is abc.ABC or not isinstance(klass, abc.ABCMeta)
        for klass in cls.__mro__)


def _resolve_in_classes(obj: object, name: str) -> object:
    """The class-dict entry a lookup of ``name`` on ``obj`` finds first (a ``super`` proxy's too)."""
    if isinstance(obj, super):
        proxy: Any = obj
        owner = proxy.__self_class__
        if owner is None:
            return _MISSING
        mro = owner.__mro__
        classes = mro[mro.index(proxy.__thisclass__) + 1:]
    else:
        classes = (obj if issubclass(type(obj), type) else type(obj)).__mro__  # type: ignore[attr-defined]
    for klass in classes:
        entry = klass.__dict__.get(name, _MISSING)
        if entry is not _MISSING:
            return entry
    return _MISSING


def _refuse(name: str, why: str) -> NoReturn:
    raise AttributeError(f'attribute "{name}" is not available in the sandbox: {why}')


def _is_namedtuple(obj: object) -> bool:
    cls = obj if isinstance(obj, type) else type(obj)
    return issubclass(cls, tuple) and type(getattr(cls, "_fields", None)) is tuple


# -- private names of the program's own objects ------------------------------------------------------

#: Host classes a program class may derive from and keep its ``_private`` attributes readable: they
#: hold no instance state (``__slots__ = ()``) and their own ``_``-attributes are plain helper functions
#: (``Set._from_iterable``, ``Set._hash``) or excluded ABC state (``_abc_impl``); ``builtins`` types are
#: checked by module.
_PLAIN_BASES: Final[frozenset[type]] = frozenset({
    typing.Generic, typing.Protocol, abc.ABC,
    *(getattr(collections.abc, name) for name in collections.abc.__all__),
    numbers.Number, numbers.Complex, numbers.Real, numbers.Rational, numbers.Integral,
})
_plain_classes: weakref.WeakKeyDictionary[type, bool] = weakref.WeakKeyDictionary()
#: Builtin types whose instances hold another object's state: a ``super`` proxy resolves names in a host
#: object's classes; ``staticmethod``/``classmethod`` copy the wrapped function's attributes (its real
#: ``__annotations__`` dict) into their own ``__dict__``. A program subclass of one is not plain.
_HOLDING_BUILTINS: Final = frozenset({super, staticmethod, classmethod})

_WHY_DUNDER: Final = ("dunder attributes are Python internals; use type(x), x.__name__, vars(obj) or "
                      "dir(obj), or a \"_name\" attribute on your own objects")
_WHY_PRIVATE: Final = ('names starting with "_" are private (a program may use "_name" attributes on objects '
                       "of classes it defined)")


#: ``_x`` names that are not the program's: RestrictedPython's print collector and the namedtuple API.
_NOT_PRIVATE: Final = frozenset({"_print", "_source"}) | NAMEDTUPLE_NAMES


def is_private_name(name: str) -> bool:
    """Whether ``name`` is a program's private name: ``_x`` (not ``__x``, not ``_x_``, not the hooks').

    Names starting with two underscores (dunders, mangled names) and names ending with ``_`` (the
    sandbox's hooks ``_getattr_``, ``_write_`` ..., enum's ``_value_``) stay reserved.
    """
    return (len(name) > 1 and name[0] == "_" and name[1] != "_" and name[-1] != "_"
            and name not in _NOT_PRIVATE and not name.startswith("_abc_"))


def _is_plain_program_class(cls: type) -> bool:
    """A program class whose every base is a program class, a ``builtins`` type or a plain ABC base."""
    known = _plain_classes.get(cls)
    if known is None:
        known = cls in _PROGRAM_CLASSES and all(
            klass in _PROGRAM_CLASSES or (klass.__module__ == "builtins" and klass not in _HOLDING_BUILTINS)
            or klass in _PLAIN_BASES for klass in cls.__mro__)
        _plain_classes[cls] = known
    return known


def private_access_ok(obj: object) -> bool:
    """Whether a program may read and write ``_x`` names of ``obj``: its own plain objects and classes.

    Every class in the MRO is the program's or a ``builtins`` type, so whatever a ``_x`` name
    resolves to was put there by the program (no host class's private state, no host ``__init__``
    that stored a loop or a module under a private name).
    """
    cls = obj if isinstance(obj, type) else type(obj)
    return _is_plain_program_class(cls)


def _private_owner(obj: object) -> object:
    """Whose ``_x`` names a read on ``obj`` sees: a ``super`` proxy resolves them in its object's classes
    (``super()._helper()`` in the program's own hierarchy), anything else in its own."""
    if isinstance(obj, super):
        proxy: Any = obj
        return _MISSING if proxy.__self__ is None else proxy.__self__
    return obj


def _check_read(obj: object, name: object) -> int:
    """Refuse a read by name (before any lookup); say how the read must be finished."""
    if type(name) is not str:
        raise TypeError("attribute name must be a str")
    if name in _VALUE_CHECKED:
        if name == "obj":
            why = forbidden_reason(_resolve_in_classes(obj, name))
            if why is not None:
                _refuse(name, why)
        return _CHECK_VALUE
    if name.startswith("_"):
        if name in READABLE_NAMES:
            return _COPY_DICT if name == "__members__" else _PLAIN
        if name in NAMEDTUPLE_NAMES and _is_namedtuple(obj):
            return _COPY_DICT if name == "_field_defaults" else _PLAIN
        # (on a class, only what its own MRO holds: not its metaclass's privates, ABCMeta's included)
        if is_private_name(name) and private_access_ok(_private_owner(obj)) and (
                not isinstance(obj, type) or _resolve_in_classes(obj, name) is not _MISSING):
            return _PLAIN
        _refuse(name, _WHY_DUNDER if name.startswith("__") else _WHY_PRIVATE)
    if name in INSPECT_ATTRIBUTES:
        _refuse(name, _WHY_INTERNAL)
    if name.startswith(GUARDED_PREFIXES):
        if isinstance(obj, _INTERNAL_TYPES):
            _refuse(name, _WHY_INTERNAL)
        return _CHECK_VALUE
    return _PLAIN


def _check_write(obj: object, name: object) -> str:
    if type(name) is not str:
        raise TypeError("attribute name must be a str")
    if name.startswith("_") and not (is_private_name(name) and private_access_ok(obj)):
        _refuse(name, _WHY_PRIVATE)
    if name in INSPECT_ATTRIBUTES or name.startswith(GUARDED_PREFIXES):
        _refuse(name, _WHY_INTERNAL)
    return name


def guarded_getattr(obj: object, name: str, default: Any = _MISSING) -> Any:
    """``getattr`` for programs: refuses private and introspection names (see module docstring).

    With a default, a refused name gives the default, as a missing attribute does.
    """
    if default is _MISSING and type(name) is str and name in RESOLVED_NAMES:
        return check_resolved(getattr(obj, name), name)
    try:
        finish = _check_read(obj, name)
    except AttributeError:
        if default is _MISSING:
            raise
        return default
    if finish == _PLAIN:
        return getattr(obj, name) if default is _MISSING else getattr(obj, name, default)
    value = getattr(obj, name) if default is _MISSING else getattr(obj, name, _MISSING)
    if value is _MISSING:
        return default
    if finish == _COPY_DICT:
        # (a proxy hands its real mapping to the other side's __eq__: an enum's member map)
        if type(value) is types.MappingProxyType:
            return types.MappingProxyType(dict(value))
        return dict(value) if isinstance(value, dict) else value
    if name in _FORMAT_NAMES:
        safe = _safe_format(value)
        if safe is not None:
            return safe
    if type(value) is types.MappingProxyType and name in _PROXY_NAMES:
        return types.MappingProxyType(dict(value))
    why = forbidden_reason(value)
    if why is None:
        return value
    if default is not _MISSING:
        return default
    _refuse(name, why)


_STR_FORMAT: Final = str.__dict__["format"]
_STR_FORMAT_MAP: Final = str.__dict__["format_map"]
_SAFE_STR_FORMAT, _SAFE_STR_FORMAT_MAP, _bound_format = make_formats(guarded_getattr)


def _safe_format(value: object) -> object | None:
    """The guarded stand-in for ``str.format``/``format_map`` (unbound or bound), else ``None``."""
    if value is _STR_FORMAT:
        return _SAFE_STR_FORMAT
    if value is _STR_FORMAT_MAP:
        return _SAFE_STR_FORMAT_MAP
    if type(value) is types.BuiltinMethodType:
        owner: Any = getattr(value, "__self__", None)
        if isinstance(owner, str):
            for descriptor, use_map in ((_STR_FORMAT, False), (_STR_FORMAT_MAP, True)):
                if descriptor.__get__(owner) == value:
                    return _bound_format(owner, use_map)
    return None


def guarded_super_init(proxy: object) -> Any:
    """``super().__init__`` for programs: a real ``super`` object over an object the program may write.

    A base class's ``__init__`` rewrites the object it runs on, so ``super(type(x), x).__init__(...)`` on
    a host object would bypass :func:`write_guard` (a cached ``typing`` alias, shared by every run and
    by the host, re-initialised with another origin): the proxy's object must be one the program may
    modify (its own instances and classes), as for any other write.
    """
    if type(proxy) is not super:
        raise AttributeError('"__init__" can only be reached as super().__init__')
    target: Any = proxy
    owner = target.__self__
    if owner is None or write_guard(owner) is not owner:
        raise TypeError(f"cannot re-initialise {_describe(owner)}: "
                        "a program may only modify objects it created")
    return target.__init__


def guarded_hasattr(obj: object, name: str) -> bool:
    """``hasattr`` for programs: False for a refused name, as for a missing one (a non-str name raises)."""
    return guarded_getattr(obj, name, _ABSENT) is not _ABSENT


def guarded_setattr(obj: object, name: str, value: object) -> None:
    """``setattr`` for programs: a public name, on an object the program may write (:func:`write_guard`)."""
    setattr(write_guard(obj), _check_write(obj, name), value)


def guarded_delattr(obj: object, name: str) -> None:
    """``delattr`` for programs, with the checks of :func:`guarded_setattr`."""
    delattr(write_guard(obj), _check_write(obj, name))


# -- names a program hands to helpers that build classes -------------------------------------------


def check_namespace_name(name: object, where: str) -> str:
    """``name`` if a helper may bind it in a class namespace for the program, else a ValueError.

    Helpers such as enum's functional API bind program-chosen names as class attributes; a name
    starting with ``_`` would define a protocol hook (``__reduce_ex__``, ``__annotations__``,
    ``__init_subclass__``), an enum hook (``_missing_``, ``_generate_next_value_``, ``_ignore_``) or a
    private attribute, none of which a class statement of the program may define. Any other exact
    ``str`` is a plain member name (CPython admits names that are not identifiers there, and so do we).
    A widened language that admits ``_private`` names must still refuse dunders and sunders here.
    """
    if type(name) is not str:
        raise TypeError(f"{where}: names must be str, not {type(name).__name__!r}")
    if name.startswith("_"):
        raise ValueError(f"{where}: the name {name!r} is not available in the sandbox "
                         "(names starting with \"_\" are reserved for Python and enum hooks)")
    return name


def check_code_name(name: object, where: str) -> str:
    """``name`` if stdlib code may paste it into Python source it generates, else a ValueError.

    ``dataclasses`` writes its methods as source text built from the field names and ``exec``s it,
    so a field name must be exactly an identifier that the tokenizer reads back unchanged (NFKC form),
    not a keyword, and not a dunder or mangled name (``__``).
    """
    if type(name) is not str:
        raise TypeError(f"{where}: names must be str, not {type(name).__name__!r}")
    if (not name.isidentifier() or keyword.iskeyword(name) or name.startswith("__")
            or not (name.isascii() or unicodedata.normalize("NFKC", name) == name)):
        raise ValueError(f"{where}: {name!r} is not available in the sandbox (it must be an identifier in "
                         "NFKC form, not a keyword, and not start with \"__\")")
    return name


# -- writes ----------------------------------------------------------------------------------------

_WRITABLE_BASES: Final = (dict, list, set, bytearray, collections.deque, decimal.Context,
                          textwrap.TextWrapper, array.array, types.SimpleNamespace)
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
                        "a program may only modify objects it created (make your own: a copy, or an "
                        "instance of a class you define)")

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


def write_private_guard(obj: Any) -> Any:
    """The store hook of ``obj._x = v``: ``obj`` when its private names are the program's, else a view
    that refuses the write (see :func:`private_access_ok`)."""
    if private_access_ok(obj):
        return obj
    return _ReadOnly(f"the private attributes of {_describe(obj)} (a program may set \"_name\" attributes "
                     "only on objects of classes it defined)")


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


#: Bound of :data:`TYPE_OF` (it is emptied when full, so it never keeps many dead classes alive).
_TYPE_OF_MAX: Final = 512


class _TypeOf(dict[type, type]):
    """What ``SafeType(x)`` answers, keyed on ``x``'s real class; filled on first use (see the policy)."""

    __slots__ = ()

    def __missing__(self, kind: type) -> type:
        answer: type = SafeType if issubclass(kind, type) else kind
        if len(self) >= _TYPE_OF_MAX:
            self.clear()
        self[kind] = answer
        return answer


#: The inlined one-argument ``type(x)``: ``TYPE_OF[type(x)]`` is ``SafeType(x)``. Never reachable by
#: programs (a ``_``-global); its entries are derived from the key alone, so no program can skew them,
#: and emptying it (as the executor does after each run) only costs the next lookups a refill.
TYPE_OF: Final = _TypeOf()


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


#: Value types the stdlib's process-wide caches take as keys (``struct``'s formats, ``_strptime``'s and
#: ``typing``'s): a hashable subclass with the program's ``__eq__`` would answer for the host's lookups.
_CACHED_VALUE_TYPES: Final = (str, bytes, int, float, complex, tuple, frozenset)


def check_value_equality(cls: type) -> None:
    """Refuse a hashable program subclass of ``str``/``bytes``/``int``/... with its own ``__eq__``.

    Stored as a key in a process-wide cache (``struct.pack(fmt)``, ``time.strptime(s, fmt)``,
    ``typing.List[...]``), it would be asked by every later lookup with an equal hash, the host's
    included: its ``__eq__`` would run there and could make the host get what the program cached.
    """
    if not issubclass(cls, _CACHED_VALUE_TYPES) or getattr(cls, "__hash__", None) is None:
        return
    for klass in cls.__mro__:
        if "__eq__" in klass.__dict__:
            if klass in _PROGRAM_CLASSES:
                raise TypeError(f"class {cls.__name__!r}: a hashable subclass of a builtin value type cannot "
                                "define __eq__ in the sandbox (the process's caches would call it); compare "
                                "with a method, or leave out __hash__ (the class is then unhashable)")
            return


_TUPLE_GETTER: Final = type(collections.namedtuple("_Probe", "field").field)  # type: ignore[attr-defined]


def check_field_reads(cls: type) -> None:
    """Refuse a program class whose fields would be read in C with names the guard refuses.

    ``case C(x)`` reads the names in ``C.__match_args__`` with a C-level ``getattr``, and
    ``dataclasses.asdict``/``astuple``/``replace`` read every dataclass field with ``getattr``. A field
    the instance does not hold resolves in the classes, so ``format`` on a ``str`` subclass is the real
    ``str.format`` and ``_x`` on a subclass of a host class is that class's private state. Such names
    are refused unless the guard would give the same answer: ``_x`` on the program's plain classes, a
    checked name (``obj``, ``format``) there too when no host class defines it.
    """
    names: list[object] = []
    match_args = getattr(cls, "__match_args__", ())
    if type(match_args) is tuple:
        names.extend(match_args)
    fields = getattr(cls, "__dataclass_fields__", None)
    if type(fields) is dict:
        names.extend(fields)
    for name in names:
        if type(name) is not str:
            continue
        if name.startswith("_"):
            refused = not (is_private_name(name) and private_access_ok(cls))
        elif name in GUARDED_ATTRIBUTES or name.startswith(GUARDED_PREFIXES):
            if type(_resolve_in_classes(cls, name)) is _TUPLE_GETTER:
                continue  # (a namedtuple's field: the item the tuple was made with)
            refused = not private_access_ok(cls) or any(
                name in klass.__dict__ for klass in cls.__mro__ if klass not in _PROGRAM_CLASSES)
        else:
            continue
        if refused:
            raise TypeError(f"class {cls.__name__!r}: the field {name!r} is not available in the sandbox "
                            "(match patterns and dataclasses read fields in C, and the attribute guard "
                            "refuses or checks this one here); rename the field")


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
        check_field_reads(cls)
        check_value_equality(cls)
        return cls

    def __repr__(self) -> str:
        return "<class factory>"


# -- builtins --------------------------------------------------------------------------------------

_EXTRA_BUILTINS: Final = (
    "aiter", "all", "anext", "any", "ascii", "bin", "bytearray", "bytes", "classmethod", "dict", "enumerate",
    "filter", "format", "frozenset", "iter", "list", "map", "max", "min", "next", "object", "property",
    "reversed", "set", "sorted", "staticmethod", "sum", "super", "tuple", "zip", "NotImplemented",
    "BaseExceptionGroup", "ExceptionGroup", "ConnectionError", "FileExistsError", "FileNotFoundError",
    "ModuleNotFoundError", "PermissionError", "RecursionError", "StopAsyncIteration", "TimeoutError",
)
_REMOVED_BUILTINS: Final = ("_getattr_", "setattr", "delattr")


def guarded_vars(*args: object) -> dict[str, Any]:
    """``vars(obj)`` for programs: the ``__dict__`` of its own objects, a copy of its own classes'.

    An instance of a class the program defined (every base the program's or a builtin type) or a
    ``SimpleNamespace`` gives its real ``__dict__``, as in CPython; a program class gives a copy of its
    namespace without dunders. Anything else is refused: a host object's ``__dict__`` is host state.
    """
    if len(args) != 1:
        raise TypeError("vars() takes exactly one argument in the sandbox: vars(obj) of an object the "
                        "program created (use dir(obj) for the names of other objects)")
    obj = args[0]
    if isinstance(obj, type):
        if private_access_ok(obj):
            return {name: value for name, value in obj.__dict__.items() if not name.startswith("__")}
    elif private_access_ok(obj) or type(obj) is types.SimpleNamespace:
        try:
            namespace: dict[str, Any] = object.__getattribute__(obj, "__dict__")
        except AttributeError:
            raise TypeError("vars() argument must have __dict__ attribute") from None
        return namespace
    raise TypeError(f"vars() is available for objects of classes the program defined, not "
                    f"{_describe(obj)}; use dir(obj) for the names you can read")


def guarded_dir(*args: object) -> list[str]:
    """``dir(obj)`` for programs: the sorted names of ``obj`` a program can read (no dunders).

    A module facade lists its members; other objects list their public names, and ``_x`` names on
    the program's own objects.
    """
    if len(args) != 1:
        raise TypeError("dir() takes exactly one argument in the sandbox: dir(obj)")
    obj = args[0]
    from .facades import ModuleFacade

    if isinstance(obj, ModuleFacade):
        members: Any = object.__getattribute__(obj, "_facade_members")
        return sorted(members)
    own = private_access_ok(obj)
    return [name for name in dir(obj)
            if not name.startswith("_") or (own and is_private_name(name))]


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
        "dir": guarded_dir,
        "vars": guarded_vars,
        "type": SafeType,
        "__import__": import_,
    })
    return table
