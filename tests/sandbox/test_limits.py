"""SandboxLimits: one validated, frozen value of budgets with safe defaults."""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from codemode.sandbox import DEFAULT_LIMITS, SandboxLimits, SandboxLimitsError, SandboxUsageError
from codemode.sandbox.limits import MIB


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
    with pytest.raises(SandboxLimitsError, match=field) as caught:
        SandboxLimits(**{field: value})
    assert isinstance(caught.value, SandboxUsageError) and isinstance(caught.value, ValueError)
    assert caught.value.code == "SANDBOX_LIMITS"


def test_frames_must_be_able_to_carry_a_result_within_budget() -> None:
    """It refuses a frame budget too small for a result that fits the result budget."""
    with pytest.raises(SandboxLimitsError, match="frame_bytes"):
        SandboxLimits(result_bytes=8 * MIB, frame_bytes=8 * MIB)
    assert SandboxLimits(result_bytes=8 * MIB, frame_bytes=9 * MIB).frame_bytes == 9 * MIB


def test_limits_are_frozen_and_replace_validates() -> None:
    """It cannot be mutated; replace() builds a validated copy."""
    limits = SandboxLimits()
    with pytest.raises(dataclasses.FrozenInstanceError):
        limits.wall_seconds = 1.0  # type: ignore[misc]
    shorter = limits.replace(wall_seconds=2)
    assert shorter.wall_seconds == 2.0 and type(shorter.wall_seconds) is float
    assert shorter.cpu_seconds == limits.cpu_seconds
    with pytest.raises(SandboxLimitsError):
        limits.replace(cpu_seconds=-1)
    with pytest.raises(SandboxLimitsError, match="unknown budget"):
        limits.replace(wall=1)
    assert {limits, SandboxLimits()} == {DEFAULT_LIMITS}  # (hashable, compared by value)


@given(
    wall=st.floats(min_value=1e-3, max_value=1e6), cpu=st.floats(min_value=1e-3, max_value=1e6),
    memory=st.integers(min_value=32 * MIB, max_value=2**40), calls=st.integers(min_value=0, max_value=10**6),
)
def test_every_positive_finite_budget_is_accepted_and_round_trips(
        wall: float, cpu: float, memory: int, calls: int) -> None:
    """It accepts any positive finite budget and survives a JSON round trip unchanged."""
    limits = SandboxLimits(wall_seconds=wall, cpu_seconds=cpu, memory_bytes=memory, max_tool_calls=calls)
    assert SandboxLimits(**json.loads(json.dumps(limits.as_dict()))) == limits


def test_importing_the_limits_needs_no_pydantic() -> None:
    """The limits are plain Python: a host process pays nothing at start for validation machinery."""
    probe = "import sys, codemode.sandbox.limits; print('pydantic' in sys.modules)"
    found = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert found.stdout.strip() == "False"
