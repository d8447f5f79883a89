"""Shared helpers for the SDK tests: building signatures and cutting the fenced block out of a section."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sdk import ToolSignature, render_python_sdk

OBJECT: dict[str, Any] = {"type": "object"}


def sig(
    name: str,
    parameters: Mapping[str, Any] | None = None,
    output: Mapping[str, Any] | None = None,
    description: str = "",
) -> ToolSignature:
    """A signature with an open-object argument schema and an any-JSON output unless given."""
    return ToolSignature(
        name=name,
        description=description,
        parameters=OBJECT if parameters is None else parameters,
        output_schema={} if output is None else output,
    )


def fenced(section: str) -> str:
    """The Python text inside the section's ```python fence."""
    head, _, rest = section.partition("```python\n")
    assert head, "section has no instruction block"
    body, _, tail = rest.rpartition("\n```")
    assert tail == "", "section must end with the closing fence"
    return body


def declaration(*signatures: ToolSignature) -> str:
    """The fenced declaration for ``signatures``."""
    return fenced(render_python_sdk(signatures))


def obj(properties: Mapping[str, Any], required: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    """An object schema."""
    schema: dict[str, Any] = {"type": "object", "properties": dict(properties), **extra}
    if required is not None:
        schema["required"] = required
    return schema
