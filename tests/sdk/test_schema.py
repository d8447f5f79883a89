"""Schema -> type mapping: the reference table (spec 8.2) and the per-node degradation (spec 13.4)."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from codemode.sdk import python_type
from codemode.sdk._schema import (
    MAX_LIST_BRACKETS,
    MAX_UNION_MEMBERS,
    ClassNamer,
    class_base,
    field_comment,
    render_root,
)
from tests.sdk.support import declaration, obj, sig


@pytest.mark.parametrize(
    ("schema", "text"),
    [
        ({"type": "string"}, "str"),
        ({"type": "number"}, "float"),
        ({"type": "integer"}, "int"),
        ({"type": "boolean"}, "bool"),
        ({"type": "null"}, "None"),
        ({}, "Any"),
        ({"description": "anything"}, "Any"),
        ({"type": "array"}, "list[Any]"),
        ({"type": "array", "items": {"type": "string"}}, "list[str]"),
        ({"type": "object"}, "dict[str, Any]"),
        ({"type": "string", "enum": ["a", "b"]}, 'Literal["a", "b"]'),
        ({"type": "string", "enum": ["a"], "const": "b"}, 'Literal["b"]'),
        ({"type": "boolean", "const": True}, "Literal[True]"),
        ({"type": "number", "enum": [1.5, 2, 1e-7]}, "Literal[1.5, 2, 1e-7]"),
        ({"oneOf": [{"type": "string"}, {"type": "integer"}]}, "str | int"),
    ],
)
def test_scalar_mapping_table(schema: dict[str, Any], text: str) -> None:
    """It maps each schema form to its Python type text."""
    assert python_type(schema) == text


@pytest.mark.parametrize(
    "schema",
    [
        {"$ref": "#/definitions/missing"},
        {"$ref": "https://example.com/schema"},
        {"type": "object", "properties": 7},
        {"type": "string", "enum": [1, 2]},
        {"type": "string", "enum": []},
        {"type": "integer", "const": "x"},
        {"oneOf": []},
        {"oneOf": "nope"},
        {"type": "tuple"},
        {"type": 5},
        {"type": []},
        {"type": "object", "required": "a"},
        {"type": "object", "additionalProperties": 3},
        {"type": "array", "items": 9},
        {"type": "number", "enum": [float("nan")]},
        {"type": "integer", "enum": [True]},
        "not a schema",
        None,
        17,
        [],
    ],
)
def test_hostile_schemas_render_any(schema: object) -> None:
    """It renders a broken or unsupported node as Any and never raises."""
    assert python_type(schema) == "Any"


def test_context_free_python_type_never_declares_classes() -> None:
    """It renders objects with properties as dict[str, Any] when no classes may be declared."""
    assert python_type(obj({"a": {"type": "string"}}, ["a"])) == "dict[str, Any]"
    assert python_type({"type": "array", "items": obj({"a": {}})}) == "list[dict[str, Any]]"


def test_type_lists_render_unions() -> None:
    """It renders a list of types as the union of each type (better than the reference)."""
    assert python_type({"type": ["string", "null"]}) == "str | None"
    assert python_type({"type": ["string", "null"], "enum": ["a", None]}) == 'Literal["a"] | None'


def test_any_of_renders_a_union() -> None:
    """It renders anyOf like oneOf, since both describe one of several shapes."""
    assert python_type({"anyOf": [{"type": "integer"}, {"type": "string"}]}) == "int | str"


def test_unions_are_deduplicated_and_absorb_into_any() -> None:
    """It drops repeated members and lets Any absorb a union."""
    assert python_type({"oneOf": [{"type": "string"}, {"type": "string"}]}) == "str"
    assert python_type({"oneOf": [{"type": "string"}, {}]}) == "Any"


def test_type_wins_over_narrowing_keywords() -> None:
    """It keeps the declared type when oneOf, $ref or allOf sit beside it: they can only narrow it."""
    schema = {"type": "string", "oneOf": [{"format": "email"}, {"format": "uri"}], "allOf": [{}]}
    assert python_type(schema) == "str"


def test_local_refs_resolve() -> None:
    """It follows #/$defs and #/definitions pointers inside the root schema."""
    root = obj(
        {"a": {"$ref": "#/$defs/Name"}, "b": {"$ref": "#/definitions/n~1m"}},
        ["a", "b"],
        **{"$defs": {"Name": {"type": "string"}}, "definitions": {"n/m": {"type": "integer"}}},
    )
    text = declaration(sig("t", root))
    assert "    a: str\n    b: int\n" in text


def test_recursive_refs_degrade_at_the_cycle() -> None:
    """It renders a recursive $ref as Any where it re-enters itself and keeps the outer shape."""
    node = obj({"name": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#"}}}, ["name"])
    text = declaration(sig("tree", node))
    assert "class TreeArgs(TypedDict):\n    name: str\n    children: NotRequired[list[Any]]" in text


def test_cyclic_python_schema_degrades_at_the_cycle() -> None:
    """It renders a node that is its own ancestor as Any instead of looping."""
    node: dict[str, Any] = {"type": "object", "properties": {}}
    node["properties"]["self"] = node
    assert "    self: NotRequired[Any]" in declaration(sig("loop", node))


def test_unsupported_keyword_degrades_only_its_node() -> None:
    """It keeps the argument TypedDict when one field uses keywords outside the subset."""
    schema = obj(
        {
            "host": {"type": "string", "format": "hostname"},
            "port": {"type": "integer", "minimum": 1, "maximum": 65535, "description": "The port."},
            "tags": {
                "type": "array",
                "items": {"type": "string", "pattern": "^[a-z]+$"},
                "uniqueItems": True,
            },
            "extra": {"not": {"type": "null"}},
            "link": {"$ref": "https://example.com/x.json"},
        },
        ["host"],
    )
    text = declaration(sig("connect", schema))
    assert '    # (format: "hostname")\n    host: str\n' in text
    assert "    # The port. (minimum: 1, maximum: 65535)\n    port: NotRequired[int]\n" in text
    assert "    # (uniqueItems: true)\n    tags: NotRequired[list[str]]\n" in text
    assert "    extra: NotRequired[Any]\n" in text
    assert "    link: NotRequired[Any]\n" in text
    assert "async def connect(self, args: ConnectArgs) -> Any:" in text


def test_broken_node_degrades_locally() -> None:
    """It renders a structurally broken field as Any and keeps its siblings."""
    schema = obj({"good": {"type": "string"}, "bad": {"type": "object", "properties": 7}}, ["good", "bad"])
    text = declaration(sig("t", schema))
    assert "    good: str\n    bad: Any\n" in text


@pytest.mark.parametrize(
    ("schema", "comment"),
    [
        (
            {"type": "integer", "description": "The port.", "minimum": 1, "maximum": 65535},
            "The port. (minimum: 1, maximum: 65535)",
        ),
        ({"type": "string", "pattern": "^a$", "minLength": 2}, '(pattern: "^a$", minLength: 2)'),
        ({"type": "string", "default": "x\ny"}, '(default: "x\\ny")'),
        ({"type": "number", "exclusiveMinimum": 0.5}, "(exclusiveMinimum: 0.5)"),
        ({"type": "array", "minItems": 1, "maxItems": 3}, "(minItems: 1, maxItems: 3)"),
        ({"type": "string", "description": "  "}, ""),
        ({"type": "string", "default": float("nan")}, ""),
        ({"type": "string", "default": "x" * 200}, '(default: "' + "x" * 78 + "…)"),
        ("not a schema", ""),
    ],
)
def test_constraints_fold_into_the_field_comment(schema: object, comment: str) -> None:
    """It appends supported-but-untyped constraints to the description, in a fixed order."""
    assert field_comment(schema) == comment


def test_constraint_order_is_fixed_regardless_of_key_order() -> None:
    """It lists folded constraints in one canonical order."""
    assert field_comment({"maximum": 2, "minimum": 1}) == field_comment({"minimum": 1, "maximum": 2})


def test_additional_properties_schema_types_the_values() -> None:
    """It renders an open map with typed values as dict[str, T]."""
    assert python_type({"type": "object", "additionalProperties": {"type": "integer"}}) == "dict[str, int]"


def _nested_lists(depth: int, inner: Mapping[str, Any]) -> dict[str, Any]:
    schema: dict[str, Any] = dict(inner)
    for _ in range(depth):
        schema = {"type": "array", "items": schema}
    return schema


def test_list_nesting_cap_at_the_root() -> None:
    """It opens at most 180 list brackets at the root and renders the next array as Any."""
    text = python_type(_nested_lists(MAX_LIST_BRACKETS + 5, {"type": "string"}))
    assert text == "list[" * MAX_LIST_BRACKETS + "Any" + "]" * MAX_LIST_BRACKETS


def test_list_nesting_cap_within_the_limit() -> None:
    """It renders a nesting exactly at the cap in full."""
    text = python_type(_nested_lists(MAX_LIST_BRACKETS, {"type": "string"}))
    assert text == "list[" * MAX_LIST_BRACKETS + "str" + "]" * MAX_LIST_BRACKETS


def test_list_nesting_cap_in_a_field_reserves_the_not_required_bracket() -> None:
    """It restarts the bracket count at one for a field, so NotRequired plus lists stays within 180."""
    text = declaration(sig("deep", obj({"x": _nested_lists(MAX_LIST_BRACKETS + 5, {"type": "string"})})))
    line = next(item for item in text.splitlines() if item.startswith("    x: "))
    assert line == "    x: NotRequired[" + "list[" * (MAX_LIST_BRACKETS - 1) + "Any" + "]" * MAX_LIST_BRACKETS


def _one_of_chain(depth: int, distinct: bool = True) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for index in range(depth):
        leaf = {"type": "integer", "const": index} if distinct else {"type": "string"}
        schema = {"oneOf": [leaf, schema]}
    return schema


def test_deep_one_of_chain_is_flattened_in_linear_time() -> None:
    """It flattens a 5,000-deep oneOf chain with a loop and de-duplicates its members."""
    started = time.perf_counter()
    assert python_type(_one_of_chain(5000, distinct=False)) == "str"
    assert time.perf_counter() - started < 2.0


def test_deep_one_of_chain_with_too_many_members_is_any() -> None:
    """It stops early and renders Any once a union has more than 64 distinct members."""
    started = time.perf_counter()
    assert python_type(_one_of_chain(5000)) == "Any"
    assert time.perf_counter() - started < 2.0
    assert python_type(_one_of_chain(3)) == "Literal[2] | Literal[1] | Literal[0] | str"
    assert python_type(_one_of_chain(MAX_UNION_MEMBERS - 1)).count(" | ") == MAX_UNION_MEMBERS - 1


def test_one_of_in_a_typed_dict_numbers_nested_branch_classes() -> None:
    """It gives branch k of a nested union the class base of its parent branch plus k."""
    schema = {
        "oneOf": [
            obj({"a": {"type": "string"}}),
            {"oneOf": [obj({"b": {"type": "string"}}), {"type": "null"}]},
        ]
    }
    text = declaration(sig("act", output=schema))
    assert "-> ActOutput1 | ActOutput21 | None: ..." in text


def test_deep_object_nesting_is_total() -> None:
    """It renders 5,000 nested objects without raising and without quadratic names."""
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(5000):
        schema = obj({"a": schema}, ["a"])
    started = time.perf_counter()
    text = declaration(sig("nest", schema))
    assert time.perf_counter() - started < 2.0
    assert "class NestArgs(TypedDict):\n    a: NestArgsA\n" in text


def test_shared_subschemas_render_once() -> None:
    """It reuses the rendering of a shared sub-schema, so a DAG of depth 40 stays linear."""
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(40):
        schema = obj({"left": schema, "right": schema}, ["left", "right"])
    started = time.perf_counter()
    text = declaration(sig("dag", schema))
    assert time.perf_counter() - started < 2.0
    assert text.count("(TypedDict):") == 40


class _Exploding(Mapping[str, Any]):
    """A mapping that claims keys but raises when read."""

    def __getitem__(self, key: str) -> Any:
        raise RuntimeError("boom")

    def __iter__(self) -> Iterator[str]:
        return iter(["type"])

    def __len__(self) -> int:
        return 1


def test_hostile_mapping_never_raises_and_rolls_back_names() -> None:
    """It renders a root whose reads raise as Any and leaves the name allocator untouched."""
    namer = ClassNamer()
    result = render_root(_Exploding(), "BoomArgs", namer)
    assert result.text == "Any"
    assert namer.allocate("BoomArgs") == "BoomArgs"


@pytest.mark.parametrize(
    ("text", "base"),
    [
        ("ReadFileArgs", "ReadFileArgs"),
        ("1stArgs", "Tool1stArgs"),
        ("", "Tool"),
        ("_x", "Tool_x"),
        ("None", "ToolNone"),
    ],
)
def test_class_base_is_always_a_usable_name(text: str, base: str) -> None:
    """It prefixes Tool when the text cannot start a class name."""
    assert class_base(text) == base
