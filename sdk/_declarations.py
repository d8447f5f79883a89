"""The declaration model shared by the prompt section and the ``.pyi`` stub (spec 8.1, 8.2).

:func:`declare` sorts the tools, allocates every class name and renders every type exactly once, so the
two renderings cannot disagree about names or types. Allocation order is fixed: tools in UTF-16
code-unit order of their names, each tool's arguments before its output, a class's name before its
nested classes (which are *declared* before it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import groupby

from codemode.sdk._schema import ClassNamer, RootType, class_base, render_root
from codemode.sdk._text import camel_case, is_method_name, utf16_key
from codemode.sdk.signature import ToolSignature

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


_FINGERPRINT_BUDGET = 10_000


def _fingerprint(value: object) -> str:
    """A bounded, order-stable text for tie-breaking duplicate names (never expands a DAG fully)."""
    out: list[str] = []
    stack: list[object] = [value]
    while stack and len(out) < _FINGERPRINT_BUDGET:
        item = stack.pop()
        if isinstance(item, Mapping):
            try:
                pairs = [(repr(key), child) for key, child in item.items()]
                entries = sorted(pairs, key=lambda pair: pair[0])
            except Exception:
                out.append("<unreadable>")
                continue
            out.append("{")
            for key, child in reversed(entries):
                stack.append(child)
                stack.append(_Token(key))
        elif isinstance(item, list | tuple):
            out.append("[")
            stack.extend(reversed(item))
        elif isinstance(item, _Token):
            out.append(item.text)
        else:
            scalar = isinstance(item, str | int | float | bool)
            out.append(f"{type(item).__name__}:{item!r}" if scalar else "?")
    return "\x00".join(out)


@dataclass(frozen=True, slots=True)
class _Token:
    text: str


def _as_text(value: object) -> str:
    return value if isinstance(value, str) else str(value)


def _name_key(signature: ToolSignature) -> bytes:
    return utf16_key(_as_text(getattr(signature, "name", "")))


def _tie_key(signature: ToolSignature) -> tuple[str, str, str]:
    return (
        _fingerprint(getattr(signature, "description", "")),
        _fingerprint(getattr(signature, "parameters", None)),
        _fingerprint(getattr(signature, "output_schema", None)),
    )


def _ordered(signatures: Iterable[ToolSignature]) -> list[ToolSignature]:
    """Signatures by name in UTF-16 order; same-named ones (rare) by content, so order never matters.

    Entries without a ``name`` attribute are not signatures and are skipped.
    """
    ordered: list[ToolSignature] = []
    named = [signature for signature in signatures if hasattr(signature, "name")]
    for _, group in groupby(sorted(named, key=_name_key), key=_name_key):
        members = list(group)
        ordered.extend(sorted(members, key=_tie_key) if len(members) > 1 else members)
    return ordered


def declare(signatures: Iterable[ToolSignature], *, checker: bool = False) -> Declarations:
    """Build the declaration model; byte-stable for the same set of tools in any order.

    ``checker=True`` builds the variant for type checkers (see :func:`codemode.sdk._schema.render_root`).

    A second signature with an already-seen name is ignored (a runtime never holds two).
    """
    ordered = _ordered(signatures)
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
        parameters = getattr(signature, "parameters", None)
        output_schema = getattr(signature, "output_schema", None)
        args = render_root(parameters, class_base(camel + "Args"), namer, checker=checker)
        output = render_root(output_schema, class_base(camel + "Output"), namer, checker=checker)
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
