"""Shared helpers for the SDK tests: building signatures and cutting the fenced block out of a section."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hypothesis import strategies as st

from codemode.sdk import ToolSignature, render_python_sdk

OBJECT: dict[str, Any] = {"type": "object"}


def sig(
    name: str,
    parameters: Mapping[str, Any] | None = None,
    output: Mapping[str, Any] | None = None,
    description: str = "",
) -> ToolSignature:
    """A signature with an open-object argument schema and an any-JSON output unless given."""
    return ToolSignature(
        name=name,
        description=description,
        parameters=OBJECT if parameters is None else parameters,
        output_schema={} if output is None else output,
    )


def fenced(section: str) -> str:
    """The Python text inside the section's ```python fence."""
    head, _, rest = section.partition("```python\n")
    assert head, "section has no instruction block"
    body, _, tail = rest.rpartition("\n```")
    assert tail == "", "section must end with the closing fence"
    return body


def declaration(*signatures: ToolSignature) -> str:
    """The fenced declaration for ``signatures``."""
    return fenced(render_python_sdk(signatures))


def obj(properties: Mapping[str, Any], required: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    """An object schema."""
    schema: dict[str, Any] = {"type": "object", "properties": dict(properties), **extra}
    if required is not None:
        schema["required"] = required
    return schema


# -- hypothesis strategies: hostile schemas and tool sets --------------------------------------

_KEYWORDS = (
    "type",
    "properties",
    "required",
    "items",
    "enum",
    "const",
    "oneOf",
    "anyOf",
    "allOf",
    "additionalProperties",
    "description",
    "$ref",
    "minimum",
    "pattern",
    "format",
    "default",
    "prefixItems",
    "title",
    "$defs",
)
_TYPE_NAMES = ("object", "array", "string", "number", "integer", "boolean", "null", "tuple")
_NAME_TEXT = st.text(st.characters(exclude_categories=()), max_size=12)
_SCALARS = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | _NAME_TEXT


def _schema_values(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return (
        st.sampled_from(_TYPE_NAMES)
        | st.lists(st.sampled_from(_TYPE_NAMES), max_size=3)
        | st.lists(children, max_size=3)
        | st.dictionaries(_NAME_TEXT | st.sampled_from(["a", "b", "class", "__x"]), children, max_size=3)
        | st.lists(_NAME_TEXT, max_size=3)
        | st.sampled_from(["#", "#/properties/a", "#/items", "#/$defs/a", "#/oneOf/0"])
        | children
    )


SCHEMAS: st.SearchStrategy[Any] = st.recursive(
    _SCALARS | st.fixed_dictionaries({"type": st.sampled_from(_TYPE_NAMES)}),
    lambda children: st.dictionaries(
        st.sampled_from(_KEYWORDS) | _NAME_TEXT, _schema_values(children), max_size=5
    ),
    max_leaves=20,
)

TOOL_SETS = st.lists(
    st.tuples(
        _NAME_TEXT | st.sampled_from(["read_file", "class", "_x", "match", "a.b", "list", "str"]),
        _NAME_TEXT,
        SCHEMAS,
        SCHEMAS,
    ),
    max_size=6,
    unique_by=lambda item: item[0],
)


def signatures(raw: list[tuple[str, str, Any, Any]]) -> list[ToolSignature]:
    """Signatures from TOOL_SETS tuples."""
    return [sig(name, params, output, description) for name, description, params, output in raw]
