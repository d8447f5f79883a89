"""Generated JSON Schema (pydantic's) converted to the enforced subset, node by node."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codemode.runtime import check_schema
from codemode.runtime._subset import to_subset

STRING = {"type": "string"}
INTEGER = {"type": "integer"}
NULL = {"type": "null"}


@pytest.mark.parametrize(("schema", "expected"), [
    # references are inlined; siblings of $ref (a field's description) win over the definition's
    ({"$defs": {"P": {"type": "object", "title": "P", "properties": {"x": INTEGER}, "required": ["x"]}},
      "properties": {"p": {"$ref": "#/$defs/P", "description": "The point."}}, "type": "object"},
     {"type": "object", "properties": {"p": {"type": "object", "description": "The point.",
                                             "properties": {"x": INTEGER}, "required": ["x"],
                                             "additionalProperties": False}},
      "additionalProperties": False}),
    # a recursive reference becomes any JSON value
    ({"$defs": {"T": {"type": "object",
                      "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/T"}}}}},
      "$ref": "#/$defs/T"},
     {"type": "object", "properties": {"kids": {"type": "array", "items": {}}},
      "additionalProperties": False}),
    # disjoint branches: oneOf; integer beside number: number; overlapping branches: any JSON value
    ({"anyOf": [STRING, NULL], "description": "d"}, {"oneOf": [STRING, NULL], "description": "d"}),
    ({"anyOf": [INTEGER, {"type": "number"}]}, {"type": "number"}),
    ({"anyOf": [{"type": "object", "properties": {"a": STRING}},
                {"type": "object", "properties": {"b": STRING}}]}, {}),
    ({"anyOf": [{"type": "array", "items": STRING}, {"type": "array", "items": INTEGER}]}, {}),
    ({"anyOf": [{"type": "string", "enum": ["a"]}, {"type": "string", "const": "b"}]},
     {"oneOf": [{"type": "string", "enum": ["a"]}, {"type": "string", "const": "b"}]}),
    ({"anyOf": [STRING, {}]}, {}),
    ({"type": ["string", "null"]}, {"oneOf": [STRING, NULL]}),
    # tagged objects are disjoint; so is a closed object against one requiring a key it lacks
    ({"oneOf": [{"type": "object", "properties": {"k": {"type": "string", "const": "a"}},
                 "required": ["k"]},
                {"type": "object", "properties": {"k": {"type": "string", "const": "b"}},
                 "required": ["k"]}],
      "discriminator": {"propertyName": "k"}},
     {"oneOf": [{"type": "object", "properties": {"k": {"type": "string", "const": "a"}}, "required": ["k"],
                 "additionalProperties": False},
                {"type": "object", "properties": {"k": {"type": "string", "const": "b"}}, "required": ["k"],
                 "additionalProperties": False}]}),
    # an untyped enum gets its values' types
    ({"enum": [1, "a", None, True]},
     {"oneOf": [{"type": "integer", "const": 1}, {"type": "string", "const": "a"}, NULL,
                {"type": "boolean", "const": True}]}),
    ({"const": "x"}, {"type": "string", "const": "x"}),
    # dict[str, X] is an open object; declared properties are closed unless the schema says otherwise
    ({"type": "object", "additionalProperties": INTEGER}, {"type": "object", "additionalProperties": True}),
    ({"type": "object", "properties": {}, "additionalProperties": True},
     {"type": "object", "properties": {}, "additionalProperties": True}),
    # tuples keep items only when every position agrees; constraints are folded into the description
    ({"type": "array", "prefixItems": [INTEGER, INTEGER], "minItems": 2, "maxItems": 2},
     {"type": "array", "description": "(minItems: 2, maxItems: 2)", "items": INTEGER}),
    ({"type": "string", "format": "date-time", "pattern": "^2", "description": "When."},
     {"type": "string", "description": 'When. (format: "date-time", pattern: "^2")'}),
    # titles and non-lossless annotations go; an unknown type is any value; a non-schema is any value
    ({"type": "integer", "title": "N", "default": 3, "examples": [1, 2]},
     {"type": "integer", "default": 3, "examples": [1, 2]}),
    ({"type": "number", "default": float("nan")}, {"type": "number"}),
    ({"type": "string", "enum": None, "const": 1}, {"type": "string"}),
    ({"type": "string", "enum": ["a", "b"], "const": "c"}, {"type": "string", "enum": ["a", "b"]}),
    ({"type": "thing", "description": "?"}, {"description": "?"}),
    ({"type": "array", "items": "nonsense"}, {"type": "array"}),
    ({"$ref": "https://example.com/x.json"}, {}),
], ids=lambda value: None)
def test_conversion_keeps_what_the_subset_can_state(schema: dict[str, Any], expected: dict[str, Any]) -> None:
    """It converts each construct as documented and the result is inside the subset."""
    converted = to_subset(schema)
    assert converted == expected
    assert check_schema(converted) == []


_KEYWORDS = st.sampled_from(["type", "anyOf", "oneOf", "allOf", "$ref", "properties", "required", "items",
                             "prefixItems", "additionalProperties", "enum", "const", "title", "description",
                             "default", "minimum", "pattern", "format", "$defs", "not", "discriminator"])
_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.text(max_size=4))
_TYPES = st.sampled_from(["object", "array", "string", "number", "integer", "boolean", "null", "weird"])


def _schemas() -> st.SearchStrategy[Any]:
    def extend(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        values = st.one_of(children, st.lists(children, max_size=3), _TYPES, st.lists(_TYPES, max_size=3),
                           st.dictionaries(st.text(max_size=3), children, max_size=3),
                           st.sampled_from(["#/$defs/A", "#/$defs/B", "#/definitions/A", "#", "x"]))
        return st.dictionaries(_KEYWORDS, values, max_size=5)

    return st.recursive(st.one_of(_SCALARS, st.dictionaries(_KEYWORDS, _SCALARS, max_size=3)), extend,
                        max_leaves=25)


@settings(max_examples=500, deadline=None)
@given(_schemas(), st.dictionaries(st.sampled_from(["A", "B"]), _schemas(), max_size=2))
def test_any_schema_converts_into_the_subset(schema: Any, definitions: dict[str, Any]) -> None:
    """It is total: whatever it is given (wrong types, dangling or cyclic references), it returns a
    schema inside the subset and never raises."""
    if isinstance(schema, dict):
        schema = {**schema, "$defs": definitions}
    converted = to_subset(schema if isinstance(schema, dict) else {"items": schema, "type": "array"})
    assert check_schema(converted) == []
