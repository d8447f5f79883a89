"""The declaration model shared by the prompt section and the ``.pyi`` stub (spec 8.1, 8.2).

:func:`declare` sorts the tools, allocates every class name and renders every type exactly once, so the
two renderings cannot disagree about names or types. Allocation order is fixed: tools in UTF-16
code-unit order of their names, each tool's arguments before its output, a class's name before its
nested classes (which are *declared* before it).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

from sdk._schema import ClassNamer, RootType, class_base, render_root
from sdk._text import camel_case, is_method_name, utf16_key
from sdk.signature import ToolSignature

__all__ = ("Declarations", "ToolDeclaration", "declare", "tool_camel")

TYPING_ORDER = ("Any", "Literal", "NotRequired", "Protocol", "TypedDict")


@dataclass(frozen=True, slots=True)
class ToolDeclaration:
    """One tool, ready to print."""

    name: str
    """The tool's name as registered."""
    method: bool
    """Whether it is declared as ``async def <name>``; otherwise it is reached as ``tools[<name>]``."""
    camel: str
    """The class-name stem derived from the name (``my-tool`` -> ``MyTool``)."""
    description: object
    """The raw description (the printers sanitise it for their context)."""
    args: RootType
    output: RootType


@dataclass(frozen=True, slots=True)
class Declarations:
    """Everything a printer needs, in print order."""

    tools: tuple[ToolDeclaration, ...]
    classes: tuple[str, ...]
    """Every ``TypedDict`` block, nested classes before their users."""
    typing_names: tuple[str, ...]
    """The used subset of ``Any, Literal, NotRequired, Protocol, TypedDict`` in that order."""


def tool_camel(name: str) -> str:
    """The class-name stem of a tool: CamelCase, ``Tool``-prefixed when it cannot start a name."""
    return class_base(camel_case(name))


def _fingerprint(value: object) -> str:
    try:
        return json.dumps(value, sort_keys=True, default=repr)
    except (TypeError, ValueError, RecursionError):
        return ""


def _as_text(value: object) -> str:
    return value if isinstance(value, str) else str(value)


def _sort_key(signature: ToolSignature) -> tuple[bytes, str, str, str]:
    name = _as_text(getattr(signature, "name", ""))
    return (
        utf16_key(name),
        _fingerprint(getattr(signature, "description", "")),
        _fingerprint(getattr(signature, "parameters", None)),
        _fingerprint(getattr(signature, "output_schema", None)),
    )


def declare(signatures: Iterable[ToolSignature]) -> Declarations:
    """Build the declaration model; byte-stable for the same set of tools in any order.

    A second signature with an already-seen name is ignored (a runtime never holds two).
    """
    ordered = sorted(signatures, key=_sort_key)
    namer = ClassNamer()
    seen: set[str] = set()
    tools: list[ToolDeclaration] = []
    classes: list[str] = []
    used: set[str] = {"Protocol"}
    for signature in ordered:
        name = _as_text(getattr(signature, "name", ""))
        if name in seen:
            continue
        seen.add(name)
        camel = tool_camel(name)
        args = render_root(getattr(signature, "parameters", None), class_base(camel + "Args"), namer)
        output = render_root(getattr(signature, "output_schema", None), class_base(camel + "Output"), namer)
        for rendered in (args, output):
            classes.extend(rendered.classes)
            used.update(rendered.used)
        tools.append(
            ToolDeclaration(
                name=name,
                method=is_method_name(name),
                camel=camel,
                description=getattr(signature, "description", ""),
                args=args,
                output=output,
            )
        )
    return Declarations(
        tools=tuple(tools),
        classes=tuple(classes),
        typing_names=tuple(item for item in TYPING_ORDER if item in used),
    )
