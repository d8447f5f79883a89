"""Tool results: frozen parts, constructors, the CLI projection."""

from __future__ import annotations

import pytest

from codemode.runtime import ToolErrorInfo, ToolResult, text_of
from codemode.sandbox.lossless import LosslessJsonError


def test_success_and_failure_constructors_freeze_everything() -> None:
    """It snapshots and freezes every part of a constructed result."""
    value = {"a": [1]}
    ok = ToolResult.success(value, [{"type": "text", "text": "x"}], meta={"m": 1})
    value["a"].append(2)
    assert ok.value == {"a": [1]} and ok.code is None
    with pytest.raises(TypeError):
        ok.value["a"].append(3)
    bad = ToolResult.failure("DENIED", "no")
    assert (bad.is_error, bad.value, bad.error, bad.text) == (True, None, ToolErrorInfo("DENIED", "no"),
                                                               "Error: no")
    with pytest.raises(LosslessJsonError):
        ToolResult.success({"x": float("nan")}, [])


def test_to_json_is_the_cli_shape() -> None:
    """It projects is_error/value/content/error as plain JSON."""
    assert ToolResult.failure("X", "m").to_json() == {
        "is_error": True, "value": None, "content": [{"type": "text", "text": "Error: m"}],
        "error": {"code": "X", "message": "m"}}


def test_text_of_renders_non_text_blocks() -> None:
    """It joins text blocks and names other blocks by type."""
    assert text_of([{"type": "text", "text": "a"}, {"type": "image"}, "junk"]) == "a\n[image content]"
