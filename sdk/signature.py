"""The SDK's input value: what it needs to know about one tool, independent of the runtime's types."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ("ToolSignature",)


def _empty() -> Mapping[str, Any]:
    return {}


@dataclass(frozen=True, slots=True)
class ToolSignature:
    """One tool as the SDK renders it.

    The integrator adapts its own definitions to this value (the runtime's ``ToolDefinition`` becomes
    ``ToolSignature(name=d.name, description=d.description, parameters=<compiled parameter schema>,
    output_schema=d.output.schema)``). Schemas are read, never modified, and may be anything: the
    renderers are total and degrade what they cannot express.
    """

    name: str
    """The tool's registered name (any string; non-identifiers are reached by subscript)."""
    description: str = ""
    """Free text; collapsed to one line for the docstring or comment."""
    parameters: Mapping[str, Any] = field(default_factory=_empty)
    """JSON Schema of the arguments object."""
    output_schema: Mapping[str, Any] = field(default_factory=_empty)
    """JSON Schema of the value a successful call resolves to (``{}`` means any JSON)."""
