"""Toolsets for the command line: the built-in one, and user toolsets named ``module:attr``."""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from codemode.runtime import ToolDefinition, UsageError

from .demo import demo_tools
from .todo_write import todo_write_tool
from .workspace import workspace_tools

__all__ = ("default_toolset", "load_toolset")


def default_toolset(workspace: str | Path = ".") -> list[ToolDefinition]:
    """The demo tools, the workspace tools rooted at ``workspace``, and ``todo_write``.

    Each call builds fresh definitions, so per-runtime state (the demo counter) is never shared.
    """
    return [*demo_tools(), *workspace_tools(workspace), todo_write_tool(allow_parallel_in_progress=False)]


def _resolve(spec: str) -> tuple[Any, str]:
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise UsageError(
            f"--toolset {spec!r} must look like MODULE:ATTR, e.g. codemode.tools.demo:demo_tools")
    try:
        target: Any = importlib.import_module(module_name)
    except Exception as exc:
        raise UsageError(f"--toolset {spec!r}: cannot import {module_name!r}: {exc}") from None
    for part in attr.split("."):
        if not hasattr(target, part):
            raise UsageError(f"--toolset {spec!r}: {module_name!r} has no attribute {attr!r}")
        target = getattr(target, part)
    return target, attr


def load_toolset(spec: str) -> list[ToolDefinition]:
    """The definitions named by ``module:attr``: a definition list, or a callable returning one.

    Raises :class:`codemode.runtime.UsageError` with a message naming the spec and what is wrong with it.
    """
    target, attr = _resolve(spec)
    if callable(target) and not isinstance(target, ToolDefinition):
        try:
            target = target()
        except Exception as exc:
            raise UsageError(f"--toolset {spec!r}: calling {attr}() failed: {exc}") from None
    items = [target] if isinstance(target, ToolDefinition) else target
    if not isinstance(items, Iterable) or isinstance(items, str | bytes):
        raise UsageError(f"--toolset {spec!r} is not a list of tool definitions")
    found = list(items)
    bad = sorted({type(item).__name__ for item in found if not isinstance(item, ToolDefinition)})
    if bad:
        raise UsageError(f"--toolset {spec!r} is not a list of tool definitions (it holds {', '.join(bad)})")
    return found
