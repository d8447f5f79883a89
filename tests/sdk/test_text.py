"""Text safety: identifiers, class-name parts, quoting, number formatting, comments and docstrings."""

from __future__ import annotations

import ast
import keyword

import pytest
from hypothesis import given
from hypothesis import strategies as st

from codemode.sdk._text import (
    HARD_KEYWORDS,
    camel_case,
    cap_utf16,
    comment_text,
    docstring_text,
    is_bare_identifier,
    is_field_name,
    is_method_name,
    js_number,
    json_quote,
    literal_value,
    utf16_key,
)

ANY_TEXT = st.text(st.characters(exclude_categories=()), max_size=40)


def test_hard_keywords_are_the_interpreters_keywords_plus_debug() -> None:
    """It treats exactly the hard keywords and __debug__ as unusable names."""
    assert frozenset(keyword.kwlist) | {"__debug__"} == HARD_KEYWORDS
    assert not set(keyword.softkwlist) & HARD_KEYWORDS


@pytest.mark.parametrize(
    ("name", "method"),
    [
        ("read_file", True),
        ("match", True),
        ("type", True),
        ("路径", True),
        ("class", False),
        ("my-mcp.tool", False),
        ("_private", False),
        ("__dunder__", False),
        ("ﬁeld", False),
        ("1st", False),
        ("", False),
        ("__debug__", False),
    ],
)
def test_is_method_name(name: str, method: bool) -> None:
    """It admits bare, NFKC-stable, non-keyword names without a leading underscore."""
    assert is_method_name(name) is method


@pytest.mark.parametrize(
    ("name", "field"),
    [("path", True), ("_id", True), ("__meta__", True), ("__token", False), ("def", False), ("a-b", False)],
)
def test_is_field_name(name: str, field: bool) -> None:
    """It refuses keywords, non-identifiers and name-mangled fields but keeps dunders."""
    assert is_field_name(name) is field


def test_is_bare_identifier_rejects_nfkc_unstable_names() -> None:
    """It rejects a name CPython would silently normalise to another."""
    assert "ﬁeld".isidentifier()
    assert not is_bare_identifier("ﬁeld")


@pytest.mark.parametrize(
    ("text", "camel"),
    [
        ("read_file", "ReadFile"),
        ("my-mcp.tool", "MyMcpTool"),
        ("1st-tool", "1stTool"),
        ("___", ""),
        ("ab", "Ab"),
    ],
)
def test_camel_case(text: str, camel: str) -> None:
    """It splits on non-identifier characters and underscores and upper-cases each head."""
    assert camel_case(text) == camel


def test_cap_utf16_never_splits_an_astral_character() -> None:
    """It counts astral characters as two units and stops before one that would not fit."""
    assert cap_utf16("ab\U0001d400c", 3) == "ab"
    assert cap_utf16("ab\U0001d400c", 4) == "ab\U0001d400"
    assert cap_utf16("abc", 10) == "abc"


def test_utf16_key_orders_by_code_units() -> None:
    """It sorts an astral name before a U+FFxx name, as UTF-16 code units do."""
    names = ["\uff41", "\U0001d400"]
    assert sorted(names, key=utf16_key) == ["\U0001d400", "\uff41"]
    assert sorted(names) == ["\uff41", "\U0001d400"]


@pytest.mark.parametrize(
    ("text", "quoted"),
    [
        ('say "hi"', '"say \\"hi\\""'),
        ("back\\slash", '"back\\\\slash"'),
        ("\b\f\n\r\t", '"\\b\\f\\n\\r\\t"'),
        ("\x01\x1f", '"\\u0001\\u001f"'),
        ("\ud800", '"\\ud800"'),
        ("\x7f\u2028é", '"\x7f\u2028é"'),
    ],
)
def test_json_quote_escapes_like_javascript(text: str, quoted: str) -> None:
    """It escapes quotes, backslashes, C0 and lone surrogates and leaves everything else raw."""
    assert json_quote(text) == quoted


@given(ANY_TEXT)
def test_json_quote_is_a_python_literal_of_the_same_value(text: str) -> None:
    """It always yields a Python string literal that evaluates back to the text."""
    assert ast.literal_eval(json_quote(text)) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1, "1"),
        (1.0, "1"),
        (-3, "-3"),
        (1.5, "1.5"),
        (1e-7, "1e-7"),
        (1e-6, "0.000001"),
        (0.001234, "0.001234"),
        (123.456, "123.456"),
        (-0.5, "-0.5"),
        (2**60, "1152921504606846976"),
        (float(2**60), "1152921504606846976"),
        (1e21, "1000000000000000000000"),
        (1.234e-10, "1.234e-10"),
    ],
)
def test_js_number(value: float, text: str) -> None:
    """It formats like JavaScript but prints every digit of an integral value."""
    assert js_number(value) == text


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_js_number_round_trips(value: float) -> None:
    """It always prints a number that reads back as the same value."""
    assert float(js_number(value)) == value


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (True, "True"),
        (False, "False"),
        (None, "None"),
        ("a", '"a"'),
        (7, "7"),
        (float("nan"), None),
        ([1], None),
    ],
)
def test_literal_value(value: object, text: str | None) -> None:
    """It renders JSON scalars for Literal[...] and refuses everything else."""
    assert literal_value(value) == text


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("  Read\ta\n\nfile.  ", "Read a file."),
        ("a\u00a0\ufeff\u2028\u2029\u3000b", "a b"),
        ("bell\x07 del\x7f c1\x85", "bell\\x07 del\\x7f c1\\x85"),
        ("fs\x1c", "fs\\x1c"),
        ("lone\udc00", "lone\\udc00"),
        ("   ", ""),
        (None, ""),
        (42, ""),
    ],
)
def test_comment_text(raw: object, clean: str) -> None:
    """It collapses JavaScript whitespace, escapes controls and surrogates, trims, and ignores non-text."""
    assert comment_text(raw) == clean


def test_docstring_text_escapes_quotes_and_backslashes() -> None:
    """It doubles backslashes and escapes every double quote."""
    assert docstring_text('say "hi" \\ \x01') == 'say \\"hi\\" \\\\ \\\\x01'


@given(ANY_TEXT)
def test_comment_and_docstring_text_are_always_one_safe_line(text: str) -> None:
    """It always yields one line that sits safely in a comment and in a docstring."""
    comment = comment_text(text)
    assert len(f"# {comment}".splitlines()) == 1
    comment.encode("utf-8")
    doc = docstring_text(text)
    assert ast.literal_eval(f'"""{doc}"""') == comment
