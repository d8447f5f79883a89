"""Error codes are stable, unique strings."""

from __future__ import annotations

import re

from codemode.runtime import errors


def test_codes_are_unique_upper_snake_strings() -> None:
    """It gives every error class its own code."""
    classes = errors.all_error_classes()
    codes = [cls.code for cls in classes]
    assert len(codes) == len(set(codes)), codes
    assert all(re.fullmatch(r"[A-Z][A-Z_]+", code) for code in codes)


def test_pinned_codes_keep_their_values() -> None:
    """It keeps the codes that users and the reference script against."""
    assert errors.ToolNotFoundError.code == "UNKNOWN_TOOL"
    assert errors.ToolArgsError.code == "INVALID_ARGS"
    assert errors.ToolOutputError.code == "INVALID_TOOL_OUTPUT"
    assert errors.JsonSchemaError.code == "UNSUPPORTED_SCHEMA"
    assert errors.AbortedError.code == "ABORTED"
    assert errors.AbortedBeforeDispatchError.code == "ABORTED_BEFORE_DISPATCH"
    assert errors.ToolTimeoutError.code == "TOOL_TIMEOUT"
    assert errors.CodeRunFailedError.code == "CODE_RUN_FAILED"


def test_messages_follow_the_reference_wording() -> None:
    """It builds the pinned message texts from structured fields."""
    assert str(errors.ToolTimeoutError(250)) == "tool call timed out after 250ms"
    assert str(errors.ToolArgsError(["a", "b"])) == "invalid arguments: a; b"
    assert str(errors.CodeRunFailedError("timeout", "wall", ["x"])) == (
        "code run failed (timeout): wall\nCaptured output:\nx"
    )
