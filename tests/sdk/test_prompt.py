"""The ``tools:sdk`` section: spec 8.1's structure and every rendering case of spec 8.4 (adapted)."""

from __future__ import annotations

import ast
import random
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codemode.runtime import errors as runtime_errors
from codemode.sdk import ToolSignature, render_python_sdk
from codemode.sdk._declarations import tool_camel
from codemode.sdk._text import is_method_name, json_quote
from codemode.sdk.prompt import ERROR_CODES, INSTRUCTIONS
from tests.sdk.support import TOOL_SETS, declaration, fenced, obj, sig, signatures

PINNED_PHRASES = (
    "## Writing code for run_code",
    "exactly two of the names declared below are bound: `tools` and `ToolCallError`",
    "never `FooArgs(field=1)`, which raises `NameError`",
    "MAY overlap under `asyncio.gather`",
    "two required arguments",
    "top-level `await`",
    "lossless JSON",
    "`await tools.name(key=value)`",
    "`err.code`",
    "`err.tool_name`",
)


def _tools_body(text: str) -> list[str]:
    lines = text.split("\n")
    start = lines.index("class Tools(Protocol):")
    end = lines.index("tools: Tools")
    return lines[start + 1 : end - 1]


@pytest.mark.parametrize("phrase", PINNED_PHRASES)
def test_instructions_contain_the_pinned_phrases(phrase: str) -> None:
    """It says each fact the reference's tests pin, in Python terms."""
    assert phrase in INSTRUCTIONS


def test_section_structure() -> None:
    """It is the instruction block, a blank line, then one fenced python block."""
    section = render_python_sdk([sig("echo")])
    assert section.startswith(INSTRUCTIONS + "\n\n```python\n")
    assert section.endswith("\n```")
    assert INSTRUCTIONS.endswith("The available tools:")


def test_error_codes_are_runtime_codes() -> None:
    """It names only codes that the runtime's error tree really uses."""
    codes = {cls.code for cls in runtime_errors.all_error_classes()}
    assert set(ERROR_CODES) <= codes
    for code in ERROR_CODES:
        assert f"`{code}`" in INSTRUCTIONS


def test_tool_call_error_declares_tool_name_and_code() -> None:
    """It declares ToolCallError with a tool_name and a machine-readable code."""
    assert "class ToolCallError(Exception):\n    tool_name: str\n    code: str\n" in declaration(sig("x"))


def test_method_vs_subscript_routing() -> None:
    """It declares identifier tools as methods and the rest (dots, keywords) as subscript comments."""
    text = declaration(sig("read_file"), sig("my-mcp.tool"), sig("class"))
    body = _tools_body(text)
    assert body == [
        '    # tools["class"](args: dict[str, Any]) -> Any',
        '    # tools["my-mcp.tool"](args: dict[str, Any]) -> Any',
        "    async def read_file(self, args: dict[str, Any]) -> Any: ...",
    ]


def test_run_code_names_both_required_arguments() -> None:
    """It names the code and description arguments of run_code."""
    assert "two required arguments: `code`" in INSTRUCTIONS
    assert "`description`" in INSTRUCTIONS


def test_required_fields_not_required_fields_comments_and_minimal_imports() -> None:
    """It marks optional fields NotRequired, writes description comments and imports only what it uses."""
    schema = obj(
        {"path": {"type": "string", "description": "Where."}, "limit": {"type": "integer"}},
        ["path"],
        additionalProperties=False,
    )
    text = declaration(sig("read", schema, {"type": "string"}, "Read it."))
    assert text.startswith("from typing import NotRequired, Protocol, TypedDict\n")
    assert "class ReadArgs(TypedDict):\n    # Where.\n    path: str\n    limit: NotRequired[int]\n\n" in text
    assert '    async def read(self, args: ReadArgs) -> str:\n        """Read it."""' in text


def test_tool_prefix_and_malformed_args() -> None:
    """It prefixes Tool to names that cannot start a class and renders broken arguments as Any."""
    text = declaration(
        sig("1st-tool", obj({"a": {"type": "string"}})), sig("bad", {"type": "object", "properties": 7})
    )
    assert "class Tool1stToolArgs(TypedDict):" in text
    assert '# tools["1st-tool"](args: Tool1stToolArgs) -> Any' in text
    assert "async def bad(self, args: Any) -> Any: ..." in text


def test_missing_required_array_makes_every_field_optional() -> None:
    """It treats a schema without required as all-optional."""
    text = declaration(sig("t", obj({"a": {"type": "string"}, "b": {"type": "integer"}})))
    assert "    a: NotRequired[str]\n    b: NotRequired[int]\n" in text


def test_enum_field_renders_a_literal() -> None:
    """It renders a string enum field as a Literal."""
    schema = obj({"mode": {"type": "string", "enum": ["fast", "slow"]}}, ["mode"], additionalProperties=False)
    text = declaration(sig("t", schema, {"type": "string"}))
    assert '    mode: Literal["fast", "slow"]\n' in text
    assert text.startswith("from typing import Literal, Protocol, TypedDict\n")


def test_nested_and_item_classes_are_declared_before_their_users() -> None:
    """It declares nested object and array-item classes before the class that uses them."""
    schema = obj(
        {
            "filter": obj({"field": {"type": "string"}}, ["field"]),
            "sorts": {"type": "array", "items": obj({"key": {"type": "string"}}, ["key"])},
        },
        ["filter"],
    )
    text = declaration(sig("query", schema))
    order = [
        text.index(f"class {name}(TypedDict):") for name in ("QueryArgsFilter", "QueryArgsSorts", "QueryArgs")
    ]
    assert order == sorted(order)
    assert "    filter: QueryArgsFilter\n    sorts: NotRequired[list[QueryArgsSorts]]\n" in text


def test_one_of_objects_renders_numbered_classes() -> None:
    """It renders a oneOf of objects as a union of numbered classes."""
    output = {
        "oneOf": [obj({"ok": {"type": "boolean"}}, ["ok"]), obj({"error": {"type": "string"}}, ["error"])]
    }
    text = declaration(sig("act", output=output))
    assert "async def act(self, args: dict[str, Any]) -> ActOutput1 | ActOutput2: ..." in text
    assert "class ActOutput1(TypedDict):\n    ok: bool\n" in text
    assert "class ActOutput2(TypedDict):\n    error: str\n" in text


def test_collision_suffixes_for_tools_sharing_a_camel_name() -> None:
    """It suffixes colliding class names with 2, 3, ..."""
    schema = obj({"a": {"type": "string"}})
    text = declaration(sig("my_tool", schema), sig("my-tool", schema), sig("myTool", schema))
    assert '# tools["my-tool"](args: MyToolArgs) -> Any' in text
    assert "async def myTool(self, args: MyToolArgs2) -> Any: ..." in text
    assert "async def my_tool(self, args: MyToolArgs3) -> Any: ..." in text


def test_collision_counter_skips_names_taken_by_siblings() -> None:
    """It skips a suffixed name that a sibling already took."""
    leaf = obj({"x": {"type": "string"}})
    schema = obj({"phase_2": leaf, "phase": leaf | {"description": "one"}, "Phase": dict(leaf)})
    text = declaration(sig("foo", schema))
    assert "    phase_2: NotRequired[FooArgsPhase2]\n" in text
    assert "    phase: NotRequired[FooArgsPhase]\n" in text
    assert "    Phase: NotRequired[FooArgsPhase3]\n" in text


def test_class_names_are_capped_at_120_units() -> None:
    """It cuts long class-name bases to 120 UTF-16 units, then suffixes collisions."""
    name = "a" * 200
    text = declaration(sig(name, obj({"x": obj({"y": {"type": "string"}})})))
    stem = "A" + "a" * 119
    assert f"class {stem}(TypedDict):" in text
    assert f"class {stem}2(TypedDict):" in text
    assert all(len(line) < 300 for line in text.splitlines() if line.startswith("class "))


def test_class_name_cap_never_splits_an_astral_character() -> None:
    """It drops an astral character that would straddle the 120-unit cap instead of splitting it."""
    assert tool_camel("a" * 118 + "\U00020000") == "A" + "a" * 117 + "\U00020000"
    assert tool_camel("a" * 119 + "\U00020000") == "A" + "a" * 118
    text = declaration(sig("a" * 119 + "\U00020000", obj({"x": {"type": "string"}})))
    assert f"class A{'a' * 118}A(TypedDict):" in text


def test_subscript_tools_reference_their_typed_dicts() -> None:
    """It gives subscript-only tools the same typed argument classes."""
    text = declaration(sig("fs.read", obj({"path": {"type": "string"}}, ["path"]), {"type": "string"}))
    assert "class FsReadArgs(TypedDict):" in text
    assert '    # tools["fs.read"](args: FsReadArgs) -> str' in text


@pytest.mark.parametrize("field", ["my-field", "class", "__token", "__debug__", "ﬁeld", "1x"])
def test_illegal_field_name_degrades_the_whole_object(field: str) -> None:
    """It renders an object with a field that cannot be a TypedDict key as dict[str, Any]."""
    text = declaration(sig("t", obj({"ok": {"type": "string"}, field: {"type": "string"}})))
    assert "async def t(self, args: dict[str, Any]) -> Any: ..." in text
    assert "TypedDict" not in text


@pytest.mark.parametrize("field", ["match", "case", "type", "_", "__meta__", "路径", "_id"])
def test_legal_field_names_are_kept(field: str) -> None:
    """It keeps soft keywords, dunders, underscores and non-ASCII identifiers as fields."""
    text = declaration(sig("t", obj({field: {"type": "string"}})))
    assert f"    {field}: NotRequired[str]\n" in text


@pytest.mark.parametrize("name", ["match", "case", "type", "路径"])
def test_soft_keyword_and_non_ascii_tools_are_methods(name: str) -> None:
    """It declares soft-keyword and non-ASCII identifier tools as methods."""
    assert f"    async def {name}(self, " in declaration(sig(name))


def test_nfkc_unstable_tool_name_is_subscript_only() -> None:
    """It routes a name that NFKC would change through subscript access."""
    text = declaration(sig("ﬁle"))
    assert '    # tools["ﬁle"](args: dict[str, Any]) -> Any' in text
    assert "class FileArgs" not in text


@pytest.mark.parametrize("name", ["a\u200cb", "\u200cab", "ab\u200c"])
def test_zwnj_routing_follows_the_interpreter(name: str) -> None:
    """It makes a ZWNJ name a method exactly when this interpreter accepts it as an identifier."""
    body = "\n".join(_tools_body(declaration(sig(name))))
    assert ("async def" in body) is (name.isidentifier() and not name.startswith("\u200c"))
    assert not body.startswith("    async def \u200c")


def test_docstring_is_the_first_statement_of_the_method() -> None:
    """It places the one-line description as the method's docstring."""
    tree = ast.parse(declaration(sig("echo", description="Echo it back.")))
    tools_class = next(node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "Tools")
    method = tools_class.body[0]
    assert isinstance(method, ast.AsyncFunctionDef)
    assert ast.get_docstring(method) == "Echo it back."


def test_subscript_comments_interleave_with_methods_by_name() -> None:
    """It orders methods and subscript comments together by tool name."""
    body = _tools_body(declaration(sig("b"), sig("a-x"), sig("c.y"), sig("a")))
    names = [line.split("(")[0].split()[-1] if "async def" in line else line for line in body]
    assert names == [
        "a",
        '    # tools["a-x"](args: dict[str, Any]) -> Any',
        "b",
        '    # tools["c.y"](args: dict[str, Any]) -> Any',
    ]


def test_rendering_is_deterministic_for_any_input_order() -> None:
    """It renders byte-identical text for the same tools in any order."""
    tools = [sig(f"t{index}", obj({"x": {"type": "string"}}), description=f"T{index}") for index in range(12)]
    expected = render_python_sdk(tools)
    rng = random.Random(7)
    for _ in range(5):
        shuffled = tools[:]
        rng.shuffle(shuffled)
        assert render_python_sdk(shuffled) == expected


def test_empty_tool_set() -> None:
    """It renders an empty set as a Protocol with only pass."""
    assert declaration() == (
        "from typing import Protocol\n\n"
        "class ToolCallError(Exception):\n    tool_name: str\n    code: str\n\n"
        "class Tools(Protocol):\n    pass\n\ntools: Tools"
    )


@pytest.mark.parametrize("description", ["", "   ", "\n\t\u00a0", "\u2028"])
def test_blank_descriptions_are_omitted(description: str) -> None:
    """It writes no docstring or comment for a blank description."""
    text = declaration(sig("a", description=description), sig("b-c", description=description))
    assert "    async def a(self, args: dict[str, Any]) -> Any: ..." in text
    assert '    # tools["b-c"](args: dict[str, Any]) -> Any\n\ntools' in text


def test_openness_comment_and_closed_empty_class() -> None:
    """It notes that open objects allow more keys and renders a closed empty object as an empty class."""
    text = declaration(
        sig("open", obj({"a": {"type": "string"}})),
        sig("shut", {"type": "object", "additionalProperties": False}),
    )
    assert (
        "class OpenArgs(TypedDict):\n    a: NotRequired[str]\n"
        "    # Additional keys beyond those declared are allowed.\n" in text
    )
    assert "class ShutArgs(TypedDict):\n    pass\n" in text


def test_subscript_only_set_starts_with_pass() -> None:
    """It starts the Tools body with pass when no tool is a method."""
    assert _tools_body(declaration(sig("a-b"), sig("_c")))[0] == "    pass"


@pytest.mark.parametrize("name", ["_private", "__dunder__", "_"])
def test_underscore_tools_are_subscript_only(name: str) -> None:
    """It routes every underscore-leading tool name through subscript access."""
    text = declaration(sig(name))
    assert f"    # tools[{json_quote(name)}](args: dict[str, Any]) -> Any" in text
    assert "async def _" not in text


@pytest.mark.parametrize(
    ("description", "docstring", "comment"),
    [
        ('say "hi"', 'say \\"hi\\"', 'say "hi"'),
        ("a\\b", "a\\\\b", "a\\b"),
        ("bell\x07", "bell\\\\x07", "bell\\x07"),
        ("lone\ud800", "lone\\\\ud800", "lone\\ud800"),
        ('end"', 'end\\"', 'end"'),
        ('"""', '\\"\\"\\"', '"""'),
    ],
)
def test_description_escaping(description: str, docstring: str, comment: str) -> None:
    """It escapes quotes, backslashes, controls and surrogates in docstrings and comments."""
    text = declaration(sig("m", description=description), sig("s-t", description=description))
    assert f'        """{docstring}"""' in text
    assert f"    #   {comment}" in text
    tree = ast.parse(text)
    tools_class = next(node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "Tools")
    method = tools_class.body[0]
    assert isinstance(method, ast.AsyncFunctionDef)
    assert ast.get_docstring(method, clean=False) == comment


def test_literal_escaping() -> None:
    """It JSON-quotes string literals with JavaScript escaping and keeps other text raw."""
    values = ['q"', "b\\", "nl\n", "c\x01", "s\ud800", "raw\x7f\u2028é"]
    text = declaration(sig("t", obj({"v": {"type": "string", "enum": values}}, ["v"])))
    line = next(item for item in text.split("\n") if item.startswith("    v: "))
    assert line == '    v: Literal["q\\"", "b\\\\", "nl\\n", "c\\u0001", "s\\ud800", "raw\x7f\u2028é"]'
    tree = ast.parse(text)
    assert tree.body


def test_big_integer_literals_print_exact_digits() -> None:
    """It prints integral numbers beyond 2**53 with every digit."""
    schema = {"type": "integer", "enum": [2**60, 10**21, -(2**70), 1e21]}
    text = declaration(sig("t", obj({"n": schema}, ["n"])))
    assert "    n: Literal[1152921504606846976, 1000000000000000000000, -1180591620717411303424]\n" in text


def test_two_thousand_tools_render_quickly() -> None:
    """It renders a large tool set in well under a second per thousand tools."""
    tools = [
        sig(f"tool_{index}", obj({"x": {"type": "string"}}, ["x"]), description="d") for index in range(2000)
    ]
    started = time.perf_counter()
    text = render_python_sdk(tools)
    assert time.perf_counter() - started < 3.0
    assert text.count("async def tool_") == 2000


# -- properties ----------------------------------------------------------------------------------


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(TOOL_SETS, st.randoms(use_true_random=False))
def test_property_deterministic_and_parses(raw: list[tuple[str, str, Any, Any]], rng: random.Random) -> None:
    """It renders byte-identical, parseable, UTF-8-encodable text for any tools in any order."""
    tools = signatures(raw)
    section = render_python_sdk(tools)
    shuffled = tools[:]
    rng.shuffle(shuffled)
    assert render_python_sdk(shuffled) == section
    section.encode("utf-8")
    ast.parse(fenced(section))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(TOOL_SETS)
def test_property_every_tool_is_declared_once_in_the_right_form(raw: list[tuple[str, str, Any, Any]]) -> None:
    """It declares each method-eligible name as an async def and every other name as a subscript comment."""
    body = _tools_body(declaration(*signatures(raw)))
    for name, _, _, _ in raw:
        methods = [line for line in body if line.startswith(f"    async def {name}(self, args: ")]
        comments = [line for line in body if line.startswith(f"    # tools[{json_quote(name)}](args: ")]
        if is_method_name(name):
            assert (len(methods), len(comments)) == (1, 0)
        else:
            assert (len(methods), len(comments)) == (0, 1)


def test_non_signatures_are_skipped_and_odd_fields_tolerated() -> None:
    """It skips entries that are not signatures and renders odd field values without raising."""
    odd = ToolSignature(name=5, description=None, parameters=None, output_schema=[])  # type: ignore[arg-type]
    text = declaration(None, "text", odd)  # type: ignore[arg-type]
    assert _tools_body(text) == ["    pass", '    # tools["5"](args: Any) -> Any']


def test_duplicate_names_keep_one_declaration_whatever_the_order() -> None:
    """It declares a repeated name once, choosing the same signature for any input order."""
    first, second = sig("dup", description="one"), sig("dup", description="two")
    assert declaration(first, second) == declaration(second, first)
    assert declaration(first, second).count("async def dup(") == 1


def test_the_sandbox_rules_fit_in_six_lines() -> None:
    """The section says what programs can import, reach, return and not use, in at most six lines."""
    from codemode.sandbox.facades import ALLOWED_MODULES
    from codemode.sdk.prompt import SANDBOX_RULES

    assert SANDBOX_RULES in INSTRUCTIONS
    assert len(SANDBOX_RULES.splitlines()) <= 6
    for name in ALLOWED_MODULES:
        assert name in SANDBOX_RULES
    for phrase in ("no file, network, process or environment access", "`open`", "`exec`/`eval`",
                   "`await asyncio.sleep`", "`sorted(a_set)`", "dunder attributes"):
        assert phrase in SANDBOX_RULES
