"""Presentation modes and the one collapse predicate.

* ``native``: the model calls every visible tool directly.
* ``code``: the model calls only ``run_code``; every other tool is reachable from inside the program.
* ``both``: both routes are open.

:func:`collapses` is the single rule deciding that a model-level call is reachable only from code. The
offered tool list, the ``tools:code-only`` and ``tools:sdk`` prompt sections and the executor's
rejection are all computed from it and from the same effective-mode lookup
(:meth:`codemode.runtime.ToolRuntime.mode_for`); there is no second copy of the rule.

The code runtime seam (:class:`CodeRuntime`) supplies the reserved ``run_code`` definition and renders
the SDK section; without one, a non-native mode fails with
:class:`~codemode.runtime.errors.CodeRuntimeMissingError` naming the scope's effective mode.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final, Protocol, runtime_checkable

from .errors import ConfigError

if TYPE_CHECKING:
    from ._runtime import ToolRuntime
    from .definitions import ToolDefinition

__all__ = (
    "KNOWN_LANGUAGES",
    "MODES",
    "RUN_CODE",
    "RUN_CODE_OUTPUT_SCHEMA",
    "RUN_CODE_PARAMETERS",
    "CodeRuntime",
    "Mode",
    "collapses",
    "mode_collapses",
    "parse_mode",
)

#: The reserved Code Mode transport tool: never registrable, restrictable or shadowable.
RUN_CODE: Final = "run_code"

#: ``run_code``'s parameters (the registry's schema form) and output schema, whatever runs the program
#: (a code runtime's ``run_code``, or the stand-in that fails when none is configured).
RUN_CODE_PARAMETERS: Final[dict[str, Any]] = {
    "code": {"type": "string", "required": True,
             "description": "The program: the body of an async Python function."},
    "description": {"type": "string", "required": True, "description": (
        "What the program does, as a clear active-voice summary of 5-10 words shown in the UI, e.g. "
        "\"Count TODO markers per source file\", \"Summarise the three release notes\", \"Rename the draft "
        "files in docs\".")},
}
RUN_CODE_OUTPUT_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "logs": {"type": "array", "items": {"type": "string"}},
        "result": {"description": "The program's return value, when it returned one."},
    },
    "required": ["logs"],
}

#: Program languages this project can present (the SDK and the ``run_code`` flavour are Python).
KNOWN_LANGUAGES: Final = ("python",)


class Mode(enum.StrEnum):
    """How a scope's tools are presented to the model."""

    NATIVE = "native"
    CODE = "code"
    BOTH = "both"


#: The mode names, as a command line offers them.
MODES: Final = tuple(mode.value for mode in Mode)


def parse_mode(mode: object) -> Mode:
    """Accept a :class:`Mode` or its string value; anything else is a :class:`ConfigError`."""
    if isinstance(mode, Mode):
        return mode
    try:
        return Mode(str(mode)) if isinstance(mode, str) else Mode("\0")
    except ValueError:
        raise ConfigError(f'mode must be "native", "code" or "both", not {mode!r}') from None


def mode_collapses(mode: Mode) -> bool:
    """True when ``mode`` routes every tool except ``run_code`` through code (only ``code`` does)."""
    return mode is Mode.CODE


def collapses(name: str, mode: Mode, nested: bool) -> bool:
    """True exactly when a call of ``name`` is reachable only from inside a ``run_code`` program.

    That is: the call is model-level (``nested`` is False: no parent token), the scope's effective
    ``mode`` collapses tools, and ``name`` is not ``run_code`` itself. The runtime method
    ``rt.collapses(name, scope, nested)`` resolves the effective mode and calls this.
    """
    return not nested and name != RUN_CODE and mode_collapses(mode)


@runtime_checkable
class CodeRuntime(Protocol):
    """The seam to a code runtime (``codemode.tools.run_code.PythonCodeRuntime`` implements it)."""

    @property
    def language(self) -> str:
        """The program language, e.g. ``"python"`` (must be in :data:`KNOWN_LANGUAGES`)."""
        ...

    def run_code_definition(self, runtime: ToolRuntime) -> ToolDefinition:
        """Build the reserved ``run_code`` tool (called lazily, once per runtime)."""
        ...

    def render_sdk(self, definitions: Sequence[ToolDefinition]) -> str:
        """The ``tools:sdk`` section body declaring ``definitions`` (the visible set minus run_code)."""
        ...
