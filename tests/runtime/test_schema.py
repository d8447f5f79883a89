"""The enforced JSON Schema subset: checker violations, value validation texts, totality."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codemode.runtime import JsonSchemaError, check_schema, validate_value
from codemode.runtime.schema import ensure_supported_schema, json_equal

UNSUPPORTED = ("is not a supported keyword (subset: type/oneOf/properties/required/additionalProperties/"
               "items/enum/const + annotations)")


@pytest.mark.parametrize(("schema", "expected"), [
    ({"type": "string", "format": "uri"}, [f"schema.format {UNSUPPORTED}"]),
    ({"$ref": "#/x"}, [f"schema.$ref {UNSUPPORTED}"]),
    ({"type": ["string", "null"]}, ["schema.type must be one of object/array/string/number/integer/boolean/"
                                    "null (a single string)"]),
    ({"type": "string", "oneOf": [{}, {}]}, ["schema cannot declare both type and oneOf"]),
    ({"enum": [1]}, ["schema.enum requires type or oneOf"]),
    ({"oneOf": [{"type": "string"}]}, ["schema.oneOf must be an array of at least two schemas"]),
    ({"oneOf": [{}, {}], "items": {}}, ["schema.items is not supported beside oneOf"]),
    ({"type": "string", "items": {}}, ['schema.items is not supported on type "string"']),
    ({"type": "array", "properties": {}}, ['schema.properties is not supported on type "array"']),
    ({"type": "object", "enum": [{}]}, ['schema.enum is not supported on type "object"']),
    ({"type": "object", "properties": {}, "required": ["x"]},
     ['schema.required names "x" which is not in properties']),
    ({"type": "object", "required": "x"}, ["schema.required must be an array of strings"]),
    ({"type": "object", "additionalProperties": {}}, ["schema.additionalProperties must be a boolean"]),
    ({"type": "integer", "enum": [1, 1.5]}, ['schema.enum[1] does not match type "integer"']),
    ({"type": "number", "enum": [True]}, ['schema.enum[0] does not match type "number"']),
    ({"type": "string", "enum": []}, ["schema.enum must be a non-empty array"]),
    ({"type": "string", "const": 3}, ['schema.const does not match type "string"']),
    ({"type": "string", "enum": ["a"], "const": "b"}, ["schema.const must be a member of enum"]),
    ({"type": "string", "description": 3}, ["schema.description must be a string"]),
    ({"type": "string", "default": float("nan")}, ["schema.default must be lossless JSON"]),
    ("string", ["schema must be a schema object"]),
    ({"type": "array", "items": [{"type": "string"}]}, ["schema.items must be a schema object"]),
])
def test_checker_reports_each_violation(schema: Any, expected: list[str]) -> None:
    """It names the offending keyword and path for every rule of the subset."""
    assert check_schema(schema) == expected


def test_checker_collects_every_violation_path_qualified() -> None:
    """It reports all violations at once, each with its full path."""
    schema = {"type": "object", "properties": {
        "a": {"type": "string", "pattern": "x"},
        "b": {"type": "array", "items": {"type": "integer", "minimum": 0}},
        "c": {"oneOf": [{"type": "null"}, {"anyOf": []}]},
    }}
    assert check_schema(schema) == [
        f"schema.properties.a.pattern {UNSUPPORTED}",
        f"schema.properties.b.items.minimum {UNSUPPORTED}",
        f"schema.properties.c.oneOf[1].anyOf {UNSUPPORTED}",
    ]
    with pytest.raises(JsonSchemaError) as caught:
        ensure_supported_schema(schema)
    assert caught.value.code == "UNSUPPORTED_SCHEMA"
    assert str(caught.value).startswith("unsupported JSON schema: schema.properties.a.pattern")
    assert len(caught.value.violations) == 3


def test_checker_accepts_annotation_only_and_shared_nodes() -> None:
    """It accepts annotation-only nodes and shared (acyclic) sub-schemas."""
    shared = {"type": "string"}
    schema = {"type": "object", "properties": {"a": shared, "b": shared, "c": {"description": "any"}},
              "required": ["a"], "additionalProperties": False}
    assert check_schema(schema) == []


def test_checker_detects_cycles() -> None:
    """It reports a node that is its own ancestor instead of looping."""
    schema: dict[str, Any] = {"type": "array"}
    schema["items"] = schema
    assert check_schema(schema) == ["schema.items is circular"]


def test_checker_and_validator_are_iterative_on_deep_chains() -> None:
    """It handles 5,000-deep oneOf chains and nesting without a recursion limit."""
    schema: dict[str, Any] = {"type": "null"}
    value: Any = None
    for _ in range(5000):
        schema = {"oneOf": [{"type": "array", "items": schema}, {"type": "string"}]}
        value = [value]
    assert check_schema(schema) == []
    assert validate_value(schema, value) == []
    assert validate_value(schema, 3)[0] == '"value" must match exactly one oneOf branch (matched 0)'


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=5),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children,
                                                                        max_size=4),
    max_leaves=25,
)
keywords = st.sampled_from(["type", "oneOf", "properties", "required", "additionalProperties", "items",
                            "enum", "const", "description", "default", "format", "anyOf"])
schema_like = st.recursive(
    json_values,
    lambda children: st.dictionaries(keywords, children, max_size=5) | st.lists(children, max_size=3),
    max_leaves=30,
)


@settings(max_examples=100, deadline=None)
@given(schema_like, json_values)
def test_checker_and_validator_are_total(schema: Any, value: Any) -> None:
    """It never raises, whatever schema and value it is given."""
    violations = check_schema(schema)
    assert isinstance(violations, list)
    assert all(isinstance(v, str) for v in violations)
    assert isinstance(validate_value(schema if isinstance(schema, dict) else {}, value), list)


OBJECT = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "path": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "config": {"type": "object", "additionalProperties": True,
                   "properties": {"host": {"type": "string"}}, "required": ["host"]},
    },
    "required": ["path"],
}


@pytest.mark.parametrize(("value", "root", "expected"), [
    ("x", "", ['"arguments" must be an object']),
    ({}, "", ['missing required property "path"']),
    ({"path": "p", "tags": ["a", 2]}, "", ['"tags[1]" must be a string']),
    ({"path": "p", "config": {}}, "", ['missing required property "config.host"']),
    ({"path": "p", "extra": 1}, "", ['"extra" is not a declared property (additionalProperties: false)']),
    ({"path": 1}, "value", ['"value.path" must be a string']),
    ("x", "value", ['"value" must be an object']),
    ({"tags": "t", "zzz": 0}, "value", [
        'missing required property "value.path"', '"value.tags" must be an array',
        '"value.zzz" is not a declared property (additionalProperties: false)']),
])
def test_validator_messages(value: Any, root: str, expected: list[str]) -> None:
    """It reports ordered, path-qualified violations with the pinned texts."""
    assert validate_value(OBJECT, value, root) == expected


@pytest.mark.parametrize(("schema", "value", "expected"), [
    ({"type": "string"}, 1, '"value" must be a string'),
    ({"type": "number"}, "1", '"value" must be a number'),
    ({"type": "number"}, True, '"value" must be a number'),
    ({"type": "number"}, float("inf"), '"value" must be a finite JSON number'),
    ({"type": "number"}, -0.0, '"value" must be a finite JSON number'),
    ({"type": "integer"}, 1.5, '"value" must be an integer'),
    ({"type": "integer"}, False, '"value" must be an integer'),
    ({"type": "boolean"}, 0, '"value" must be a boolean'),
    ({"type": "null"}, 0, '"value" must be null'),
    ({"type": "array"}, {}, '"value" must be an array'),
    ({"type": "integer", "enum": [1, 2]}, 3, '"value" must be one of [1,2]'),
    ({"type": "integer", "enum": [1, 2]}, True, '"value" must be an integer'),
    ({"type": "boolean", "const": True}, False, '"value" must be true'),
    ({"type": "string", "const": "a"}, "b", '"value" must be "a"'),
    ({}, {1: 2}, '"value" must be a lossless JSON value'),
    ({"type": "object"}, {"a": float("nan")}, '"value" must be a lossless JSON object'),
    ({"type": "array"}, [set()], '"value" must be a dense lossless JSON array'),
    ({"oneOf": [{"type": "number"}, {"type": "integer"}]}, 1,
     '"value" must match exactly one oneOf branch (matched 2)'),
])
def test_validator_scalar_and_structure_texts(schema: dict[str, Any], value: Any, expected: str) -> None:
    """It uses the exact message of each rule, and never lets a bool pass as a number."""
    assert validate_value(schema, value) == [expected]


@pytest.mark.parametrize(("schema", "value"), [
    ({"type": "integer"}, 2.0),
    ({"type": "number", "enum": [1]}, 1.0),
    ({"type": "boolean", "enum": [True]}, True),
    ({"oneOf": [{"type": "string"}, {"type": "integer"}]}, 3),
    ({"description": "anything"}, {"a": [1, None]}),
])
def test_validator_accepts_valid_values(schema: dict[str, Any], value: Any) -> None:
    """It accepts JSON-equal values (1 == 1.0) and annotation-only nodes."""
    assert validate_value(schema, value) == []


@given(st.booleans(), st.integers(min_value=-1, max_value=2))
def test_bool_never_equals_a_number(flag: bool, number: int) -> None:
    """It keeps booleans and numbers apart in enum/const comparisons."""
    assert not json_equal(flag, number)
    assert not json_equal(number, flag)
    assert validate_value({"type": "integer", "enum": [number]}, number) == []
    assert validate_value({"type": "boolean", "const": flag}, number) != []


subset_schemas = st.recursive(
    st.sampled_from([{"type": "string"}, {"type": "number"}, {"type": "integer"}, {"type": "boolean"},
                     {"type": "null"}, {}, {"type": "integer", "enum": [1, 2]},
                     {"type": "boolean", "const": True}, {"type": "array"}, {"type": "object"}]),
    lambda children: (
        st.builds(lambda items: {"type": "array", "items": items}, children)
        | st.builds(lambda props, closed, req: {"type": "object", "properties": props,
                                                "additionalProperties": closed,
                                                "required": [k for k in props if req]},
                    st.dictionaries(st.sampled_from("abc"), children, max_size=3), st.booleans(),
                    st.booleans())
        | st.builds(lambda a, b: {"oneOf": [a, b]}, children, children)
    ),
    max_leaves=8,
)
subset_values = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.floats(allow_nan=True) | st.sampled_from(["x", ""]),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.sampled_from("abcd"), c, max_size=3),
    max_leaves=10,
)


@settings(max_examples=150, deadline=None)
@given(subset_schemas, subset_values)
def test_fast_validation_agrees_with_the_full_walk(schema: dict[str, Any], value: Any) -> None:
    """It gives exactly the full validator's answer (the fast path only skips work)."""
    from codemode.runtime._fast import freeze, validate_fast
    from codemode.sandbox.lossless import snapshot

    assert check_schema(schema) == []
    assert validate_fast(schema, value, "value") == validate_value(schema, value, "value")
    try:
        expected = snapshot(value, freeze=True)
    except Exception as exc:
        with pytest.raises(type(exc)):
            freeze(value)
    else:
        assert freeze(value) == expected
        # the pipeline validates frozen values: the same answers for them
        assert validate_fast(schema, expected, "value") == validate_value(schema, expected, "value")


@pytest.mark.parametrize("value", [{"logs": ["a", "b"], "result": [1, {"x": [2]}]}, {"logs": []}])
@pytest.mark.parametrize("frozen", [False, True])
def test_fast_validation_accepts_valid_values_without_the_full_walk(
        monkeypatch: pytest.MonkeyPatch, value: Any, frozen: bool) -> None:
    """It answers a valid value (plain or frozen, arrays included) on the compiled check alone."""
    from codemode.runtime import _fast
    from codemode.sandbox.lossless import snapshot

    schema = {"type": "object", "additionalProperties": False, "required": ["logs"],
              "properties": {"logs": {"type": "array", "items": {"type": "string"}}, "result": {}}}

    def full_walk(*args: Any) -> list[str]:
        raise AssertionError("the full validator ran for a valid value")

    monkeypatch.setattr(_fast, "validate_value", full_walk)
    assert _fast.validate_fast(schema, snapshot(value, freeze=frozen)) == []
