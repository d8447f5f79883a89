"""The enforced JSON Schema subset: a total checker for schemas and a total validator for values.

Subset (spec 1.4): constraint keywords ``type`` (one of object/array/string/number/integer/boolean/null),
``oneOf``, ``properties``, ``required``, ``additionalProperties`` (boolean), ``items`` (one schema),
``enum``, ``const``; annotations ``description``/``title`` (strings) and ``default``/``examples`` (any
lossless JSON). A node with neither ``type`` nor ``oneOf`` is annotation-only: any lossless JSON value.

Both walks are iterative (explicit stacks, no recursion limit), total (they return violations and never
raise, whatever they are given) and collect every violation, each qualified by its path (``.key``,
``[i]``). Booleans are never numbers: ``True`` does not match ``1`` in ``enum``/``const``, nor satisfy
``number``/``integer``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Final

from codemode.sandbox.lossless import dumps, is_lossless

from .errors import JsonSchemaError

__all__ = (
    "SCALAR_TYPES",
    "SCHEMA_TYPES",
    "check_schema",
    "ensure_supported_schema",
    "json_equal",
    "validate_value",
)

SCHEMA_TYPES: Final = ("object", "array", "string", "number", "integer", "boolean", "null")
SCALAR_TYPES: Final = frozenset({"string", "number", "integer", "boolean", "null"})
_CONSTRAINTS: Final = frozenset({"type", "oneOf", "properties", "required", "additionalProperties",
                                 "items", "enum", "const"})
_ANNOTATIONS: Final = frozenset({"description", "title", "default", "examples"})
_STRUCTURAL: Final = ("properties", "required", "additionalProperties", "items", "enum", "const")
_OBJECT_ONLY: Final = frozenset({"properties", "required", "additionalProperties"})
_UNSUPPORTED: Final = ("is not a supported keyword (subset: type/oneOf/properties/required/"
                       "additionalProperties/items/enum/const + annotations)")


class _Path:
    """A lazily rendered path (``schema.items.oneOf[1]``): rendering only happens for violations, so deep
    walks stay linear instead of copying ever-longer strings at every node."""

    __slots__ = ("_parent", "_segment")

    def __init__(self, segment: str, parent: _Path | None = None) -> None:
        self._segment = segment
        self._parent = parent

    def key(self, name: str) -> _Path:
        return _Path("." + name, self)

    def index(self, position: int) -> _Path:
        return _Path(f"[{position}]", self)

    def __str__(self) -> str:
        segments: list[str] = []
        node: _Path | None = self
        while node is not None:
            segments.append(node._segment)
            node = node._parent
        text = ""
        for segment in reversed(segments):
            text += segment[1:] if not text and segment.startswith(".") else segment
        return text


# ---------------------------------------------------------------------------------------------- checker


def check_schema(schema: object, root: str = "schema") -> list[str]:
    """Every way ``schema`` leaves the supported subset, path-qualified; empty when it is inside it."""
    violations: list[str] = []
    # Frames: ("enter", node, path) or ("leave", node, path); ancestors tracks the current path's nodes.
    stack: list[tuple[bool, object, _Path]] = [(True, schema, _Path(root))]
    ancestors: set[int] = set()
    while stack:
        entering, node, path = stack.pop()
        if not entering:
            ancestors.discard(id(node))
            continue
        try:
            children = _check_node(node, path, violations, ancestors)
        except Exception as exc:  # hostile mappings: contain and report at this node
            violations.append(f"{path} could not be inspected ({type(exc).__name__})")
            continue
        if children is None:
            continue
        ancestors.add(id(node))
        stack.append((False, node, path))
        stack.extend((True, child, child_path) for child, child_path in reversed(children))
    return violations


def _check_node(node: object, path: _Path, out: list[str],
                ancestors: set[int]) -> list[tuple[object, _Path]] | None:
    if not isinstance(node, dict) or not all(type(key) is str for key in node):
        out.append(f"{path} must be a schema object")
        return None
    if id(node) in ancestors:
        out.append(f"{path} is circular")
        return None
    keys = list(node)
    for key in keys:
        if key not in _CONSTRAINTS and key not in _ANNOTATIONS:
            out.append(f"{path}.{key} {_UNSUPPORTED}")
    for key in ("description", "title"):
        if key in node and not isinstance(node[key], str):
            out.append(f"{path}.{key} must be a string")
    for key in ("default", "examples"):
        if key in node and not is_lossless(node[key]):
            out.append(f"{path}.{key} must be lossless JSON")
    children: list[tuple[object, _Path]] = []
    has_type, has_one_of = "type" in node, "oneOf" in node
    if has_type and has_one_of:
        out.append(f"{path} cannot declare both type and oneOf")
        return children
    if not has_type and not has_one_of:
        out.extend(f"{path}.{key} requires type or oneOf" for key in _STRUCTURAL if key in node)
        return children
    if has_one_of:
        out.extend(f"{path}.{key} is not supported beside oneOf" for key in _STRUCTURAL if key in node)
        branches = node["oneOf"]
        if not isinstance(branches, list) or len(branches) < 2:
            out.append(f"{path}.oneOf must be an array of at least two schemas")
            return children
        one_of = path.key("oneOf")
        children.extend((branch, one_of.index(i)) for i, branch in enumerate(branches))
        return children
    kind = node["type"]
    if not isinstance(kind, str) or kind not in SCHEMA_TYPES:
        out.append(f"{path}.type must be one of {'/'.join(SCHEMA_TYPES)} (a single string)")
        return children
    for key in _STRUCTURAL:
        if key not in node:
            continue
        allowed = (kind == "object" and key in _OBJECT_ONLY) or (kind == "array" and key == "items") or (
            kind in SCALAR_TYPES and key in ("enum", "const"))
        if not allowed:
            out.append(f'{path}.{key} is not supported on type "{kind}"')
    if kind == "object":
        properties = node.get("properties", {})
        if "properties" in node:
            if not isinstance(properties, dict) or not all(type(k) is str for k in properties):
                out.append(f"{path}.properties must be an object of schemas")
                properties = {}
            else:
                props = path.key("properties")
                children.extend((sub, props.key(name)) for name, sub in properties.items())
        if "additionalProperties" in node and type(node["additionalProperties"]) is not bool:
            out.append(f"{path}.additionalProperties must be a boolean")
        if "required" in node:
            required = node["required"]
            if not isinstance(required, list) or not all(type(k) is str for k in required):
                out.append(f"{path}.required must be an array of strings")
            else:
                out.extend(f'{path}.required names "{k}" which is not in properties'
                           for k in required if k not in properties)
    elif kind == "array" and "items" in node:
        children.append((node["items"], path.key("items")))
    elif kind in SCALAR_TYPES:
        _check_enum_const(node, kind, path, out)
    return children


def _check_enum_const(node: dict[str, Any], kind: str, path: _Path, out: list[str]) -> None:
    matches = _SCALAR_CHECKS[kind]
    enum_ok = True
    if "enum" in node:
        values = node["enum"]
        if not isinstance(values, list) or not values:
            out.append(f"{path}.enum must be a non-empty array")
            enum_ok = False
        else:
            for i, item in enumerate(values):
                if matches(item) is not None:
                    out.append(f'{path}.enum[{i}] does not match type "{kind}"')
                    enum_ok = False
    if "const" in node:
        const = node["const"]
        if matches(const) is not None:
            out.append(f'{path}.const does not match type "{kind}"')
        elif "enum" in node and enum_ok and not any(json_equal(const, item) for item in node["enum"]):
            out.append(f"{path}.const must be a member of enum")


def ensure_supported_schema(schema: object, root: str = "schema") -> None:
    """Raise :class:`~codemode.runtime.errors.JsonSchemaError` listing every violation, if there are any."""
    violations = check_schema(schema, root)
    if violations:
        raise JsonSchemaError(violations)


# ------------------------------------------------------------------------------------------- validator


def _is_number(value: object) -> bool:
    kind = type(value)
    return kind is int or kind is float


def _negative_zero(value: float) -> bool:
    return value == 0 and math.copysign(1.0, value) < 0


def _string(value: object) -> str | None:
    return None if isinstance(value, str) else "must be a string"


def _number(value: object) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "must be a number"
    if isinstance(value, float) and (not math.isfinite(value) or _negative_zero(value)):
        return "must be a finite JSON number"
    return None


def _integer(value: object) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "must be an integer"
    if isinstance(value, float) and (not value.is_integer() or _negative_zero(value)):
        return "must be an integer"
    return None


def _boolean(value: object) -> str | None:
    return None if isinstance(value, bool) else "must be a boolean"


def _null(value: object) -> str | None:
    return None if value is None else "must be null"


_SCALAR_CHECKS: Final[dict[str, Callable[[object], str | None]]] = {
    "string": _string, "number": _number, "integer": _integer, "boolean": _boolean, "null": _null,
}


def json_equal(left: object, right: object) -> bool:
    """JSON equality for ``enum``/``const``: ``1 == 1.0``, but a bool never equals a number."""
    if isinstance(left, bool) or isinstance(right, bool):
        return type(left) is type(right) and left == right
    if _is_number(left) and _is_number(right):
        return left == right
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(json_equal(a, b) for a, b in zip(left, right, strict=True))
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(json_equal(left[k], right[k]) for k in left)
    return type(left) is type(right) and left == right


def _label(path: _Path) -> str:
    return str(path) or "arguments"


#: A violation kept unrendered (prefix, path, suffix) until the walk ends: messages inside oneOf branches
#: are only counted, never rendered, which keeps deep oneOf chains linear.
_Violation = tuple[str, _Path, str]


def _quoted(path: _Path, rest: str) -> _Violation:
    return ('"', path, '"' + rest)


class _Node:
    """A pending validation of ``value`` against ``schema`` whose violations go to ``sink``."""

    __slots__ = ("path", "schema", "sink", "value")

    def __init__(self, schema: Any, value: Any, path: _Path, sink: list[_Violation]) -> None:
        self.schema = schema
        self.value = value
        self.path = path
        self.sink = sink


class _Finish:
    """Runs after a node's children: the lossless check of unvisited parts, or the oneOf count."""

    __slots__ = ("branches", "mark", "node", "unvisited")

    def __init__(self, node: _Node, mark: int, unvisited: list[Any] | None,
                 branches: list[list[_Violation]] | None) -> None:
        self.node = node
        self.mark = mark
        self.unvisited = unvisited
        self.branches = branches


def validate_value(schema: Any, value: Any, root: str = "value") -> list[str]:
    """Validate ``value`` against a schema of the subset; returns ordered, path-qualified violations.

    ``root`` labels the value: ``"value"`` gives ``"value.key" must be ...``; the empty label (used for
    tool arguments) gives ``"key" must be ...`` and ``"arguments"`` for a fault of the root itself.
    ``schema`` must already pass :func:`check_schema`; unknown keywords are ignored. Never raises.
    """
    violations: list[_Violation] = []
    stack: list[_Node | _Finish] = [_Node(schema, value, _Path(root), violations)]
    while stack:
        item = stack.pop()
        if isinstance(item, _Finish):
            _finish(item)
            continue
        try:
            _visit(item, stack)
        except Exception:  # a hostile value (raising __eq__, __iter__ ...) is reported, never raised
            item.sink.append(_quoted(item.path, ' must be a lossless JSON value'))
    return [prefix + _label(path) + suffix for prefix, path, suffix in violations]


def _visit(node: _Node, stack: list[_Node | _Finish]) -> None:
    schema, value, path, sink = node.schema, node.value, node.path, node.sink
    if not isinstance(schema, dict):
        return
    if "oneOf" in schema and isinstance(schema["oneOf"], list):
        branches: list[list[_Violation]] = [[] for _ in schema["oneOf"]]
        stack.append(_Finish(node, len(sink), None, branches))
        for branch, branch_sink in zip(reversed(schema["oneOf"]), reversed(branches), strict=True):
            stack.append(_Node(branch, value, path, branch_sink))
        return
    kind = schema.get("type")
    if kind is None:
        if not is_lossless(value):
            sink.append(_quoted(path, ' must be a lossless JSON value'))
        return
    if kind == "object":
        _visit_object(node, stack)
        return
    if kind == "array":
        if not isinstance(value, list):
            sink.append(_quoted(path, ' must be an array'))
            return
        items = schema.get("items")
        if items is None:
            stack.append(_Finish(node, len(sink), list(value), None))
            return
        stack.append(_Finish(node, len(sink), [], None))
        for index in range(len(value) - 1, -1, -1):
            stack.append(_Node(items, value[index], path.index(index), sink))
        return
    check = _SCALAR_CHECKS.get(kind) if isinstance(kind, str) else None
    if check is None:
        return
    problem = check(value)
    if problem is not None:
        sink.append(_quoted(path, f' {problem}'))
        return
    if "enum" in schema and isinstance(schema["enum"], list) and not any(
            json_equal(value, item) for item in schema["enum"]):
        sink.append(_quoted(path, f' must be one of {_compact(schema["enum"])}'))
    if "const" in schema and not json_equal(value, schema["const"]):
        sink.append(_quoted(path, f' must be {_compact(schema["const"])}'))


def _visit_object(node: _Node, stack: list[_Node | _Finish]) -> None:
    schema, value, path, sink = node.schema, node.value, node.path, node.sink
    if not isinstance(value, dict):
        sink.append(_quoted(path, ' must be an object'))
        return
    properties = schema.get("properties")
    properties = properties if isinstance(properties, dict) else {}
    required = schema.get("required")
    for key in required if isinstance(required, list) else ():
        if key not in value:
            sink.append(("missing required property \"", path.key(str(key)), '"'))
    unvisited = [item for key, item in value.items() if key not in properties]
    if any(type(key) is not str for key in value):
        unvisited.append(_NOT_LOSSLESS)
    stack.append(_Finish(node, len(sink), unvisited, None))
    if schema.get("additionalProperties") is False:
        # Pushed before the children so that it runs after them (the stack is LIFO).
        extras = [key for key in value if key not in properties]
        stack.append(_Extras(path, extras, sink))
    children = [(key, sub) for key, sub in properties.items() if key in value]
    for key, sub in reversed(children):
        stack.append(_Node(sub, value[key], path.key(key), sink))


class _Extras(_Finish):
    """Reports keys outside ``properties`` of a closed object, after the declared children."""

    __slots__ = ("extras", "path", "sink")

    def __init__(self, path: _Path, extras: list[_Violation], sink: list[_Violation]) -> None:
        self.path = path
        self.extras = extras
        self.sink = sink


_NOT_LOSSLESS: Final = object()


def _finish(item: _Finish) -> None:
    if isinstance(item, _Extras):
        item.sink.extend(_quoted(item.path.key(str(key)), " is not a declared property "
                                                           "(additionalProperties: false)")
                         for key in item.extras)
        return
    node = item.node
    if item.branches is not None:
        matched = sum(1 for branch in item.branches if not branch)
        if matched != 1:
            node.sink.append(_quoted(node.path, f' must match exactly one oneOf branch (matched {matched})'))
        return
    if len(node.sink) != item.mark or not item.unvisited:
        return
    if any(part is _NOT_LOSSLESS or not is_lossless(part) for part in item.unvisited):
        text = "a lossless JSON object" if isinstance(node.value, dict) else "a dense lossless JSON array"
        node.sink.append(_quoted(node.path, f' must be {text}'))


def _compact(value: object) -> str:
    try:
        return dumps(value)
    except Exception:
        return repr(value)
