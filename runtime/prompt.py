"""Prompt assembly: the tools offered to the model and the prompt sections (spec 6.3).

The offered tool list is the scope's visible set minus every name that
:func:`~codemode.runtime.modes.collapses` for a model-level call, sorted by UTF-16 code units (the wire order
providers cache on) unless a ``tool_order`` is given. Two built-in sections exist whenever the runtime default
or a scope on the chain declares a non-native presentation: ``tools:code-only`` (order 99; the one-sentence
routing rule when the effective mode collapses tools, otherwise empty) and ``tools:sdk`` (order 150; the code
runtime's SDK for the visible set minus ``run_code`` when the effective mode is not native, otherwise empty).
Empty sections stay listed but are dropped from :meth:`Prompt.text`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from codemode.sandbox.lossless import wire_order_key

from .errors import PromptError
from .modes import RUN_CODE, Mode, collapses, mode_collapses
from .registry import SectionSpec
from .scope import Scope

if TYPE_CHECKING:
    from ._runtime import ToolRuntime

__all__ = (
    "CODE_ONLY_RULE",
    "CODE_ONLY_SECTION",
    "SDK_SECTION",
    "UNLISTED_TOOLS",
    "AssembleHook",
    "Prompt",
    "Section",
    "assemble_prompt",
    "wire_order_key",
)

CODE_ONLY_SECTION: Final = "tools:code-only"
SDK_SECTION: Final = "tools:sdk"
CODE_ONLY_ORDER: Final = 99
SDK_ORDER: Final = 150
#: The ``tool_order`` marker standing for "every other offered tool, lexicographically".
UNLISTED_TOOLS: Final = "<unlisted-tools>"
CODE_ONLY_RULE: Final = (
    f"`{RUN_CODE}` is the only tool you can call directly: calling any other tool by name fails, so "
    f"reach every tool declared in the SDK below from inside a `{RUN_CODE}` program."
)


@dataclass(frozen=True, slots=True)
class Section:
    """One prompt section: sections render in ascending ``order``."""

    name: str
    order: int
    text: str

    def to_json(self) -> dict[str, Any]:
        """``{"name", "order", "text"}``."""
        return {"name": self.name, "order": self.order, "text": self.text}


@dataclass(frozen=True, slots=True)
class Prompt:
    """What the model is offered: ``tools`` (``{name, description, parameters}`` dicts) and sections."""

    tools: tuple[dict[str, Any], ...]
    sections: tuple[Section, ...]

    @property
    def tool_names(self) -> tuple[str, ...]:
        """The offered tool names in wire order."""
        return tuple(tool["name"] for tool in self.tools)

    def section(self, name: str) -> Section | None:
        """The section called ``name``, or None when absent."""
        return next((section for section in self.sections if section.name == name), None)

    def text(self) -> str:
        """The non-empty sections joined by blank lines, in order."""
        return "\n\n".join(section.text for section in self.sections if section.text)

    def to_json(self) -> dict[str, Any]:
        """The CLI shape ``{"tools": [...], "sections": [...]}``."""
        return {"tools": [dict(tool) for tool in self.tools],
                "sections": [section.to_json() for section in self.sections]}


AssembleHook = Callable[[Prompt, "Scope | None"], Prompt]


def assemble_prompt(runtime: ToolRuntime, scope: Scope | None, *,
                    tool_order: Sequence[str] | None = None) -> Prompt:
    """Assemble the prompt for ``scope`` (see the module docstring); raises on impossible requests."""
    registry = runtime._registry
    mode = registry.mode_for(scope)
    if mode is not Mode.NATIVE:
        runtime.require_code_runtime(scope)
    view = registry.view(scope)
    offered = {name: d for name, d in view.visible.items() if not collapses(name, mode, False)}
    names = sorted(offered, key=wire_order_key)
    if tool_order is not None:
        known = [n for n in (*view.known_names, RUN_CODE) if not collapses(n, mode, False)]
        if mode is Mode.NATIVE:
            known = [n for n in known if n != RUN_CODE]
        names = _apply_order(names, tool_order, known)
    tools = tuple(offered[name].schema() for name in names)
    sections: dict[str, SectionSpec | Section] = dict(registry.sections(scope))
    if registry.declares_code_presentation(scope):
        if CODE_ONLY_SECTION not in sections:
            sections[CODE_ONLY_SECTION] = _builtin(CODE_ONLY_SECTION, CODE_ONLY_ORDER,
                                                   CODE_ONLY_RULE if mode_collapses(mode) else "")
        if SDK_SECTION not in sections:
            text = "" if mode is Mode.NATIVE else runtime.render_sdk(scope)
            if mode is not Mode.NATIVE:
                runtime.bind_code(scope, text)  # (run_code checks it: spec 13.1)
            sections[SDK_SECTION] = _builtin(SDK_SECTION, SDK_ORDER, text)
    rendered: list[Section] = []
    for spec in sections.values():
        if isinstance(spec, Section):
            rendered.append(spec)
            continue
        text = spec.text(scope) if callable(spec.text) else spec.text
        if not isinstance(text, str):
            raise PromptError(f'prompt section "{spec.name}" produced {type(text).__name__}, not a string')
        rendered.append(Section(spec.name, spec.order, text))
    rendered.sort(key=lambda section: section.order)
    prompt = Prompt(tools, tuple(rendered))
    for hook in list(runtime._assemble_hooks):
        prompt = hook(prompt, scope)
        if not isinstance(prompt, Prompt):
            raise PromptError(f"an on_assemble hook returned {type(prompt).__name__}, not a Prompt")
    return prompt


def _builtin(name: str, order: int, text: str) -> Section:
    return Section(name, order, text)


def _apply_order(names: list[str], order: Sequence[str], known: Sequence[str]) -> list[str]:
    if isinstance(order, str):
        raise PromptError("tool_order must be a sequence of tool names, not a string")
    known_set = set(known)
    for name in order:
        if name != UNLISTED_TOOLS and name not in known_set:
            listed = ", ".join(sorted(known_set, key=wire_order_key)) or "(none)"
            raise PromptError(f'tool_order lists unregistered tool "{name}"; known tools: {listed}')
    offered = set(names)
    listed_names = [n for n in order if n != UNLISTED_TOOLS and n in offered]
    rest = [n for n in names if n not in set(listed_names)]
    if UNLISTED_TOOLS not in order:
        return [*listed_names, *rest]
    result: list[str] = []
    for name in order:
        if name == UNLISTED_TOOLS:
            result.extend(rest)
        elif name in offered and name not in result:
            result.append(name)
    return result
