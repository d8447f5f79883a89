"""Lossless JSON: the one value domain that crosses every boundary of codemode.

A value is *lossless JSON* when encoding it as JSON text and decoding it again yields an equal value of
the same types. In Python that is: ``None``, ``bool``, ``int`` (exact, any size up to
:data:`MAX_INT_BITS`), finite ``float`` other than ``-0.0``, ``str``, ``list`` of lossless values and
``dict`` with ``str`` keys and lossless values. Tuples, sets, bytes, NaN, infinities, ``-0.0``,
non-string keys, cycles and arbitrary objects are rejected, never silently converted.

Tool arguments, tool values, event data and every value that crosses the sandbox protocol live in this
domain. The module is a leaf: it imports nothing from codemode, so both the runtime and the sandbox can
use it without depending on each other.

Walks are iterative (no recursion limit) and read every container exactly once, so a snapshot is a
consistent deep copy even of a value whose container subclass misbehaves.
"""

from __future__ import annotations

import json
import math
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
    "is_lossless",
    "is_plain",
    "loads",
    "snapshot",
    "thaw",
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


def _key_path(path: str, key: str) -> str:
    return f"{path}.{key}" if key.isidentifier() else f"{path}[{json.dumps(key, ensure_ascii=False)}]"


def _check_scalar(value: object, path: str) -> object:
    """Return the value if it is a lossless scalar, raise otherwise; containers return a sentinel."""
    kind = type(value)
    if value is None or kind is bool or kind is str:
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
    raise LosslessJsonError(path, f"{kind.__name__} is not a JSON value")


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
    if kind is str or kind is bool or value is None:
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
            if type(key) is not str:
                raise _Unusual
            # Scalars dominate JSON values: skip the call for strings, booleans, null and small ints.
            kind = type(item)
            if kind is str or kind is bool or item is None or (kind is int and -_FAST_INT < item < _FAST_INT):
                out[key] = item
            else:
                out[key] = _fast_copy(item, depth + 1, dict_type, list_type)
        return out if dict_type is dict else _make_frozen_dict(out)
    if kind is list or kind is FrozenList:
        if kind is FrozenList and list_type is FrozenList:
            return value
        items = [item if (type(item) is str or item is None or type(item) is bool
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
    if kind is str or kind is bool or value is None:
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
        return all(type(key) is str and (type(item) is str or _plain_walk(item, depth + 1))
                   for key, item in dict.items(value))
    if kind is list:
        return all(type(item) is str or _plain_walk(item, depth + 1) for item in list.__iter__(value))
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


def _full_snapshot(value: object, dict_type: type[dict[str, Any]], list_type: type[list[Any]],
                   root: str) -> Any:
    if _check_scalar(value, root) is not _CONTAINER:
        return value
    # Build bottom-up: each frame collects its children, then becomes an immutable/plain container.
    stack: list[tuple[object, str, Iterator[tuple[Any, Any]], list[Any], bool]] = []
    active: set[int] = set()

    def open_frame(container: object, path: str) -> None:
        if id(container) in active:
            raise LosslessJsonError(path, "cycle: a container contains itself")
        active.add(id(container))
        if isinstance(container, dict):
            items = list(dict.items(container))
            stack.append((container, path, iter(items), [], True))
        else:
            elements: list[Any] = list(list.__iter__(container))  # type: ignore[arg-type]
            stack.append((container, path, enumerate(elements), [], False))

    open_frame(value, root)
    result: Any = None
    while stack:
        container, path, children, collected, is_dict = stack[-1]
        advanced = False
        for key, child in children:
            if is_dict:
                if type(key) is not str:
                    raise LosslessJsonError(path, f"object key {key!r} is not a string")
                child_path = _key_path(path, key)
            else:
                child_path = f"{path}[{key}]"
            if _check_scalar(child, child_path) is _CONTAINER:
                collected.append((key, None))
                open_frame(child, child_path)
                advanced = True
                break
            collected.append((key, child))
        if advanced:
            continue
        stack.pop()
        active.discard(id(container))
        if dict_type is dict:
            built: Any = dict(collected) if is_dict else [v for _, v in collected]
        else:
            built = (_make_frozen_dict(dict(collected)) if is_dict
                     else _make_frozen_list(v for _, v in collected))
        if not stack:
            result = built
            break
        parent_collected = stack[-1][3]
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
    infinities, ``-0.0``, floats that overflow, duplicate keys, integers too wide to print, and nesting
    deeper than the interpreter's recursion limit allows.
    """
    size = len(text) if isinstance(text, bytes) else None
    if max_bytes is not None:
        if size is None:
            size = len(text.encode("utf-8", "surrogatepass"))  # type: ignore[union-attr]
        if size > max_bytes:
            raise LosslessJsonError("json", f"text of {size} bytes exceeds the {max_bytes}-byte limit")
    try:
        decoded = text.decode("utf-8") if isinstance(text, bytes) else text
        return _DECODER.decode(decoded)
    except LosslessJsonError:
        raise
    except RecursionError:
        raise LosslessJsonError("json", "nested too deeply") from None
    except UnicodeDecodeError as exc:
        raise LosslessJsonError("json", f"invalid UTF-8: {exc.reason}") from None
    except ValueError as exc:  # JSONDecodeError and int-digit limits
        raise LosslessJsonError("json", f"invalid JSON: {exc}") from None
