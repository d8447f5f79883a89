"""JSON Schema as generators write it (pydantic's) -> the enforced subset (:mod:`codemode.runtime.schema`).

The subset has no ``$ref``, ``anyOf``, ``prefixItems``, constraint keywords or schema-valued
``additionalProperties``; pydantic emits all of them. The conversion keeps every type the subset can
state and loosens only what it cannot, node by node, never the whole schema:

* ``$ref`` is inlined from ``$defs``; a reference back into a definition being inlined (a recursive type)
  becomes an annotation-only node (any JSON value);
* ``anyOf`` (and a list-valued ``type``) becomes ``oneOf`` when its branches can never both match a value
  (different JSON types, different ``const``/``enum`` values, or object branches told apart by a required
  tag property); ``integer`` beside ``number`` merges into ``number``; overlapping branches the subset cannot
  tell apart loosen to any JSON value;
* constraint keywords (``minimum``, ``maxLength``, ``pattern``, ``format``, ...) are folded into the node's
  ``description`` as ``(minimum: 1, pattern: "^a")`` (the SDK's comment format), so the model still reads
  them; whoever converts the value (pydantic, for ``@tool``) enforces them;
* an object with declared properties and no ``additionalProperties`` is closed: pydantic leaves such a
  key out only when extra keys are ignored (``extra="allow"`` says ``true``, ``"forbid"`` says ``false``),
  and it serialises none, so a misspelt key fails loudly instead of vanishing;
* ``dict[str, X]`` (a schema-valued ``additionalProperties``) becomes an open object; tuples
  (``prefixItems``) an array whose ``items`` is kept only when every position has the same schema;
* ``title`` (pydantic derives one from every name) and keywords with no meaning for a value are dropped.

The walk is recursive and bounded by the schema that pydantic built (a finite tree plus ``$defs``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from codemode.sandbox.lossless import is_lossless

from .schema import check_schema

__all__ = ("to_subset",)

_FOLDED: Final = ("format", "pattern", "minLength", "maxLength", "minimum", "exclusiveMinimum", "maximum",
                  "exclusiveMaximum", "multipleOf", "minItems", "maxItems", "uniqueItems", "minProperties",
                  "maxProperties")
_SCALARS: Final = ("string", "number", "integer", "boolean", "null")
_JSON_TYPES: Final = {str: "string", bool: "boolean", int: "integer", float: "number", type(None): "null"}


def to_subset(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The subset form of ``schema`` (a root that may carry ``$defs``); see the module docstring."""
    definitions = schema.get("$defs", schema.get("definitions", {}))
    return _Converter(definitions if isinstance(definitions, Mapping) else {}).node(schema)


class _Converter:
    def __init__(self, definitions: Mapping[str, Any]) -> None:
        self._definitions = definitions
        self._inlining: list[str] = []

    def node(self, node: object) -> dict[str, Any]:
        if not isinstance(node, Mapping):
            return {}
        reference = node.get("$ref")
        if isinstance(reference, str):
            return self._reference(reference, node)
        every = node.get("allOf")
        if isinstance(every, list) and len(every) == 1 and isinstance(every[0], Mapping):
            merged = {**every[0], **{k: v for k, v in node.items() if k != "allOf"}}
            return self.node(merged)
        notes = _annotations(node)
        branches = node.get("anyOf", node.get("oneOf"))
        kind = node.get("type")
        if isinstance(branches, list):
            return self._union([self.node(branch) for branch in branches], notes)
        if isinstance(kind, list):
            return self._union([self.node({**node, "type": item}) for item in kind], notes)
        if kind is None:
            return self._untyped(node, notes)
        if kind == "object":
            return {"type": "object", **notes, **self._object(node)}
        if kind == "array":
            return {"type": "array", **notes, **self._array(node)}
        if kind in _SCALARS:
            return {"type": kind, **notes, **_enum_const(node, kind)}
        return notes  # an unknown type: any value

    def _reference(self, reference: str, node: Mapping[str, Any]) -> dict[str, Any]:
        name = reference.rsplit("/", 1)[-1]
        target = self._definitions.get(name) if reference.startswith(("#/$defs/", "#/definitions/")) else None
        siblings = {key: value for key, value in node.items() if key != "$ref"}
        if not isinstance(target, Mapping) or name in self._inlining:
            return _annotations({**(target if isinstance(target, Mapping) else {}), **siblings})
        self._inlining.append(name)
        try:
            return self.node({**target, **siblings})
        finally:
            self._inlining.pop()

    def _object(self, node: Mapping[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        properties = node.get("properties")
        if isinstance(properties, Mapping):
            out["properties"] = {str(key): self.node(value) for key, value in properties.items()}
            required = node.get("required")
            if isinstance(required, list):
                kept = [key for key in required if isinstance(key, str) and key in out["properties"]]
                if kept:
                    out["required"] = kept
        extra = node.get("additionalProperties")
        if isinstance(extra, bool):
            out["additionalProperties"] = extra
        elif isinstance(extra, Mapping):
            out["additionalProperties"] = True
        elif "properties" in out:
            out["additionalProperties"] = False
        return out

    def _array(self, node: Mapping[str, Any]) -> dict[str, Any]:
        items = node.get("items")
        if isinstance(items, Mapping):
            return {"items": self.node(items)}
        positions = node.get("prefixItems")
        if isinstance(positions, list) and positions:
            converted = [self.node(position) for position in positions]
            if all(item == converted[0] for item in converted):
                return {"items": converted[0]}
        return {}

    def _untyped(self, node: Mapping[str, Any], notes: dict[str, Any]) -> dict[str, Any]:
        """A node without ``type``: ``const``/``enum`` get the types of their values, anything else is any."""
        values = [node["const"]] if "const" in node else node.get("enum")
        if not isinstance(values, list) or not values or not all(type(v) in _JSON_TYPES for v in values):
            return notes
        by_type: dict[str, list[Any]] = {}
        for value in values:
            by_type.setdefault(_JSON_TYPES[type(value)], []).append(value)
        branches = [_scalar(kind, members) for kind, members in by_type.items()]
        if len(branches) == 1:
            return {**branches[0], **notes}
        return {"oneOf": branches, **notes}

    def _union(self, branches: list[dict[str, Any]], notes: dict[str, Any]) -> dict[str, Any]:
        flat: list[dict[str, Any]] = []
        for branch in branches:
            nested = branch.get("oneOf")
            pure = isinstance(nested, list) and set(branch) <= {"oneOf", "description"}
            members: list[Any] = nested if pure and isinstance(nested, list) else [branch]
            flat.extend(member for member in members if member not in flat)
        flat = _merge_numbers(flat)
        if not flat or any(not _typed(branch) for branch in flat):
            return notes  # a branch accepts any value (or a malformed empty union): any value
        if len(flat) == 1:
            return {**flat[0], **notes}
        if all(_disjoint(a, b) for i, a in enumerate(flat) for b in flat[i + 1:]):
            return {"oneOf": flat, **notes}
        return notes


def _annotations(node: Mapping[str, Any]) -> dict[str, Any]:
    """``description`` (with the constraints folded in), ``default`` and ``examples`` when lossless."""
    out: dict[str, Any] = {}
    description = node.get("description")
    text = description.strip() if isinstance(description, str) else ""
    folded = [f"{key}: {_shown(node[key])}" for key in _FOLDED if key in node]
    if folded:
        text = f"{text} ({', '.join(folded)})" if text else f"({', '.join(folded)})"
    if text:
        out["description"] = text
    for key in ("default", "examples"):
        if key in node and is_lossless(node[key]):
            out[key] = node[key]
    return out


def _shown(value: object) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError):
        return repr(value)


def _scalar(kind: str, values: list[Any]) -> dict[str, Any]:
    if kind == "null":
        return {"type": "null"}
    return {"type": kind, "const": values[0]} if len(values) == 1 else {"type": kind, "enum": values}


def _enum_const(node: Mapping[str, Any], kind: str) -> dict[str, Any]:
    """``enum``/``const`` of a scalar node, kept only while the subset accepts them (matching ``kind``,
    ``const`` inside ``enum``); a value set that cannot be stated is dropped, which loosens the node."""
    out = {key: node[key] for key in ("enum", "const") if key in node and is_lossless(node[key])}
    for drop in ("const", "enum"):
        if not out or not check_schema({"type": kind, **out}):
            break
        out.pop(drop, None)
    return out


def _typed(node: Mapping[str, Any]) -> bool:
    return "type" in node or "oneOf" in node


def _merge_numbers(branches: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``integer`` beside a plain ``number`` branch adds nothing (every integer is a number): drop it."""
    if not any(branch.get("type") == "number" and not _narrowed(branch) for branch in branches):
        return branches
    return [branch for branch in branches if not (branch.get("type") == "integer" and not _narrowed(branch))]


def _narrowed(node: Mapping[str, Any]) -> bool:
    return "enum" in node or "const" in node


def _kind(node: Mapping[str, Any]) -> str | None:
    kind = node.get("type")
    return "number" if kind == "integer" else kind if isinstance(kind, str) else None


def _values(node: Mapping[str, Any]) -> list[Any] | None:
    if "const" in node:
        return [node["const"]]
    enum = node.get("enum")
    return enum if isinstance(enum, list) else None


def _same(left: object, right: object) -> bool:
    if isinstance(left, bool) or isinstance(right, bool):
        return type(left) is type(right) and left == right
    return left == right


def _disjoint(left: Mapping[str, Any], right: Mapping[str, Any]) -> bool:
    """True when no JSON value can match both branches (so ``oneOf`` means the same as ``anyOf``)."""
    if not _typed(left) or not _typed(right):
        return False
    for one, other in ((left, right), (right, left)):
        if "oneOf" in one:
            return all(_disjoint(branch, other) for branch in one["oneOf"])
    if _kind(left) != _kind(right):
        return True
    left_values, right_values = _values(left), _values(right)
    if left_values is not None and right_values is not None:
        return not any(_same(a, b) for a in left_values for b in right_values)
    if _kind(left) == "object":
        return _objects_disjoint(left, right)
    return False


def _objects_disjoint(left: Mapping[str, Any], right: Mapping[str, Any]) -> bool:
    left_props, right_props = left.get("properties", {}), right.get("properties", {})
    left_required, right_required = set(left.get("required", ())), set(right.get("required", ()))
    for key in left_required & right_required:  # a tag both require, with different values
        if _disjoint(left_props.get(key, {}), right_props.get(key, {})):
            return True
    # closed, and the other requires a key it lacks
    return any(one.get("additionalProperties") is False and other_required - set(one.get("properties", {}))
               for one, other_required in ((left, right_required), (right, left_required)))
