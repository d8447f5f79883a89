"""Fast paths for the hot dispatch path: freezing small plain values and checking them against schemas.

Both are *conservative accelerators*: :func:`freeze` is :func:`codemode.sandbox.lossless.snapshot`, whose own
fast path copies exact ``dict``/``list`` trees of plain scalars and hands anything else (subclasses, huge
ints, deep nesting, cycles, bad values) to the full walk, so its result and its errors are exactly the full
walk's. A compiled check answers True only when the value certainly has no violations; on False the caller
runs the full validator, which produces the messages. Correctness lives in the full walks; this module only
skips work.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Final

from codemode.sandbox.lossless import FrozenDict, FrozenList, is_plain, snapshot

from .schema import SCALAR_TYPES, json_equal, validate_value

__all__ = ("freeze", "validate_fast")

_MAX_DEPTH: Final = 24
_INT_LIMIT: Final = 1 << 1000


def freeze(value: Any, root: str = "value") -> Any:
    """``snapshot(value, freeze=True, root=root)`` (which copies plain values on its fast path)."""
    return snapshot(value, freeze=True, root=root)


Check = Callable[[Any], bool]
_CACHE: dict[int, tuple[Any, Check | None]] = {}


_plain = is_plain


def _scalar_check(kind: str) -> Check:
    if kind == "string":
        return lambda v: type(v) is str
    if kind == "boolean":
        return lambda v: type(v) is bool
    if kind == "null":
        return lambda v: v is None
    if kind == "integer":
        return lambda v: type(v) is int and -_INT_LIMIT < v < _INT_LIMIT
    return lambda v: (type(v) is int and -_INT_LIMIT < v < _INT_LIMIT) or (
        type(v) is float and math.isfinite(v) and (v != 0 or math.copysign(1.0, v) > 0))


def _compile(schema: Any, depth: int = 0) -> Check | None:
    if not isinstance(schema, dict) or "oneOf" in schema or depth > _MAX_DEPTH:
        return None
    kind = schema.get("type")
    if kind is None:
        return _plain
    if kind in SCALAR_TYPES:
        base = _scalar_check(kind)
        enum = schema.get("enum")
        has_const, const = "const" in schema, schema.get("const")
        if enum is None and not has_const:
            return base
        if enum is not None and not isinstance(enum, list):
            return None

        def scalar(v: Any) -> bool:
            if not base(v):
                return False
            if enum is not None and not any(json_equal(v, item) for item in enum):
                return False
            return not has_const or json_equal(v, const)

        return scalar
    if kind == "array":
        if "items" not in schema:
            return lambda v: (type(v) is list or type(v) is FrozenList) and _plain(v)
        items = _compile(schema["items"], depth + 1)
        if items is None:
            return None
        item_check = items
        return lambda v: (type(v) is list or type(v) is FrozenList) and all(item_check(x) for x in v)
    if kind == "object":
        properties = schema.get("properties", {})
        if not isinstance(properties, dict):
            return None
        compiled: dict[str, Check] = {}
        for name, sub in properties.items():
            check = _compile(sub, depth + 1)
            if check is None:
                return None
            compiled[name] = check
        required = tuple(schema.get("required", ()))
        closed = schema.get("additionalProperties") is False

        def obj(v: Any) -> bool:
            if type(v) is not dict and type(v) is not FrozenDict:
                return False
            for key in required:
                if key not in v:
                    return False
            for key, item in dict.items(v):
                check = compiled.get(key)
                if check is not None:
                    if not check(item):
                        return False
                elif closed or type(key) is not str or not _plain(item):
                    return False
            return True

        return obj
    return None


def validate_fast(schema: Any, value: Any, root: str = "value") -> list[str]:
    """Same result as :func:`codemode.runtime.schema.validate_value`, skipping the walk for values that
    pass."""
    entry = _CACHE.get(id(schema))
    if entry is None or entry[0] is not schema:
        try:
            check = _compile(schema)
        except Exception:
            check = None
        entry = (schema, check)
        if len(_CACHE) > 4096:
            _CACHE.clear()
        _CACHE[id(schema)] = entry
    check = entry[1]
    if check is not None:
        try:
            if check(value):
                return []
        except Exception:
            pass
    return validate_value(schema, value, root)
