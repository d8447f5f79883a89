"""Tool definitions: the parameter DSL compiler, define_tool's checks, raw definitions."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codemode.runtime import (
    DefinitionError,
    JsonSchemaError,
    ResourceClaims,
    ToolOutput,
    compile_parameters,
    define_tool,
    raw_tool,
)

from .helpers import TEXT_OUTPUT, render_text


async def _noop(args: Any, ctx: Any) -> Any:
    return {"text": ""}


def _define(**overrides: Any) -> Any:
    options: dict[str, Any] = {
        "name": "t", "description": "d", "parameters": {},
        "output": ToolOutput(schema=TEXT_OUTPUT, render=render_text), "execute": _noop,
    }
    options.update(overrides)
    return define_tool(**options)


def test_dsl_compiles_to_the_pinned_key_order() -> None:
    """It emits type, annotations, then constraints, with required in declaration order."""
    compiled = compile_parameters({
        "path": {"type": "string", "required": True, "enum": ["a"], "description": "where"},
        "tags": {"type": "array", "items": {"type": "string"}, "title": "Tags"},
        "config": {"type": "object", "additionalProperties": False,
                   "properties": {"host": {"type": "string", "required": True}}},
        "either": {"oneOf": [{"type": "string"}, {"type": "null"}], "description": "x"},
        "blob": {"type": "json", "description": "anything"},
        "count": {"type": "integer", "required": True},
    })
    assert compiled == {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "where", "enum": ["a"]},
            "tags": {"type": "array", "title": "Tags", "items": {"type": "string"}},
            "config": {"type": "object", "additionalProperties": False,
                       "properties": {"host": {"type": "string"}}, "required": ["host"]},
            "either": {"oneOf": [{"type": "string"}, {"type": "null"}], "description": "x"},
            "blob": {"description": "anything"},
            "count": {"type": "integer"},
        },
        "required": ["path", "count"],
    }
    assert list(compiled["properties"]["path"]) == ["type", "description", "enum"]
    assert list(compiled["properties"]["config"]) == [
        "type", "additionalProperties", "properties", "required"]
    assert "required" not in compile_parameters({"a": {"type": "string"}})


@pytest.mark.parametrize(("spec", "message"), [
    ({"a": "string"}, "parameters.a must be a value schema object"),
    ({"a": {"type": "string", "required": False}}, "parameters.a.required must be true when present"),
    ({"a": {"type": "string", "minLength": 1}},
     "parameters.a.minLength is not supported by the value schema DSL"),
    ({"a": {"type": "string", "oneOf": []}}, "parameters.a cannot declare both type and oneOf"),
    ({"a": {"oneOf": [{"type": "string"}]}},
     "parameters.a.oneOf must be an array of at least two value schemas"),
    ({"a": {"type": "object"}}, "parameters.a.additionalProperties must be explicitly true or false"),
    ({"a": {"type": "string", "enum": "x"}}, "parameters.a.enum must be a non-empty array of scalar values"),
    ({"a": {"type": "date"}},
     "parameters.a.type must be string/number/integer/boolean/null/array/object/json, or use oneOf"),
    ({"a": {"type": "object", "additionalProperties": True, "properties": 3}},
     "parameters.a.properties must be an object of value schemas"),
    ({"a": {"oneOf": [{"type": "string", "required": True}, {"type": "null"}]}},
     "parameters.a.oneOf[0].required is not supported by the value schema DSL"),
    ({"a": {"type": "integer", "enum": ["x"]}},
     'parameters.properties.a.enum[0] does not match type "integer"'),
])
def test_dsl_compile_errors(spec: dict[str, Any], message: str) -> None:
    """It rejects each malformed DSL node with a path-qualified UNSUPPORTED_SCHEMA error."""
    with pytest.raises(JsonSchemaError) as caught:
        compile_parameters(spec)
    assert message in caught.value.violations


def test_dsl_detects_cycles() -> None:
    """It reports a circular value spec instead of recursing forever."""
    node: dict[str, Any] = {"type": "array"}
    node["items"] = node
    with pytest.raises(JsonSchemaError) as caught:
        compile_parameters({"a": node})
    assert "parameters.a.items is circular" in caught.value.violations


names = st.text(st.characters(min_codepoint=97, max_codepoint=122), min_size=1, max_size=6)
leaf = st.fixed_dictionaries({"type": st.sampled_from(["string", "number", "integer", "boolean", "null",
                                                       "json"])})
specs = st.recursive(
    leaf,
    lambda children: st.builds(lambda props: {"type": "object", "additionalProperties": True,
                                              "properties": props},
                               st.dictionaries(names, children.map(lambda c: {**c}), max_size=3)),
    max_leaves=8,
)


@settings(max_examples=50, deadline=None)
@given(st.dictionaries(names, st.tuples(specs, st.booleans()), max_size=5))
def test_dsl_required_lists_exactly_the_required_keys(
        entries: dict[str, tuple[dict[str, Any], bool]]) -> None:
    """It compiles totally and lists exactly the required:true keys in declaration order."""
    spec = {key: {**node, **({"required": True} if required else {})}
            for key, (node, required) in entries.items()}
    compiled = compile_parameters(spec)
    assert compiled.get("required", []) == [key for key, (_, required) in entries.items() if required]


@pytest.mark.parametrize("timeout", [0, -1, float("inf"), float("nan"), True, "5"])
def test_define_tool_rejects_bad_timeouts(timeout: Any) -> None:
    """It requires timeout_ms to be a positive finite number."""
    message = r"define_tool\(t\): timeout_ms must be a positive finite number"
    with pytest.raises(DefinitionError, match=message):
        _define(timeout_ms=timeout)


def test_define_tool_requires_an_output_contract() -> None:
    """It refuses a definition without ToolOutput(schema, render)."""
    with pytest.raises(DefinitionError, match='tool "t" must declare output=ToolOutput'):
        _define(output={"schema": {}})
    with pytest.raises(DefinitionError, match='tool "t" must declare output=ToolOutput'):
        _define(output=ToolOutput(schema={}, render="nope"))  # type: ignore[arg-type]


def test_define_tool_checks_the_output_schema_subset_reporting_all_violations() -> None:
    """It rejects an output schema outside the subset, naming every violation."""
    schema = {"type": "object", "properties": {"a": {"type": "string", "format": "uri"},
                                               "b": {"type": "integer", "minimum": 1}}}
    with pytest.raises(JsonSchemaError) as caught:
        _define(output=ToolOutput(schema=schema, render=render_text))
    assert len(caught.value.violations) == 2
    assert caught.value.code == "UNSUPPORTED_SCHEMA"


def test_define_tool_uses_a_raw_parameter_schema_as_is() -> None:
    """It keeps a raw JSON Schema (a string "type") unchanged and validates against it."""
    raw = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 3}}, "required": ["n"]}
    definition = _define(parameters=raw)
    assert definition.parameters == raw
    assert definition.validate_arguments is not None
    assert definition.validate_arguments({"n": 5}) == []
    assert definition.validate_arguments({"n": 1}) == ['"n" 1 is less than the minimum of 3']
    subset = _define(parameters={"type": "object", "properties": {"n": {"type": "integer"}}})
    assert subset.validate_arguments is not None
    assert subset.validate_arguments({"n": "x"}) == ['"n" must be an integer']


def test_soft_validation_of_classifier_presenters_and_claims() -> None:
    """It answers False/None for invalid arguments instead of calling the author's functions."""
    seen: list[Any] = []

    def classify(args: Any) -> bool:
        seen.append(args)
        return True

    definition = _define(
        parameters={"text": {"type": "string", "required": True}},
        is_concurrency_safe=classify,
        present_call=lambda args: {"card": "generic"},
        present_result=lambda args, result: {"card": "generic"},
        claims=lambda args: ResourceClaims(writes=frozenset({args["text"]})),
    )
    assert definition.is_concurrency_safe({"text": 1}) is False
    assert definition.present_call({}) is None
    assert definition.present_result({}, None) is None
    assert definition.claims({}) is None
    assert seen == []
    assert definition.is_concurrency_safe({"text": "a"}) is True
    assert definition.present_call({"text": "a"}) == {"card": "generic"}
    assert definition.claims({"text": "a"}) == ResourceClaims(frozenset(), frozenset({"a"}))


@pytest.mark.parametrize("make", ["define_tool", "raw_tool"])
def test_is_concurrency_safe_accepts_a_constant(make: str, caplog: pytest.LogCaptureFixture) -> None:
    """``True`` makes every (valid) call parallel and ``False`` exclusive, with nothing logged per call
    (a bool used to be stored as the classifier and fail on every call)."""
    from codemode.runtime import ToolRuntime

    build = _define if make == "define_tool" else _raw
    rt = ToolRuntime()
    rt.register(build(name="yes", parameters={"text": {"type": "string"}}, is_concurrency_safe=True))
    rt.register(build(name="no", is_concurrency_safe=False))
    with caplog.at_level(logging.DEBUG):
        assert rt.execution_mode("yes", {"text": "a"}) == "parallel"
        assert rt.execution_mode("no", {}) == "exclusive"
        execution = rt.stages.create("yes", {"text": "a"})
        assert rt.stages.execution_mode(execution) == "parallel"
    assert caplog.records == []
    if make == "define_tool":
        assert rt.execution_mode("yes", {"text": 1}) == "exclusive"  # invalid arguments stay exclusive


def _raw(**overrides: Any) -> Any:
    options: dict[str, Any] = {"name": "t", "description": "d", "parameters": {"type": "object"},
                               "output": ToolOutput(schema=TEXT_OUTPUT, render=render_text), "execute": _noop}
    options.update(overrides)
    if "parameters" in overrides and "type" not in overrides["parameters"]:
        options["parameters"] = {"type": "object"}
    return raw_tool(**options)


def test_claims_accepts_one_value_for_every_call() -> None:
    """A ResourceClaims value is claimed by every valid call."""
    claims = ResourceClaims(writes=frozenset({"db"}))
    definition = _define(parameters={"text": {"type": "string"}}, claims=claims)
    assert definition.claims is not None
    assert definition.claims({"text": "a"}) == claims and definition.claims({"text": 1}) is None


@pytest.mark.parametrize(("options", "message"), [
    ({"output": ToolOutput(schema={}, render=lambda value: [])},
     r'tool "t" output.render must accept 2 positional arguments \(args, value\), but .* does not'),
    ({"output": ToolOutput(schema={}, render=render_text, presentation_meta=lambda: None)},
     r"output.presentation_meta must accept 2 positional arguments"),
    ({"is_concurrency_safe": lambda: True},
     r"is_concurrency_safe must accept 1 positional argument \(args\)"),
    ({"is_concurrency_safe": "yes"}, r"is_concurrency_safe must be True, False or a callable"),
    ({"claims": lambda a, b: None}, r"claims must accept 1 positional argument \(args\)"),
    ({"present_call": lambda: None}, r"present_call must accept 1 positional argument"),
    ({"present_result": lambda args: None}, r"present_result must accept 2 positional arguments"),
    ({"finalize_content": lambda call: None}, r"finalize_content must accept 2 positional arguments"),
    ({"execute": lambda args: None}, r"execute must accept 2 positional arguments \(args, ctx\)"),
])
def test_callables_with_the_wrong_arity_fail_when_the_tool_is_defined(options: dict[str, Any],
                                                                      message: str) -> None:
    """It checks each callable's signature once, at definition, instead of failing on every call."""
    with pytest.raises(DefinitionError, match=message):
        _define(**options)


def test_a_definition_built_directly_with_a_bool_classifier_is_refused_at_registration() -> None:
    """A ToolDefinition made by hand with ``is_concurrency_safe=True`` is refused with a hint."""
    from dataclasses import replace

    from codemode.runtime import ToolRuntime

    definition = replace(_define(), is_concurrency_safe=True)
    with pytest.raises(DefinitionError, match="pass True/False to define_tool or raw_tool"):
        ToolRuntime().register(definition)


@pytest.mark.anyio
async def test_render_results_are_checked_on_every_call_with_a_clear_error() -> None:
    """A render returning something other than a list of blocks is an INVALID_TOOL_OUTPUT result
    that shows the expected shape."""
    from codemode.runtime import ToolRuntime

    rt = ToolRuntime()
    rt.register(_define(output=ToolOutput(schema=TEXT_OUTPUT, render=lambda args, value: value["text"])))
    result = await rt.execute("t", {})
    assert result.code == "INVALID_TOOL_OUTPUT"
    assert result.error is not None
    assert '[{"type": "text", "text": "..."}], not str' in result.error.message


def test_raw_tool_skips_argument_validation_but_needs_output() -> None:
    """It builds a raw definition without an argument validator, still checking the output contract."""
    definition = raw_tool(name="mcp_x", description="d", parameters={"type": "object", "format": "x"},
                          output=ToolOutput(schema={}, render=lambda a, v: []), execute=_noop)
    assert definition.validate_arguments is None
    with pytest.raises(DefinitionError):
        raw_tool(name="mcp_x", description="d", parameters={}, output=None,  # type: ignore[arg-type]
                 execute=_noop)


def test_schema_projection_is_detached_and_lossless() -> None:
    """It projects exactly name/description/parameters as a detached copy."""
    definition = _define(parameters={"a": {"type": "string"}})
    projected = definition.schema()
    assert set(projected) == {"name", "description", "parameters"}
    projected["parameters"]["properties"]["a"]["type"] = "number"
    assert definition.schema()["parameters"]["properties"]["a"]["type"] == "string"
    bad = raw_tool(name="b", description="d", parameters={"type": "object", "x": float("nan")},
                   output=ToolOutput(schema={}, render=lambda a, v: []), execute=_noop)
    with pytest.raises(DefinitionError, match='tool "b" parameters must be lossless JSON'):
        bad.schema()


@pytest.mark.parametrize(("left", "right", "conflict"), [
    (ResourceClaims(writes=frozenset({"a"})), ResourceClaims(writes=frozenset({"b"})), False),
    (ResourceClaims(writes=frozenset({"a"})), ResourceClaims(reads=frozenset({"a"})), True),
    (ResourceClaims(reads=frozenset({"a"})), ResourceClaims(reads=frozenset({"a"})), False),
    (ResourceClaims(reads=frozenset({"a"})), ResourceClaims(writes=frozenset({"a"})), True),
])
def test_resource_claims_conflicts(left: ResourceClaims, right: ResourceClaims, conflict: bool) -> None:
    """It lets two calls overlap only when neither writes what the other touches."""
    assert left.conflicts_with(right) is conflict
    assert right.conflicts_with(left) is conflict


_SAMPLES: dict[str, Any] = {"string": "s", "number": 1.5, "integer": 2, "boolean": True, "null": None,
                            "json": {"any": [1]}}


def _sample(node: dict[str, Any]) -> Any:
    if node["type"] == "object":
        return {key: _sample(child) for key, child in node["properties"].items()}
    return _SAMPLES[node["type"]]


@settings(max_examples=50, deadline=None)
@given(st.dictionaries(names, st.tuples(specs, st.booleans()), min_size=1, max_size=5), st.data())
def test_validation_properties_of_compiled_parameters(entries: dict[str, tuple[dict[str, Any], bool]],
                                                      data: st.DataObject) -> None:
    """It accepts generated valid arguments, names a dropped required key, and rejects non-objects."""
    definition = _define(parameters={key: {**node, **({"required": True} if required else {})}
                                     for key, (node, required) in entries.items()})
    validate = definition.validate_arguments
    assert validate is not None
    valid = {key: _sample(node) for key, (node, _) in entries.items()}
    assert validate(valid) == []
    required = [key for key, (_, flag) in entries.items() if flag]
    if required:
        dropped = data.draw(st.sampled_from(required))
        violations = validate({k: v for k, v in valid.items() if k != dropped})
        assert f'missing required property "{dropped}"' in violations
    non_object = data.draw(st.one_of(st.none(), st.integers(), st.text(), st.lists(st.integers())))
    assert validate(non_object) == ['"arguments" must be an object']
