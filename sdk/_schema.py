"""JSON Schema -> Python type text, with the ``TypedDict`` classes it needs (spec 8.2, 13.4).

The renderer is total: it never raises, whatever the schema holds (wrong types, cycles, hostile
mappings, 5,000-deep chains). Where a node cannot be expressed it degrades *that node only* to ``Any``,
never the whole argument type; keywords it cannot express but that only narrow a value (``minimum``,
``pattern``, ``format``, ``allOf``, ``not``, ...) are ignored by the type and the common ones are folded
into the field's comment line, so the model still sees them.

Rules, in order, for one node:

* not a mapping, deeper than :data:`MAX_LEVEL`, or its own ancestor -> ``Any``;
* ``type`` (one name or a list of names) -> the union of each type's rendering; an unknown or mistyped
  ``type`` is a broken node -> ``Any``; ``type`` wins over ``oneOf``/``anyOf``/``$ref`` beside it (those
  can only narrow it);
* otherwise ``oneOf``/``anyOf`` -> the union of the branches (branch k's class base is the node's base
  plus ``k``); a single-branch ``allOf`` -> that branch; a local ``$ref`` (``#/...``) -> its target;
  a scalar ``const``/``enum`` -> ``Literal[...]``; anything else -> ``Any``.

Unions are de-duplicated, absorb into ``Any`` when a member is ``Any``, and more than
:data:`MAX_UNION_MEMBERS` distinct members degrade to ``Any`` (long ``|`` chains break CPython's parser).
An array reached with :data:`MAX_LIST_BRACKETS` brackets already open renders as ``Any``.

The walk is recursive but bounded by :data:`MAX_LEVEL`; the two shapes that are legitimately deep,
chains of arrays and chains of nested ``oneOf``/``anyOf``, are walked by loops instead, so the list cap is
reachable and a 5,000-deep union chain renders in linear time. Shared sub-schemas (a DAG) are rendered
once and reused, so sharing never makes the walk exponential.
"""

from __future__ import annotations

import json
import math
import unicodedata
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import unquote

from codemode.sdk._text import (
    HARD_KEYWORDS,
    camel_case,
    cap_utf16,
    comment_text,
    is_bare_identifier,
    is_field_name,
    js_number,
    literal_value,
)

__all__ = (
    "MAX_LEVEL",
    "MAX_LIST_BRACKETS",
    "MAX_UNION_MEMBERS",
    "RESERVED_CLASS_NAMES",
    "ClassNamer",
    "RootType",
    "class_base",
    "field_comment",
    "python_type",
    "render_root",
)

MAX_LEVEL = 100
"""Schema nesting depth past which a node renders as ``Any`` (keeps the walk well inside the stack).

Chains of arrays are walked by a loop and do not count, so the list cap below is reachable."""

MAX_LIST_BRACKETS = 180
"""An array node reached with this many brackets open renders as ``Any`` (CPython allows 200)."""

MAX_UNION_MEMBERS = 64
"""A union with more distinct members than this renders as ``Any``."""

CLASS_BASE_UNITS = 120
"""Class-name bases are cut to this many UTF-16 code units."""

RESERVED_CLASS_NAMES: frozenset[str] = frozenset(
    {"Any", "Literal", "NotRequired", "Protocol", "ToolCallError", "Tools", "TypedDict", "Unpack", "overload"}
)
"""Module-level names of the declaration that no generated class may take."""

_ANY = "Any"
_DICT_ANY = "dict[str, Any]"
_SCALARS = {"string": "str", "number": "float", "integer": "int", "boolean": "bool"}
_TYPES = frozenset({*_SCALARS, "null", "array", "object"})
_FOLDED = (
    "format",
    "pattern",
    "minLength",
    "maxLength",
    "minimum",
    "exclusiveMinimum",
    "maximum",
    "exclusiveMaximum",
    "multipleOf",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minProperties",
    "maxProperties",
    "contentEncoding",
    "contentMediaType",
    "default",
    "deprecated",
)
_FOLDED_VALUE_CHARS = 80


class _Missing:
    """Marker for an absent keyword (``None`` is a legitimate JSON value)."""


_MISSING = _Missing()


def _fallback_base(text: str) -> str:
    kept = "".join(char for char in text if char != "_" and ("A" + char).isidentifier())
    candidate = unicodedata.normalize("NFKC", "Tool" + kept)
    candidate = cap_utf16(candidate, CLASS_BASE_UNITS)
    return candidate if _is_class_name(candidate) else "Tool"


def _is_class_name(name: str) -> bool:
    return (
        is_bare_identifier(name)
        and not name.startswith("_")
        and name not in HARD_KEYWORDS
        and name not in RESERVED_CLASS_NAMES
    )


def class_base(text: str) -> str:
    """A class-name base from raw text: NFKC, ``Tool``-prefixed unless it starts like an identifier, capped.

    The result is always an identifier this interpreter accepts, NFKC-stable, not a keyword, without a
    leading underscore and not one of :data:`RESERVED_CLASS_NAMES`.
    """
    base = unicodedata.normalize("NFKC", text)
    if not base or base[0] == "_" or not base[0].isidentifier():
        base = unicodedata.normalize("NFKC", "Tool" + base)
    base = cap_utf16(base, CLASS_BASE_UNITS)
    return base if _is_class_name(base) else _fallback_base(base)


class ClassNamer:
    """Allocates unique class names: ``Base``, then ``Base2``, ``Base3``... skipping taken names.

    Each base has its own counter, so allocation stays linear even when thousands of nodes share a base.
    """

    def __init__(self, taken: Iterable[str] = RESERVED_CLASS_NAMES) -> None:
        self._taken: set[str] = set(taken)
        self._next: dict[str, int] = {}

    def allocate(self, base: str) -> str:
        """Reserve and return the first free name for ``base``."""
        if base not in self._taken:
            self._taken.add(base)
            return base
        number = self._next.get(base, 2)
        while f"{base}{number}" in self._taken:
            number += 1
        self._next[base] = number + 1
        name = f"{base}{number}"
        self._taken.add(name)
        return name

    def copy(self) -> ClassNamer:
        """An independent namer with the same reservations (a scratch copy for one render)."""
        clone = ClassNamer(())
        clone._taken = set(self._taken)
        clone._next = dict(self._next)
        return clone

    def adopt(self, other: ClassNamer) -> None:
        """Take over ``other``'s reservations (commits a scratch copy after a render succeeded)."""
        self._taken = other._taken
        self._next = other._next


@dataclass(frozen=True, slots=True)
class RootType:
    """The rendering of one root schema (a tool's arguments or output)."""

    text: str
    """The Python type expression."""
    members: tuple[str, ...]
    """The union members of ``text`` (one member when it is not a union)."""
    classes: tuple[str, ...]
    """Class blocks this type needs, each a multi-line ``class ...(TypedDict):`` text, users last."""
    class_names: frozenset[str]
    """The names of those classes."""
    used: frozenset[str]
    """Which of ``Any``, ``Literal``, ``NotRequired``, ``TypedDict`` the text and classes use."""


def _matches(value: object, kind: str) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "null":
        return value is None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    if isinstance(value, float) and (
        not math.isfinite(value) or (value == 0 and math.copysign(1, value) < 0)
    ):
        return False
    return kind == "number" or isinstance(value, int) or value.is_integer()


def _union_branches(node: object) -> Sequence[object] | None:
    """The branches of an untyped ``oneOf``/``anyOf`` node (``[]`` if malformed), else None."""
    if not isinstance(node, Mapping) or "type" in node:
        return None
    for combinator in ("oneOf", "anyOf"):
        branches = node.get(combinator, _MISSING)
        if isinstance(branches, _Missing):
            continue
        return branches if isinstance(branches, list | tuple) else []
    return None


def _dedupe(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _folded_value(value: object) -> str | None:
    if isinstance(value, bool) or value is None:
        text = json.dumps(value)
    elif isinstance(value, int | float):
        if isinstance(value, float) and not math.isfinite(value):
            return None
        text = js_number(value)
    else:
        try:
            text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        except (TypeError, ValueError, RecursionError):
            return None
    if len(text) > _FOLDED_VALUE_CHARS:
        text = text[: _FOLDED_VALUE_CHARS - 1] + "…"
    return text


def field_comment(schema: object) -> str:
    """The comment for a field: its description, then folded constraints in parentheses ("" for none).

    ``{"description": "The port.", "minimum": 1, "maximum": 65535}`` -> ``The port. (minimum: 1,
    maximum: 65535)``. The result is one safe line (see :func:`codemode.sdk._text.comment_text`).
    """
    if not isinstance(schema, Mapping):
        return ""
    description = comment_text(schema.get("description"))
    folded: list[str] = []
    for key in _FOLDED:
        if key in schema:
            value = _folded_value(schema[key])
            if value is not None:
                folded.append(f"{key}: {value}")
    constraints = comment_text(", ".join(folded))
    if not constraints:
        return description
    return f"{description} ({constraints})" if description else f"({constraints})"


class _Renderer:
    """One root render. Its classes and names are committed by the caller only if it finishes."""

    def __init__(self, root: object, namer: ClassNamer | None, checker: bool = False) -> None:
        self._root = root
        self._namer = namer
        # PEP 586 has no float literals: a checker gets ``float`` where a reader gets ``Literal[1.5]``.
        self._checker = checker
        self.classes: list[str] = []
        self.class_names: set[str] = set()
        self.used: set[str] = set()
        # id -> node; holding the node keeps its id from being reused while we rely on it.
        self._active: dict[int, object] = {}
        self._memo: dict[tuple[int, int], tuple[object, list[str]]] = {}

    # -- entry points -------------------------------------------------------------------------------

    def text(self, node: object, base: str, brackets: int, level: int) -> str:
        """The type expression for ``node``."""
        return self._join(self.members(node, base, brackets, level))

    def members(self, node: object, base: str, brackets: int, level: int) -> list[str]:
        """The distinct union members for ``node`` (``["Any"]`` absorbs everything)."""
        if level > MAX_LEVEL or not isinstance(node, Mapping):
            return self._any()
        key = id(node)
        if key in self._active:
            return self._any()
        memo_key = (key, brackets)
        cached = self._memo.get(memo_key)
        if cached is not None:
            return cached[1]
        self._active[key] = node
        try:
            found = self._node(node, base, brackets, level)
        finally:
            del self._active[key]
        found = _dedupe(found)
        if _ANY in found or not found or len(found) > MAX_UNION_MEMBERS:
            found = self._any()
        self._memo[memo_key] = (node, found)
        return found

    # -- helpers -------------------------------------------------------------------------------------

    def _any(self) -> list[str]:
        self.used.add(_ANY)
        return [_ANY]

    def _join(self, members: list[str]) -> str:
        return " | ".join(members)

    def _node(self, node: Mapping[object, object], base: str, brackets: int, level: int) -> list[str]:
        kind = node.get("type", _MISSING)
        if not isinstance(kind, _Missing):
            return self._typed_union(node, kind, base, brackets, level)
        branches = _union_branches(node)
        if branches is not None:
            return self._union(node, branches, base, brackets, level) if branches else self._any()
        every = node.get("allOf", _MISSING)
        if isinstance(every, list | tuple) and len(every) == 1:
            return self.members(every[0], base, brackets, level + 1)
        reference = node.get("$ref", _MISSING)
        if isinstance(reference, str):
            target = self._resolve(reference)
            if not isinstance(target, _Missing):
                return self.members(target, base, brackets, level + 1)
            return self._any()
        literal = self._literal(node, None, strict=True)
        if literal is not None:
            return [literal]
        return self._any()

    def _union(
        self, node: Mapping[object, object], branches: Sequence[object], base: str, brackets: int, level: int
    ) -> list[str]:
        """The members of a ``oneOf``/``anyOf``; nested pure unions are flattened by a loop, not recursion.

        Branch k's class base is the union's base plus ``k``. The walk stops as soon as more than
        :data:`MAX_UNION_MEMBERS` distinct members are found, so a 5,000-deep chain costs linear time.
        """
        found: dict[str, None] = {}
        seen: dict[int, object] = {id(node): node}
        stack: list[tuple[Iterator[tuple[int, object]], str]] = [(enumerate(branches, start=1), base)]
        while stack:
            iterator, parent = stack[-1]
            step = next(iterator, None)
            if step is None:
                stack.pop()
                continue
            index, branch = step
            branch_base = class_base(f"{parent}{index}")
            nested = _union_branches(branch)
            if nested and id(branch) not in seen and id(branch) not in self._active:
                seen[id(branch)] = branch
                stack.append((enumerate(nested, start=1), branch_base))
                continue
            for member in self.members(branch, branch_base, brackets, level + 1):
                found[member] = None
            if _ANY in found or len(found) > MAX_UNION_MEMBERS:
                return self._any()
        return list(found)

    def _typed_union(
        self, node: Mapping[object, object], kind: object, base: str, brackets: int, level: int
    ) -> list[str]:
        if isinstance(kind, str):
            kinds = [kind]
        elif isinstance(kind, list | tuple) and kind and all(isinstance(item, str) for item in kind):
            kinds = _dedupe(str(item) for item in kind)
        else:
            return self._any()
        if any(item not in _TYPES for item in kinds):
            return self._any()
        strict = len(kinds) == 1
        found: list[str] = []
        for item in kinds:
            if item == "array":
                found.append(self._array(node, base, brackets, level))
            elif item == "object":
                found.append(self._object(node, base, level))
            else:
                scalar = self._scalar(node, item, strict)
                if scalar is not None:
                    found.append(scalar)
        return found if found else self._any()

    def _scalar(self, node: Mapping[object, object], kind: str, strict: bool) -> str | None:
        """The scalar's type text, or None when its ``const``/``enum`` leaves no value of this type."""
        if "const" in node or "enum" in node:
            return self._literal(node, kind, strict)
        return "None" if kind == "null" else _SCALARS[kind]

    def _literal(self, node: Mapping[object, object], kind: str | None, strict: bool) -> str | None:
        if "const" in node:
            values: object = [node["const"]]
        elif "enum" in node:
            values = node["enum"]
        else:
            return None
        if not isinstance(values, list | tuple) or not values:
            self._any()
            return _ANY
        if kind is None:
            accepted = [value for value in values if any(_matches(value, k) for k in (*_SCALARS, "null"))]
        else:
            accepted = [value for value in values if _matches(value, kind)]
        if len(accepted) != len(values) and (strict or not accepted):
            if strict:
                self._any()
                return _ANY
            return None
        fractions = self._checker and any(isinstance(v, float) and not v.is_integer() for v in accepted)
        if fractions:  # ``float`` covers every number of the enum, integral ones included
            accepted = [v for v in accepted if isinstance(v, bool) or not isinstance(v, int | float)]
        rendered = _dedupe(text for text in (literal_value(value) for value in accepted) if text is not None)
        parts: list[str] = []
        if rendered == ["None"]:
            parts.append("None")
        elif rendered:
            self.used.add("Literal")
            parts.append(f"Literal[{', '.join(rendered)}]")
        if fractions:
            parts.append("float")
        if not parts:
            self._any()
            return _ANY
        return " | ".join(parts)

    def _array(self, node: Mapping[object, object], base: str, brackets: int, level: int) -> str:
        """``list[...]``; a chain of plain arrays is walked by a loop, not by recursion."""
        depth = 0
        current = node
        seen: dict[int, object] = {}
        inner = _ANY
        while True:
            if brackets + depth >= MAX_LIST_BRACKETS:
                break
            items = current.get("items", _MISSING)
            if "prefixItems" in current or isinstance(items, _Missing | bool | list | tuple):
                depth += 1
                break
            if not isinstance(items, Mapping):
                break
            depth += 1
            if items.get("type") == "array" and id(items) not in self._active and id(items) not in seen:
                seen[id(items)] = items
                current = items
                continue
            inner = self._join(self.members(items, base, brackets + depth, level + 1))
            break
        if inner == _ANY:
            self._any()
        return "list[" * depth + inner + "]" * depth

    def _object(self, node: Mapping[object, object], base: str, level: int) -> str:
        properties = node.get("properties", _MISSING)
        if isinstance(properties, _Missing):
            properties = {}
        if not isinstance(properties, Mapping):
            self._any()
            return _ANY
        required = node.get("required", _MISSING)
        if isinstance(required, _Missing):
            required = ()
        if not isinstance(required, list | tuple) or not all(isinstance(item, str) for item in required):
            self._any()
            return _ANY
        extra = node.get("additionalProperties", _MISSING)
        if isinstance(extra, _Missing) or extra is True:
            closed = False
        elif extra is False:
            closed = "patternProperties" not in node
        elif isinstance(extra, Mapping):
            closed = False
        else:
            self._any()
            return _ANY
        keys = list(properties.keys())
        fields = [key for key in keys if isinstance(key, str) and is_field_name(key)]
        if not keys and not closed:
            value = self.text(extra, base, 1, level + 1) if isinstance(extra, Mapping) else self._any()[0]
            return f"dict[str, {value}]"
        if self._namer is None or len(fields) != len(keys):
            self._any()
            return _DICT_ANY
        name = self._namer.allocate(base)
        self.class_names.add(name)
        self.used.add("TypedDict")
        wanted = set(required)
        lines = [f"class {name}(TypedDict):"]
        for field in fields:
            child = properties[field]
            child_type = self._join(self.members(child, class_base(name + camel_case(field)), 1, level + 1))
            comment = field_comment(child)
            if comment:
                lines.append(f"    # {comment}")
            if field in wanted:
                lines.append(f"    {field}: {child_type}")
            else:
                self.used.add("NotRequired")
                lines.append(f"    {field}: NotRequired[{child_type}]")
        if not closed:
            lines.append("    # Additional keys beyond those declared are allowed.")
        if len(lines) == 1:
            lines.append("    pass")
        self.classes.append("\n".join(lines))
        return name

    def _resolve(self, reference: str) -> object:
        """The target of a local JSON pointer ``#/...`` inside the root schema, or ``_MISSING``."""
        if not reference.startswith("#"):
            return _MISSING
        pointer = unquote(reference[1:])
        if not pointer:
            return self._root
        if not pointer.startswith("/"):
            return _MISSING
        target: object = self._root
        for token in pointer[1:].split("/"):
            token = token.replace("~1", "/").replace("~0", "~")
            if isinstance(target, Mapping) and token in target:
                target = target[token]
            elif isinstance(target, list | tuple) and token.isdigit() and int(token) < len(target):
                target = target[int(token)]
            else:
                return _MISSING
        return target


def render_root(schema: object, base: str, namer: ClassNamer, *, checker: bool = False) -> RootType:
    """Render a tool's argument or output schema, allocating class names from ``namer``.

    ``checker=True`` renders for a type checker rather than a reader: non-integral number literals,
    which PEP 586 does not allow, widen to ``float``. Class names are the same either way.

    Total: on any failure inside the walk (a hostile mapping raising, say) the whole root is ``Any``
    and ``namer`` is left as it was.
    """
    scratch = namer.copy()
    renderer = _Renderer(schema, scratch, checker)
    try:
        members = renderer.members(schema, base, 0, 0)
        text = " | ".join(members)
    except Exception:
        return RootType(_ANY, (_ANY,), (), frozenset(), frozenset({_ANY}))
    namer.adopt(scratch)
    return RootType(
        text=text,
        members=tuple(members),
        classes=tuple(renderer.classes),
        class_names=frozenset(renderer.class_names),
        used=frozenset(renderer.used),
    )


def python_type(schema: object) -> str:
    """The context-free Python type for ``schema``: like the SDK's, but objects are ``dict[str, Any]``.

    Never declares classes and never raises.
    """
    renderer = _Renderer(schema, None)
    try:
        return renderer.text(schema, "Tool", 0, 0)
    except Exception:
        return _ANY
