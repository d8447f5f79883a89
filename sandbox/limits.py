"""Per-run budgets of the sandbox: one validated, immutable value with safe defaults.

Every budget is on by default. A run may override any of them (``Sandbox.run(limits=...)``); the
resulting value is checked here once, so the host and the worker never see a negative, zero, NaN or
infinite budget. The value crosses the process boundary (the worker applies the CPU and memory
budgets to itself), so it is a frozen pydantic model with a lossless JSON form.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = (
    "DEFAULT_LIMITS",
    "MIB",
    "SandboxLimits",
)

MIB = 1024 * 1024
_FRAME_OVERHEAD = 1024


class SandboxLimits(BaseModel):
    """The budgets of one run; each field names the failure kind that tripping it reports.

    - ``wall_seconds``: host-side wall clock from the run request to the result (kind ``timeout``).
    - ``cpu_seconds``: CPU time of the worker process, enforced by ``RLIMIT_CPU`` (kind ``cpu-limit``).
    - ``memory_bytes``: address space of the worker, enforced by ``RLIMIT_AS`` (kind ``memory-limit``).
    - ``log_bytes``: UTF-8 bytes of log text kept; the rest is replaced by one truncation marker.
    - ``result_bytes``: compact JSON size of the returned value (kind ``output-limit``).
    - ``max_tool_calls``: tool calls one run may issue (kind ``call-limit``).
    - ``frame_bytes``: largest protocol frame the host accepts from the worker (kind ``protocol``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    wall_seconds: float = Field(default=30.0, gt=0)
    cpu_seconds: float = Field(default=10.0, gt=0)
    memory_bytes: int = Field(default=256 * MIB, ge=32 * MIB)
    log_bytes: int = Field(default=1 * MIB, ge=64)
    result_bytes: int = Field(default=1 * MIB, ge=16)
    max_tool_calls: int = Field(default=1000, ge=0)
    frame_bytes: int = Field(default=16 * MIB, ge=4096)

    @field_validator("wall_seconds", "cpu_seconds", mode="before")
    @classmethod
    def _finite_seconds(cls, value: Any) -> Any:
        # Ints are accepted as seconds (strict mode would refuse them); bools are not numbers.
        if type(value) is int:
            value = float(value)
        if type(value) is float and not math.isfinite(value):
            raise ValueError("must be a finite number of seconds")
        return value

    @model_validator(mode="after")
    def _frames_hold_results(self) -> SandboxLimits:
        if self.frame_bytes < self.result_bytes + _FRAME_OVERHEAD:
            raise ValueError(f"frame_bytes ({self.frame_bytes}) must exceed result_bytes "
                             f"({self.result_bytes}) by at least {_FRAME_OVERHEAD} bytes, or a result "
                             "within its budget could not be sent")
        return self

    def replace(self, **changes: Any) -> SandboxLimits:
        """A copy with some fields changed, validated like a fresh value."""
        return SandboxLimits(**{**self.model_dump(), **changes})


DEFAULT_LIMITS = SandboxLimits()
