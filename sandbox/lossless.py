"""Lossless JSON: the one value domain that crosses every boundary of codemode.

A value is *lossless JSON* when encoding it as JSON text and decoding it again yields an equal value of
the same types. In Python that is: ``None``, ``bool``, ``int`` (exact, any size up to
:data:`MAX_INT_BITS`), finite ``float`` other than ``-0.0``, ``str`` (Unicode text), ``list`` of lossless
values and ``dict`` with ``str`` keys and lossless values. Tuples, sets, bytes, NaN, infinities, ``-0.0``,
non-string keys, cycles and arbitrary objects are rejected, never silently converted.

**Text is Unicode.** A Python ``str`` may hold a lone surrogate (``"\ud800"``, ``chr(0xdc80)``, a file
name decoded with ``surrogateescape``); it has no UTF-8 form, so it could not be written to a terminal, a
file, a JSON-RPC stream or a log. Such a string is refused here, where a value enters the domain
(:func:`snapshot`, :func:`loads`, :func:`dumps`), with an error that names where it is - never escaped or
replaced, which would change the value silently. Diagnostic text that has to quote such a string (an
error message) uses :func:`escape_lone_surrogates`, which writes each one as ``\udc80``, as CPython's
standard error stream does.

Tool arguments, tool values, event data and every value that crosses the sandbox protocol live in this
domain. The module is a leaf: it imports nothing from codemode, so both the runtime and the sandbox can
use it without depending on each other.

Walks are iterative (no recursion limit) and read every container exactly once, so a snapshot is a
consistent deep copy even of a value whose container subclass misbehaves.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Iterator
from typing import Any, NoReturn, TypeAlias

__all__ = (
    "MAX_INT_BITS",
    "FrozenDict",
    "FrozenList",
    "JsonValue",
    "LosslessJsonError",
    "canonical_dumps",
    "dumps",
    "encoded_size",
    "escape_lone_surrogates",
    "is_lossless",
    "is_plain",
    "loads",
    "lone_surrogate",
    "snapshot",
    "thaw",
    "wire_order_key",
)

JsonValue: TypeAlias = bool | int | float | str | list["JsonValue"] | dict[str, "JsonValue"] | None

#: Integers wider than this are rejected: CPython refuses to print ints of more than 4,300 digits.
MAX_INT_BITS = 14_000


class LosslessJsonError(ValueError):
    """A value is outside the lossless JSON domain.

    ``path`` locates the offending node (``value.items[2].name``); ``reason`` says what is wrong with it.
    """

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: {reason}")


def _immutable(self: object, *args: object, **kwargs: object) -> NoReturn:
    raise TypeError(f"{type(self).__name__} is a frozen snapshot and cannot be modified")


class FrozenDict(dict[str, Any]):
    """A ``dict`` snapshot that refuses mutation (still a ``dict`` for ``isinstance`` and ``json``).

    Constructing one checks and freezes its contents as ``snapshot(..., freeze=True)`` does, so every
    ``FrozenDict`` is lossless and frozen all the way down; that is what lets :func:`snapshot` return
    one unchanged instead of copying it again.
    """

    __slots__ = ()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        dict.update(self, snapshot(dict(*args, **kwargs), freeze=True))
    __setitem__ = __delitem__ = __ior__ = _immutable
    clear = pop = popitem = setdefault = update = _immutable

    def __hash__(self) -> int:  # type: ignore[override]
        raise TypeError("unhashable type: 'FrozenDict'")

    def __copy__(self) -> dict[str, Any]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        return thaw(self)

    def __reduce__(self) -> Any:
        return (dict, (dict(self),))


class FrozenList(list[Any]):
    """A ``list`` snapshot that refuses mutation (still a ``list`` for ``isinstance`` and ``json``).

    Like :class:`FrozenDict`, constructing one checks and freezes its items.
    """

    __slots__ = ()

    def __init__(self, items: Iterable[Any] = ()) -> None:
        list.extend(self, snapshot(list(items), freeze=True))
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _immutable
    append = clear = extend = insert = pop = remove = reverse = sort = _immutable

    def __hash__(self) -> int:  # type: ignore[override]
        raise TypeError("unhashable type: 'FrozenList'")

    def __copy__(self) -> list[Any]:
        return list(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        return thaw(self)

    def __reduce__(self) -> Any:
        return (list, (list(self),))


_SURROGATE = re.compile("[\ud800-\udfff]")
#: A JSON ``\\uD800``-``\\uDFFF`` escape: the decoded text may hold a lone surrogate (pairs are joined).
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def lone_surrogate(text: str) -> int:
    """Index of the first lone surrogate in ``text`` (a code point U+D800-U+DFFF), or -1 if it has none.

    Python never joins a surrogate pair inside a ``str``, so every surrogate code point is lone. ASCII
    text (the common case) is answered without a scan.
    """
    if text.isascii():
        return -1
    found = _SURROGATE.search(text)
    return -1 if found is None else found.start()


def wire_order_key(name: str) -> bytes:
    """Sort key giving UTF-16 code-unit order, the order of JSON text as JavaScript-based providers,
    caches and the reference sort it (Python's own ``sorted`` is code-point order)."""
    return name.encode("utf-16-be", "surrogatepass")


def escape_lone_surrogates(text: str) -> str:
    """``text`` with each lone surrogate written as ``\\udc80`` (for diagnostics, never for values)."""
    if lone_surrogate(text) < 0:
        return text
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _surrogate_reason(text: str, index: int) -> str:
    return (f"lone surrogate \\u{ord(text[index]):04x} at character {index} is not Unicode text (it has no "
            "UTF-8 form); remove it, or carry binary data as base64")


def _describe_key(key: object) -> str:
    """A non-string key for an error message, without running any code of the key's class.

    The key may be a program's object: its ``__repr__`` is program code (which may raise, or never end)
    and a wide int has no decimal form; only small exact scalars are shown by value.
    """
    kind = type(key)
    if key is None or kind is bool or kind is float or (kind is int and key.bit_length() <= 64):  # type: ignore[attr-defined]
        return repr(key)
    return f"of type {_type_name(kind)!r}"


def _type_name(kind: type) -> str:
    """``kind.__name__`` as an exact ``str``: a class the enum API named with a program's ``str``
    subclass would run that subclass's ``__str__``/``__repr__`` when formatted."""
    return str.__str__(kind.__name__)


def _key_path(path: str, key: str) -> str:
    if key.isidentifier():
        return f"{path}.{key}"
    return f"{path}[{escape_lone_surrogates(json.dumps(key, ensure_ascii=False))}]"


def _check_scalar(value: object, path: str) -> object:
    """Return the value if it is a lossless scalar, raise otherwise; containers return a sentinel."""
    kind = type(value)
    if value is None or kind is bool:
        return value
    if kind is str:
        index = lone_surrogate(value)  # type: ignore[arg-type]
        if index >= 0:
            raise LosslessJsonError(path, _surrogate_reason(value, index))  # type: ignore[arg-type]
        return value
    if kind is int:
        if value.bit_length() > MAX_INT_BITS:  # type: ignore[attr-defined]
            raise LosslessJsonError(path, f"integer wider than {MAX_INT_BITS} bits")
        return value
    if kind is float:
        if not math.isfinite(value):  # type: ignore[arg-type]
            raise LosslessJsonError(path, f"non-finite number {value!r}")
        if value == 0.0 and math.copysign(1.0, value) < 0:
            raise LosslessJsonError(path, "negative zero (-0.0) has no lossless JSON form")
        return value
    if isinstance(value, dict | list):
        return _CONTAINER
    raise LosslessJsonError(path, f"{_type_name(kind)} is not a JSON value")


_CONTAINER = object()


#: The fast copy handles trees up to this deep and integers below this size; anything else (and any
#: subclass, bad value or cycle) takes the full walk, which owns every error message.
_FAST_DEPTH = 24
_FAST_INT = 1 << 1000


class _Unusual(Exception):
    """The value needs the full walk."""


def _make_frozen_dict(items: dict[str, Any]) -> FrozenDict:
    made = dict.__new__(FrozenDict)  # (no __init__: the items are checked and frozen already)
    dict.update(made, items)
    return made


def _make_frozen_list(items: Iterable[Any]) -> FrozenList:
    made = list.__new__(FrozenList)
    list.extend(made, items)
    return made


def _fast_copy(value: Any, depth: int, dict_type: type[dict[str, Any]], list_type: type[list[Any]]) -> Any:
    kind = type(value)
    if kind is str:
        if value.isascii() or _SURROGATE.search(value) is None:
            return value
        raise _Unusual  # (the full walk names the lone surrogate)
    if kind is bool or value is None:
        return value
    if kind is int:
        if -_FAST_INT < value < _FAST_INT:
            return value
        raise _Unusual
    if kind is float:
        if math.isfinite(value) and (value != 0 or math.copysign(1.0, value) > 0):
            return value
        raise _Unusual
    if depth >= _FAST_DEPTH:
        raise _Unusual
    if kind is dict or kind is FrozenDict:
        if kind is FrozenDict and dict_type is FrozenDict:  # checked and frozen all the way down
            return value
        out = {}
        for key, item in dict.items(value):
            if type(key) is not str or not (key.isascii() or _SURROGATE.search(key) is None):
                raise _Unusual
            # Scalars dominate JSON values: skip the call for ASCII strings, booleans, null and small ints.
            kind = type(item)
            if ((kind is str and item.isascii()) or kind is bool or item is None
                    or (kind is int and -_FAST_INT < item < _FAST_INT)):
                out[key] = item
            else:
                out[key] = _fast_copy(item, depth + 1, dict_type, list_type)
        return out if dict_type is dict else _make_frozen_dict(out)
    if kind is list or kind is FrozenList:
        if kind is FrozenList and list_type is FrozenList:
            return value
        items = [item if ((type(item) is str and item.isascii()) or item is None or type(item) is bool
                          or (type(item) is int and -_FAST_INT < item < _FAST_INT))
                 else _fast_copy(item, depth + 1, dict_type, list_type)
                 for item in list.__iter__(value)]
        return items if list_type is list else _make_frozen_list(items)
    raise _Unusual


def is_plain(value: object) -> bool:
    """True for a value certainly lossless without a full walk (never raises, copies nothing).

    That is a small, shallow tree of exact dicts and lists of ordinary scalars, or a frozen value
    (checked when it was built). The converse does not hold: deep or exotic values are checked fully.
    """
    try:
        return _plain_walk(value, 0)
    except RecursionError:
        return False


def _plain_walk(value: Any, depth: int) -> bool:
    kind = type(value)
    if kind is str:
        return lone_surrogate(value) < 0
    if kind is bool or value is None:
        return True
    if kind is int:
        return bool(-_FAST_INT < value < _FAST_INT)
    if kind is float:
        return math.isfinite(value) and (value != 0 or math.copysign(1.0, value) > 0)
    if kind is FrozenDict or kind is FrozenList:
        return True
    if depth >= _FAST_DEPTH:
        return False
    if kind is dict:
        return all(type(key) is str and lone_surrogate(key) < 0 and _plain_walk(item, depth + 1)
                   for key, item in dict.items(value))
    if kind is list:
        return all(_plain_walk(item, depth + 1) for item in list.__iter__(value))
    return False


def snapshot(value: object, *, freeze: bool = False, root: str = "value") -> Any:
    """Validate ``value`` and return a detached deep copy of it.

    With ``freeze=True`` the copy is built from :class:`FrozenDict` and :class:`FrozenList`, so nobody
    downstream can mutate it. Shared sub-values (a DAG) are allowed and copied once per reference; a
    cycle is an error. Raises :class:`LosslessJsonError` naming the first offending path.

    Small plain trees (the common case) are copied recursively; everything else, and every error,
    comes from the full iterative walk, so the result is the same either way.
    """
    dict_type: type[dict[str, Any]] = FrozenDict if freeze else dict
    list_type: type[list[Any]] = FrozenList if freeze else list
    try:
        return _fast_copy(value, 0, dict_type, list_type)
    except (_Unusual, RecursionError):
        return _full_snapshot(value, dict_type, list_type, root)


class _Frame:
    """One open container of the full walk: its children so far, and where it sits in its parent.

    Paths are not kept per node (a 20,000-deep list would cost the square of its depth in path text):
    :func:`_path` rebuilds one from the open frames' keys only when an error needs it.
    """

    __slots__ = ("children", "collected", "container", "is_dict", "key")

    def __init__(self, container: object, key: object, children: Iterator[tuple[Any, Any]],
                 is_dict: bool) -> None:
        self.container = container
        self.key = key
        self.children = children
        self.collected: list[tuple[Any, Any]] = []
        self.is_dict = is_dict


def _path(root: str, stack: list[_Frame], key: object = None, *, child: bool = False) -> str:
    """The path of the innermost open container (or, with ``child``, of its child at ``key``)."""
    path = root
    steps = [(stack[i - 1].is_dict, stack[i].key) for i in range(1, len(stack))]
    if child and stack:
        steps.append((stack[-1].is_dict, key))
    for in_dict, step in steps:
        path = _key_path(path, step) if in_dict else f"{path}[{step}]"  # type: ignore[arg-type]
    return path


def _full_snapshot(value: object, dict_type: type[dict[str, Any]], list_type: type[list[Any]],
                   root: str) -> Any:
    if _check_scalar(value, root) is not _CONTAINER:
        return value
    # Build bottom-up: each frame collects its children, then becomes an immutable/plain container.
    stack: list[_Frame] = []
    active: set[int] = set()

    def open_frame(container: object, key: object) -> None:
        if id(container) in active:
            raise LosslessJsonError(_path(root, stack, key, child=True), "cycle: a container contains itself")
        active.add(id(container))
        if isinstance(container, dict):
            stack.append(_Frame(container, key, iter(list(dict.items(container))), True))
        else:
            elements: list[Any] = list(list.__iter__(container))  # type: ignore[arg-type]
            stack.append(_Frame(container, key, enumerate(elements), False))

    open_frame(value, None)
    result: Any = None
    while stack:
        frame = stack[-1]
        is_dict = frame.is_dict
        collected = frame.collected
        advanced = False
        for key, child in frame.children:
            if is_dict:
                if type(key) is not str:
                    raise LosslessJsonError(_path(root, stack),
                                            f"object key {_describe_key(key)} is not a string")
                index = lone_surrogate(key)
                if index >= 0:
                    raise LosslessJsonError(_path(root, stack),
                                            f"object key {key!r}: {_surrogate_reason(key, index)}")
            try:
                kind = _check_scalar(child, root)
            except LosslessJsonError as exc:
                raise LosslessJsonError(_path(root, stack, key, child=True), exc.reason) from None
            if kind is _CONTAINER:
                collected.append((key, None))
                open_frame(child, key)
                advanced = True
                break
            collected.append((key, child))
        if advanced:
            continue
        stack.pop()
        active.discard(id(frame.container))
        if dict_type is dict:
            built: Any = dict(collected) if is_dict else [v for _, v in collected]
        else:
            built = (_make_frozen_dict(dict(collected)) if is_dict
                     else _make_frozen_list(v for _, v in collected))
        if not stack:
            result = built
            break
        parent_collected = stack[-1].collected
        parent_collected[-1] = (parent_collected[-1][0], built)
    return result


def is_lossless(value: object) -> bool:
    """True when ``value`` is in the lossless JSON domain (never raises)."""
    try:
        snapshot(value)
    except LosslessJsonError:
        return False
    except Exception:
        return False
    return True


def thaw(value: Any) -> Any:
    """Return a mutable deep copy of a (frozen) lossless value."""
    return snapshot(value, freeze=False)


def _iterative_dumps(value: Any, sort_keys: bool) -> str:
    parts: list[str] = []
    encode = json.JSONEncoder(ensure_ascii=False, allow_nan=False).encode
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, _Raw):
            parts.append(item.text)
        elif isinstance(item, dict):
            keys = sorted(item) if sort_keys else list(item)
            pending: list[Any] = [_Raw("{")]
            for i, key in enumerate(keys):
                pending.append(_Raw(("," if i else "") + encode(key) + ":"))
                pending.append(item[key])
            pending.append(_Raw("}"))
            stack.extend(reversed(pending))
        elif isinstance(item, list):
            pending = [_Raw("[")]
            for i, element in enumerate(item):
                if i:
                    pending.append(_Raw(","))
                pending.append(element)
            pending.append(_Raw("]"))
            stack.extend(reversed(pending))
        else:
            parts.append(encode(item))
    return "".join(parts)


class _Raw:
    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))
_SORTED_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"),
                                   sort_keys=True)


def dumps(value: Any, *, sort_keys: bool = False, validate: bool = True) -> str:
    """Encode a lossless value as compact JSON text (UTF-8 characters kept, no NaN, no depth limit)."""
    if validate:
        snapshot(value)
    try:
        return (_SORTED_ENCODER if sort_keys else _ENCODER).encode(value)
    except RecursionError:
        return _iterative_dumps(value, sort_keys)


def canonical_dumps(value: Any) -> str:
    """Key-sorted compact JSON: equal values give equal text whatever their key order."""
    return dumps(value, sort_keys=True)


def encoded_size(value: Any) -> int:
    """Size in bytes of the compact UTF-8 JSON encoding of a lossless value."""
    return len(dumps(value, validate=False).encode("utf-8", "surrogatepass"))


def _reject_constant(name: str) -> NoReturn:
    raise LosslessJsonError("json", f"{name} is not a lossless JSON number")


def _parse_float(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise LosslessJsonError("json", f"number {text} overflows a float")
    if number == 0.0 and math.copysign(1.0, number) < 0:
        raise LosslessJsonError("json", "negative zero (-0.0) has no lossless JSON form")
    return number


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise LosslessJsonError("json", f"duplicate object key {key!r}")
            seen.add(key)
    return result


_DECODER = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_parse_float,
                            object_pairs_hook=_pairs)


def loads(text: str | bytes, *, max_bytes: int | None = None) -> Any:
    """Strictly decode JSON text into a lossless value.

    Rejects (with :class:`LosslessJsonError`): text over ``max_bytes``, invalid UTF-8 or JSON, NaN and
    infinities, ``-0.0``, floats that overflow, duplicate keys, integers too wide to print, lone
    surrogates (raw, or as a ``\\ud800`` escape that no low surrogate follows), and nesting deeper than
    the interpreter's recursion limit allows.
    """
    size = len(text) if isinstance(text, bytes) else None
    if max_bytes is not None:
        if size is None:
            size = len(text.encode("utf-8", "surrogatepass"))  # type: ignore[union-attr]
        if size > max_bytes:
            raise LosslessJsonError("json", f"text of {size} bytes exceeds the {max_bytes}-byte limit")
    try:
        decoded = text.decode("utf-8") if isinstance(text, bytes) else text
        if not isinstance(text, bytes):
            index = lone_surrogate(decoded)
            if index >= 0:
                raise LosslessJsonError("json", _surrogate_reason(decoded, index))
        value = _DECODER.decode(decoded)
    except LosslessJsonError:
        raise
    except RecursionError:
        raise LosslessJsonError("json", "nested too deeply") from None
    except UnicodeDecodeError as exc:
        raise LosslessJsonError("json", f"invalid UTF-8: {exc.reason}") from None
    except ValueError as exc:  # JSONDecodeError and int-digit limits
        raise LosslessJsonError("json", f"invalid JSON: {exc}") from None
    if _SURROGATE_ESCAPE.search(decoded) is not None:
        _refuse_decoded_surrogates(value)
    return value


def _refuse_decoded_surrogates(value: Any) -> None:
    """Raise if a decoded value holds a lone surrogate (only text with a surrogate escape can)."""
    stack: list[tuple[Any, str]] = [(value, "json")]
    while stack:
        item, path = stack.pop()
        if type(item) is str:
            index = lone_surrogate(item)
            if index >= 0:
                raise LosslessJsonError(path, _surrogate_reason(item, index))
        elif type(item) is dict:
            for key, child in item.items():
                index = lone_surrogate(key)
                if index >= 0:
                    raise LosslessJsonError(path, f"object key {key!r}: {_surrogate_reason(key, index)}")
                stack.append((child, _key_path(path, key)))
        elif type(item) is list:
            stack.extend((child, f"{path}[{i}]") for i, child in enumerate(item))
