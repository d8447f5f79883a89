"""``check_program``: type-checking a program body against the stubs, in the program's own coordinates."""

from __future__ import annotations

import gc
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import codemode.sdk.check
from codemode.sdk import Diagnostic, check_program
from codemode.sdk._text import is_method_name, json_quote
from codemode.sdk.check import HEADER_LINES
from tests.sdk.support import obj, sig

TOOLS = [
    sig(
        "read_file",
        obj({"path": {"type": "string"}, "limit": {"type": "integer", "minimum": 1}}, ["path"]),
        {"type": "string"},
        "Read a file.",
    ),
    sig(
        "list",
        obj({"dir": {"type": "string"}}),
        {"type": "array", "items": {"type": "string"}},
        "List a directory.",
    ),
    sig("fs.stat", obj({"path": {"type": "string"}}, ["path"]), obj({"size": {"type": "integer"}}, ["size"])),
    sig("count", {"type": "object"}, {"type": "integer"}),
]

GOOD_PROGRAM = """\
import asyncio

names = await tools.list({"dir": "."})
texts = await asyncio.gather(*(tools.read_file(path=name) for name in names))
stat = await tools["fs.stat"]({"path": names[0]})
total = stat["size"] + await tools.count({"anything": [1, 2]}) + await tools.count(x=1)
try:
    await tools.read_file({"path": "missing", "limit": 3})
except ToolCallError as err:
    print(err.code, err.tool_name, str(err))
def shout(text):
    return text.upper()
return {"total": total, "first": shout(texts[0])}
"""


Check = Callable[[str], list[Diagnostic]]


@pytest.fixture
def check(mypy_cache: Path) -> Check:
    """check_program against TOOLS with the session's mypy cache."""

    def run(source: str) -> list[Diagnostic]:
        return check_program(source, TOOLS, cache_dir=mypy_cache)

    return run


def _errors(found: list[Diagnostic]) -> list[Diagnostic]:
    return [item for item in found if item.severity == "error"]


def test_correct_program_passes(check: Check) -> None:
    """It reports nothing for a program using dict, keyword and subscript calls, gather and ToolCallError."""
    assert check(GOOD_PROGRAM) == []


def test_empty_and_comment_only_programs_pass(check: Check) -> None:
    """It accepts a program with no statements."""
    assert check("") == []
    assert check("# nothing to do\n") == []


@pytest.mark.parametrize("lead", [0, 1, 4, 12])
def test_wrong_argument_type_is_reported_at_the_programs_line(check: Check, lead: int) -> None:
    """It reports a wrong argument type on the program's own line, whatever precedes it."""
    source = "x = 1\n" * lead + 'text = await tools.read_file({"path": 3})\n'
    errors = _errors(check(source))
    assert [(item.line, item.code) for item in errors] == [(lead + 1, "call-overload")]
    assert errors[0].column == len("text = ") + 1 + len("await ")


def test_wrong_keyword_type_is_reported(check: Check) -> None:
    """It checks the keyword form against the same TypedDict."""
    errors = _errors(check('await tools.read_file(path="a", limit="many")\n'))
    assert [(item.line, item.code) for item in errors] == [(1, "call-overload")]


def test_missing_required_field_is_reported(check: Check) -> None:
    """It reports a call that omits a required field."""
    assert [item.line for item in _errors(check("pass\nawait tools.read_file(limit=2)\n"))] == [2]


def test_output_type_flows_into_the_program(check: Check) -> None:
    """It types a call's result by the tool's output schema."""
    errors = _errors(check('n: int = await tools.read_file(path="a")\n'))
    assert [(item.line, item.code) for item in errors] == [(1, "assignment")]


def test_unknown_tool_attribute_is_reported(check: Check) -> None:
    """It reports an undeclared tool reached by attribute."""
    errors = _errors(check("await tools.delete_everything({})\n"))
    assert [(item.line, item.code) for item in errors] == [(1, "attr-defined")]


def test_unknown_subscript_name_is_reported(check: Check) -> None:
    """It reports an undeclared tool reached by subscript and caps the overload listing."""
    found = check('await tools["nope"]({})\n')
    assert [(item.line, item.code) for item in _errors(found)] == [(1, "call-overload")]
    assert len(found) <= 1 + 6


def test_typed_dict_names_are_not_bound(check: Check) -> None:
    """It reports constructing a TypedDict stub class, since only tools and ToolCallError exist."""
    errors = _errors(check('args = ReadFileArgs(path="x")\n'))
    assert [(item.line, item.code) for item in errors] == [(1, "name-defined")]


def test_tool_call_error_attributes_are_typed(check: Check) -> None:
    """It knows ToolCallError's tool_name and code and nothing else."""
    source = "try:\n    pass\nexcept ToolCallError as err:\n    n: int = err.code\n    err.status\n"
    errors = _errors(check(source))
    assert [(item.line, item.code) for item in errors] == [(4, "assignment"), (5, "attr-defined")]


def test_tool_named_list_does_not_shadow_the_builtin(check: Check) -> None:
    """It keeps list[...] annotations working when a tool is called list."""
    assert check('names: list[str] = await tools.list(dir="/")\n') == []


def test_syntax_error_is_reported_at_its_position_without_mypy(
    check: Check, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It reports a syntax error at the program's own line and column without running the checker."""

    def refuse(*_: object) -> tuple[str, str, int]:
        raise AssertionError("mypy must not run")

    monkeypatch.setattr(codemode.sdk.check, "_run_mypy", refuse)
    assert check("x = 1\ny = (2,\n") == [Diagnostic(2, 5, "error", "'(' was never closed", "syntax")]


def test_null_bytes_are_a_syntax_error(check: Check) -> None:
    """It reports a program containing NUL as a syntax error instead of crashing."""
    found = check("x = 1\x00\n")
    assert [(item.line, item.severity, item.code) for item in found] == [(1, "error", "syntax")]


@pytest.mark.parametrize("newline", ["\r\n", "\r"])
def test_crlf_and_cr_line_breaks_map_to_the_right_line(check: Check, newline: str) -> None:
    """It counts \\r\\n and \\r as one line break each, as CPython does."""
    source = newline.join(["a = 1", "b = 2", 'await tools.read_file({"path": 1})', ""])
    assert [item.line for item in _errors(check(source))] == [3]


def test_tab_indented_program_keeps_its_structure(check: Check) -> None:
    """It indents the body so a tab-indented program stays consistent."""
    source = 'for name in ["a"]:\n\tif name:\n\t\tawait tools.read_file(path=1)\n'
    assert [(item.line, item.column) for item in _errors(check(source))] == [(3, 9)]


def test_checker_crash_is_reported_not_raised(check: Check, monkeypatch: pytest.MonkeyPatch) -> None:
    """It turns a checker failure into one error diagnostic."""

    def crash(*_: object) -> tuple[str, str, int]:
        raise RuntimeError("kaboom")

    monkeypatch.setattr(codemode.sdk.check, "_run_mypy", crash)
    [found] = check("x = 1\n")
    assert (found.line, found.severity, found.code) == (1, "error", "internal")
    assert "kaboom" in found.message


def test_checker_usage_failure_is_reported(check: Check, monkeypatch: pytest.MonkeyPatch) -> None:
    """It reports a checker that exits with status 2 and no diagnostics."""
    monkeypatch.setattr(codemode.sdk.check, "_run_mypy", lambda *_: ("", "mypy: error: bad flag\n", 2))
    assert check("x = 1\n") == [
        Diagnostic(1, 1, "error", "type checker failed: mypy: error: bad flag", "internal")
    ]


def test_header_diagnostics_are_dropped_and_trailing_ones_clamped(
    check: Check, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It drops diagnostics on wrapper lines and moves one on the trailing pass to the last line."""
    records = [
        {"file": "/x/program.py", "line": 1, "column": 0, "message": "header", "severity": "error"},
        {
            "file": "/x/program.py",
            "line": HEADER_LINES + 1,
            "column": 1,
            "message": "own",
            "severity": "error",
        },
        {
            "file": "/x/program.py",
            "line": HEADER_LINES + 3,
            "column": 1,
            "message": "tail",
            "severity": "note",
        },
        {"file": "/x/codemode_tools.pyi", "line": 9, "column": 1, "message": "stub", "severity": "error"},
    ]
    output = "".join(json.dumps(record) + "\n" for record in records) + "not json\n"
    monkeypatch.setattr(codemode.sdk.check, "_run_mypy", lambda *_: (output, "", 1))
    assert check("x = 1\ny = 2") == [
        Diagnostic(1, 1, "error", "own", None),
        Diagnostic(2, 1, "note", "tail", None),
    ]


def test_diagnostic_render() -> None:
    """It renders the CLI's path:line:column: severity: message line."""
    item = Diagnostic(3, 7, "error", "Bad thing", "arg-type")
    assert item.render("prog.py") == "prog.py:3:7: error: Bad thing  [arg-type]"
    assert Diagnostic(1, 1, "note", "More").render() == "program:1:1: note: More"


def test_warm_check_is_fast(check: Check) -> None:
    """It checks a program in well under a second once the cache is warm."""
    check(GOOD_PROGRAM)
    started = time.perf_counter()
    check(GOOD_PROGRAM.replace("names[0]", "names[-1]"))
    assert time.perf_counter() - started < 1.5


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    lead=st.lists(
        st.sampled_from(["", "# note", "x = 1", "if True:\n    y = 2", '"""doc\nstring"""']), max_size=6
    ),
    wrong=st.sampled_from(["3", "None", "[1]", "{'a': 1}", "1.5"]),
)
def test_property_wrong_argument_line(check: Check, lead: list[str], wrong: str) -> None:
    """It reports a wrong argument on its own line and passes the same program with a right one."""
    prefix = "".join(part + "\n" for part in lead)
    line = prefix.count("\n") + 1
    bad = _errors(check(prefix + f'await tools.read_file({{"path": {wrong}}})\n'))
    assert [item.line for item in bad] == [line]
    assert check(prefix + 'await tools.read_file({"path": "ok"})\n') == []


_CALLABLE_NAMES = st.lists(
    st.text(st.sampled_from("ab_-.1é"), min_size=1, max_size=5),
    min_size=1,
    max_size=5,
    unique=True,
)


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(names=_CALLABLE_NAMES)
def test_property_declared_names_are_callable_and_nothing_else(mypy_cache: Path, names: list[str]) -> None:
    """It accepts a call of every declared tool, in its declared form, and rejects an undeclared one."""
    tools = [sig(name, obj({"x": {"type": "integer"}})) for name in names]
    calls = [
        f"await tools.{name}(x=1)" if is_method_name(name) else f"await tools[{json_quote(name)}]({{}})"
        for name in names
    ]
    assert check_program("\n".join(calls), tools, cache_dir=mypy_cache) == []
    undeclared = "zz" + "".join(name for name in names if name.isidentifier())
    found = check_program(
        f"await tools.{undeclared}()\nawait tools['zz-undeclared']({{}})", tools, cache_dir=mypy_cache
    )
    assert [item.line for item in _errors(found)] == [1, 2]


def test_check_leaves_process_wide_settings_alone(check: Check) -> None:
    """It restores the recursion limit and garbage-collector settings that mypy changes while it runs."""
    before = (sys.getrecursionlimit(), gc.get_threshold(), gc.isenabled())
    check("x = 1\n")
    assert (sys.getrecursionlimit(), gc.get_threshold(), gc.isenabled()) == before


def test_non_text_program_is_a_clear_type_error(check: Check) -> None:
    """It refuses a program that is not text with a TypeError naming the type."""
    with pytest.raises(TypeError, match="not bytes"):
        check(b"x = 1")  # type: ignore[arg-type]


def test_columns_are_clamped_into_the_line(check: Check, monkeypatch: pytest.MonkeyPatch) -> None:
    """It never reports a column beyond the end of the program's line."""
    record = {
        "file": "program.py",
        "line": HEADER_LINES + 1,
        "column": 999,
        "message": "m",
        "severity": "error",
    }
    monkeypatch.setattr(codemode.sdk.check, "_run_mypy", lambda *_: (json.dumps(record) + "\n", "", 1))
    assert check("x = 1") == [Diagnostic(1, 6, "error", "m", None)]


def test_non_ascii_line_reports_the_right_line(check: Check) -> None:
    """It reports an error on a line with non-ASCII text on that line, with a column inside it."""
    source = 'é = "ééé"\nname = "路径"; text = await tools.read_file(path=3)\n'
    [error] = _errors(check(source))
    assert error.line == 2
    assert 1 <= error.column <= len(source.split("\n")[1]) + 1


@pytest.mark.parametrize(("source", "line", "needle"), [
    ("x = 1\nreturn eval('x')\n", 2, "eval() of code strings is not available"),
    ("y = ().__class__\n", 1, '"__class__" cannot be used as an attribute'),
    ("try:\n    pass\nexcept* ValueError:\n    pass\n", 1, "'except*' is not available"),
])
def test_the_sandbox_policy_is_applied(check: Check, source: str, line: int, needle: str) -> None:
    """A program the sandbox would refuse to compile fails the check at the refused line, code sandbox."""
    found = [item for item in _errors(check(source)) if item.code == "sandbox"]
    assert [(item.line, needle in item.message) for item in found] == [(line, True)]


def test_programs_the_sandbox_compiles_pass_its_policy(check: Check) -> None:
    """match, nonlocal, async for/with and _private names compile in the sandbox: no sandbox finding."""
    source = ("def f(v):\n    match v:\n        case [a, *rest]:\n            return a\n    return None\n"
              "class C:\n    def __init__(self):\n        self._x = 1\n"
              "async def g():\n    yield 1\nreturn [x async for x in g()]\n")
    assert [item for item in check(source) if item.code == "sandbox"] == []


def test_a_program_may_construct_tool_call_error(check: Check) -> None:
    """ToolCallError("message") and its optional keywords type-check, as they run in the sandbox."""
    source = ('err = ToolCallError("no results", tool_name="search", code="EMPTY")\n'
              'other = ToolCallError("plain")\nreturn [err.code, other.tool_name]\n')
    assert _errors(check(source)) == []
