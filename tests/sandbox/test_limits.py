"""SandboxLimits: one validated, frozen value of budgets with safe defaults."""

from __future__ import annotations

import math
from typing import Any

import pydantic
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sandbox import DEFAULT_LIMITS, SandboxLimits
from sandbox.limits import MIB


def test_defaults_are_the_documented_budgets() -> None:
    """It defaults to 30 s wall, 10 s CPU, 256 MiB, 1 MiB logs and result, 1000 calls, 16 MiB frames."""
    assert SandboxLimits() == DEFAULT_LIMITS
    assert (DEFAULT_LIMITS.wall_seconds, DEFAULT_LIMITS.cpu_seconds) == (30.0, 10.0)
    assert DEFAULT_LIMITS.memory_bytes == 256 * MIB
    assert (DEFAULT_LIMITS.log_bytes, DEFAULT_LIMITS.result_bytes) == (MIB, MIB)
    assert (DEFAULT_LIMITS.max_tool_calls, DEFAULT_LIMITS.frame_bytes) == (1000, 16 * MIB)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("wall_seconds", 0), ("wall_seconds", -1.0), ("wall_seconds", math.nan), ("wall_seconds", math.inf),
        ("wall_seconds", True), ("wall_seconds", "30"), ("cpu_seconds", 0.0), ("cpu_seconds", -math.inf),
        ("cpu_seconds", math.nan), ("memory_bytes", 0), ("memory_bytes", 1024), ("memory_bytes", 2.5),
        ("memory_bytes", True), ("log_bytes", -1), ("result_bytes", 0), ("max_tool_calls", -1),
        ("max_tool_calls", 1.0), ("frame_bytes", 10), ("unknown_budget", 1),
    ],
)
def test_meaningless_budgets_are_rejected(field: str, value: Any) -> None:
    """It refuses zero, negative, NaN, infinite, mistyped and unknown budgets with a named error."""
    with pytest.raises(pydantic.ValidationError, match=field):
        SandboxLimits(**{field: value})


def test_frames_must_be_able_to_carry_a_result_within_budget() -> None:
    """It refuses a frame budget too small for a result that fits the result budget."""
    with pytest.raises(pydantic.ValidationError, match="frame_bytes"):
        SandboxLimits(result_bytes=8 * MIB, frame_bytes=8 * MIB)
    assert SandboxLimits(result_bytes=8 * MIB, frame_bytes=9 * MIB).frame_bytes == 9 * MIB


def test_limits_are_frozen_and_replace_validates() -> None:
    """It cannot be mutated; replace() builds a validated copy."""
    limits = SandboxLimits()
    with pytest.raises(pydantic.ValidationError):
        limits.wall_seconds = 1.0  # type: ignore[misc]
    shorter = limits.replace(wall_seconds=2)
    assert shorter.wall_seconds == 2.0 and shorter.cpu_seconds == limits.cpu_seconds
    with pytest.raises(pydantic.ValidationError):
        limits.replace(cpu_seconds=-1)


@given(
    wall=st.floats(min_value=1e-3, max_value=1e6), cpu=st.floats(min_value=1e-3, max_value=1e6),
    memory=st.integers(min_value=32 * MIB, max_value=2**40), calls=st.integers(min_value=0, max_value=10**6),
)
def test_every_positive_finite_budget_is_accepted_and_round_trips(
        wall: float, cpu: float, memory: int, calls: int) -> None:
    """It accepts any positive finite budget and survives a JSON round trip unchanged."""
    limits = SandboxLimits(wall_seconds=wall, cpu_seconds=cpu, memory_bytes=memory, max_tool_calls=calls)
    assert SandboxLimits.model_validate_json(limits.model_dump_json()) == limits
