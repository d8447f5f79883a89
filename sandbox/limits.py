"""Per-run budgets of the sandbox: one validated, immutable value with safe defaults.

Every budget is on by default. A run may override any of them (``Sandbox.run(limits=...)``); the
resulting value is checked here once, so the host and the worker never see a negative, zero, NaN or
infinite budget. The value crosses the process boundary as JSON (the worker applies the CPU and memory
budgets to itself): :meth:`SandboxLimits.as_dict` is its lossless form and ``SandboxLimits(**that)``
reads it back.

It is a frozen dataclass with explicit checks rather than a pydantic model: importing pydantic and
building a model's schema cost every host process ~0.1 s at start, for seven numbers.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Final

from .errors import SandboxLimitsError

__all__ = (
    "DEFAULT_LIMITS",
    "MIB",
    "SandboxLimits",
)

MIB: Final = 1024 * 1024
_FRAME_OVERHEAD: Final = 1024

#: The least value of each integer budget.
_INT_MINIMA: Final = {"memory_bytes": 32 * MIB, "log_bytes": 64, "result_bytes": 16, "max_tool_calls": 0,
                      "frame_bytes": 4096}


@dataclasses.dataclass(frozen=True, slots=True, init=False)
class SandboxLimits:
    """The budgets of one run; each field names the failure kind that tripping it reports.

    - ``wall_seconds``: host-side wall clock from the run request to the result (kind ``timeout``).
    - ``cpu_seconds``: CPU time of the worker process, enforced by ``RLIMIT_CPU`` (kind ``cpu-limit``).
    - ``memory_bytes``: address space of the worker, enforced by ``RLIMIT_AS`` (kind ``memory-limit``).
    - ``log_bytes``: UTF-8 bytes of log text kept; the rest is replaced by one truncation marker.
    - ``result_bytes``: compact JSON size of the returned value (kind ``output-limit``).
    - ``max_tool_calls``: tool calls one run may issue (kind ``call-limit``).
    - ``frame_bytes``: largest protocol frame the host accepts from the worker (kind ``protocol``).

    Seconds are finite positive numbers (an ``int`` is taken as seconds); the other budgets are exact
    ``int`` values (never ``bool``) at or above their minimum. Anything else, and any unknown name,
    raises :class:`SandboxLimitsError`.
    """

    wall_seconds: float
    cpu_seconds: float
    memory_bytes: int
    log_bytes: int
    result_bytes: int
    max_tool_calls: int
    frame_bytes: int

    def __init__(self, *, wall_seconds: float = 30.0, cpu_seconds: float = 10.0,
                 memory_bytes: int = 256 * MIB, log_bytes: int = 1 * MIB, result_bytes: int = 1 * MIB,
                 max_tool_calls: int = 1000, frame_bytes: int = 16 * MIB, **unknown: object) -> None:
        if unknown:
            names = ", ".join(sorted(unknown))
            raise SandboxLimitsError(f"unknown budget {names}; known: {', '.join(_FIELDS)}")
        values = {"wall_seconds": _seconds("wall_seconds", wall_seconds),
                  "cpu_seconds": _seconds("cpu_seconds", cpu_seconds),
                  "memory_bytes": memory_bytes, "log_bytes": log_bytes, "result_bytes": result_bytes,
                  "max_tool_calls": max_tool_calls, "frame_bytes": frame_bytes}
        for name, least in _INT_MINIMA.items():
            _check_int(name, values[name], least)
        if frame_bytes < result_bytes + _FRAME_OVERHEAD:
            raise SandboxLimitsError(
                f"frame_bytes ({frame_bytes}) must exceed result_bytes ({result_bytes}) by at least "
                f"{_FRAME_OVERHEAD} bytes, or a result within its budget could not be sent")
        for name, value in values.items():
            object.__setattr__(self, name, value)

    def replace(self, **changes: Any) -> SandboxLimits:
        """A copy with some fields changed, validated like a fresh value."""
        return SandboxLimits(**{**self.as_dict(), **changes})

    def as_dict(self) -> dict[str, float | int]:
        """The budgets as a JSON object (``SandboxLimits(**limits.as_dict()) == limits``)."""
        return {name: getattr(self, name) for name in _FIELDS}


_FIELDS: Final = tuple(field.name for field in dataclasses.fields(SandboxLimits))


def _seconds(name: str, value: object) -> float:
    if type(value) is int:
        value = float(value)
    if type(value) is not float:
        raise SandboxLimitsError(f"{name} must be a number of seconds, not {type(value).__name__}")
    if not math.isfinite(value) or value <= 0:
        raise SandboxLimitsError(f"{name} must be a finite number of seconds above 0, not {value!r}")
    return value


def _check_int(name: str, value: object, least: int) -> None:
    if type(value) is not int:
        raise SandboxLimitsError(f"{name} must be an int, not {type(value).__name__}")
    if value < least:
        raise SandboxLimitsError(f"{name} must be at least {least}, not {value}")


DEFAULT_LIMITS: Final = SandboxLimits()
