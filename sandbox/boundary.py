"""Values a program hands out (its result, tool arguments) follow ``json.dumps``, or fail with a fix.

A program's result and the arguments of its tool calls leave the program as lossless JSON
(:mod:`codemode.sandbox.lossless`). A model writes Python, not JSON, so before the lossless check a
value is converted exactly as ``json.dumps`` would write it (so ``json.loads(json.dumps(v))`` and the
value that arrives are equal):

* a tuple (a namedtuple included) becomes a list, and a ``list``/``dict`` subclass the plain container;
* ``int``/``float``/``str`` subclasses (``IntEnum`` and ``StrEnum`` members) become the plain value;
* a dict key that is ``int``, ``float``, ``bool`` or ``None`` becomes the text ``json.dumps`` writes for
  it (``1`` -> ``"1"``, ``True`` -> ``"true"``, ``None`` -> ``"null"``); two keys that would become the
  same text are an error, not a silent overwrite.

Anything else ``json.dumps`` refuses is refused here too, with the path of the value and the usual fix
(``sorted(...)`` for a set, ``.isoformat()`` for a date, ``.decode()`` for bytes ...). NaN, infinities,
``-0.0`` and lone surrogates stay refused by the lossless check (they would not come back equal).

The walk is iterative (a deeply nested value cannot exhaust the stack) and a value that is already
plain JSON (the common case) is returned as it is, without a copy.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import fractions
import math
from collections.abc import Iterator
from typing import Any

from .lossless import LosslessJsonError, escape_lone_surrogates, is_plain

__all__ = ("json_ready",)

def _hint(value: object) -> str:
    """What a value ``json.dumps`` refuses is, and how to turn it into one it accepts."""
    kind = _kind(value)
    if isinstance(value, (set, frozenset)):
        return f"{kind} is not a JSON value; use sorted(...) or list(...)"
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return f"{kind} is not a JSON value; use .isoformat()"
    if isinstance(value, datetime.timedelta):
        return f"{kind} is not a JSON value; use .total_seconds()"
    if isinstance(value, (bytes, bytearray)):
        return f"{kind} is not a JSON value; use .decode() for text or base64.b64encode(...).decode()"
    if isinstance(value, (decimal.Decimal, fractions.Fraction)):
        return f"{kind} is not a JSON value; use str(...) or float(...)"
    if isinstance(value, complex):
        return f"{kind} is not a JSON value; use [z.real, z.imag]"
    if isinstance(value, enum.Enum):
        return f"{kind} is not a JSON value; use .value or .name"
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return f"{kind} is not a JSON value; use dataclasses.asdict(...)"
    return (f"{kind} is not a JSON value; convert it to a dict, list, str, int, float, bool or None "
            "(for example a dict of its fields)")


def _key_text(key: object) -> str | None:
    """The text ``json.dumps`` writes for a dict key, or ``None`` when it refuses the key."""
    if isinstance(key, str):
        return str.__str__(key)
    if key is True:
        return "true"
    if key is False:
        return "false"
    if key is None:
        return "null"
    if isinstance(key, int):
        try:
            return int.__repr__(key)
        except ValueError:  # (wider than the interpreter's int-to-text limit)
            return None
    if isinstance(key, float):  # (math's tests read the C double: no method of a subclass runs)
        if math.isnan(key):
            return "NaN"
        if math.isinf(key):
            return "Infinity" if math.copysign(1.0, key) > 0 else "-Infinity"
        return float.__repr__(key)
    return None


def _kind(value: object) -> str:
    """The type name of a value, as an exact copy (a program class may be named by a str subclass)."""
    return str.__str__(type(value).__name__)


def _step(path: str, key: object, in_dict: bool) -> str:
    if not in_dict:
        return f"{path}[{key}]"
    text = str(key)
    if text.isidentifier():
        return f"{path}.{text}"
    return f"{path}[{escape_lone_surrogates(repr(text))}]"


class _Open:
    """One container of the walk: what was built so far and the children still to visit.

    Its path is rebuilt from the parents only when an error needs it (a 20,000-deep value would cost
    the square of its depth in path text otherwise).
    """

    __slots__ = ("built", "children", "ident", "in_dict", "key", "parent", "root")

    def __init__(self, source: object, parent: _Open | None, key: object, root: str, built: Any,
                 children: Iterator[tuple[Any, Any]], in_dict: bool) -> None:
        self.ident = id(source)
        self.parent = parent
        self.key = key
        self.root = root
        self.built: Any = built
        self.children = children
        self.in_dict = in_dict

    @property
    def path(self) -> str:
        steps: list[tuple[object, bool]] = []
        frame: _Open | None = self
        while frame is not None and frame.parent is not None:
            steps.append((frame.key, frame.parent.in_dict))
            frame = frame.parent
        path = self.root
        for key, in_dict in reversed(steps):
            path = _step(path, key, in_dict)
        return path


def _scalar(value: object) -> tuple[bool, object]:
    """``(True, plain)`` for a scalar (subclasses made plain), ``(False, value)`` for anything else."""
    if value is None or value is True or value is False:
        return True, value
    kind = type(value)
    if kind is str or kind is int or kind is float:
        return True, value
    if isinstance(value, str):
        return True, str.__str__(value)
    if isinstance(value, int):
        return True, int(value)
    if isinstance(value, float):
        return True, float(value)
    return False, value


def json_ready(value: object, root: str = "value") -> Any:
    """``value`` as ``json.dumps`` would write it (tuples as lists, keys as text), or a LosslessJsonError.

    The error names the path of the offending value and says how to fix it. The result still has to
    pass the lossless check (:func:`codemode.sandbox.lossless.snapshot`), which refuses NaN,
    infinities, ``-0.0`` and lone surrogates.
    """
    if is_plain(value):
        return value
    done, plain = _scalar(value)
    if done:
        return plain
    stack: list[_Open] = []
    active: set[int] = set()
    result: Any = None

    def open_container(container: object, parent: _Open | None, key: object) -> None:
        def where() -> str:
            return root if parent is None else _step(parent.path, key, parent.in_dict)

        if id(container) in active:
            raise LosslessJsonError(where(), "cycle: a container contains itself")
        if isinstance(container, dict):
            frame = _Open(container, parent, key, root, {}, iter(list(dict.items(container))), True)
        elif isinstance(container, list):  # (the C iterators: a subclass's __iter__ is not called)
            frame = _Open(container, parent, key, root, [], enumerate(list(list.__iter__(container))), False)
        elif isinstance(container, tuple):
            frame = _Open(container, parent, key, root, [], enumerate(list(tuple.__iter__(container))), False)
        else:
            raise LosslessJsonError(where(), _hint(container))
        active.add(frame.ident)
        stack.append(frame)

    open_container(value, None, None)
    while stack:
        frame = stack[-1]
        descended = False
        for key, child in frame.children:
            if frame.in_dict:
                text = _key_text(key)
                if text is None:
                    # (described by its type: a key's __repr__ is program code, and the program has ended)
                    if isinstance(key, int):
                        raise LosslessJsonError(frame.path, "an int dict key too wide to write as text cannot"
                                                            " be a JSON object key; use a str key")
                    raise LosslessJsonError(frame.path, f"a dict key of type {_kind(key)!r} cannot be a JSON "
                                                        "object key; use str(key) or a str, int, float, bool "
                                                        "or None key")
                if text in frame.built:
                    raise LosslessJsonError(frame.path, f"two dict keys become the JSON key {text!r} (one of "
                                                        f"them a {_kind(key)}); keep one of them")
                slot: Any = text
            else:
                slot = key
            done, plain = _scalar(child)
            if done:
                _put(frame, slot, plain)
                continue
            _put(frame, slot, None)
            open_container(child, frame, slot)
            descended = True
            break
        if descended:
            continue
        stack.pop()
        active.discard(frame.ident)
        if not stack:
            result = frame.built
            break
        parent = stack[-1]
        if parent.in_dict:
            parent.built[next(reversed(parent.built))] = frame.built
        else:
            parent.built[-1] = frame.built
    return result


def _put(frame: _Open, slot: Any, item: object) -> None:
    if frame.in_dict:
        frame.built[slot] = item
    else:
        frame.built.append(item)
