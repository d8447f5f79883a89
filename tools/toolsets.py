"""The built-in toolset (what the command line and ``codemode serve`` offer unless told otherwise)."""

from __future__ import annotations

from pathlib import Path

from codemode.runtime import ToolDefinition

from .demo import demo_tools
from .todo_write import todo_write_tool
from .workspace import workspace_tools

__all__ = ("default_toolset",)


def default_toolset(workspace: str | Path = ".") -> list[ToolDefinition]:
    """The demo tools, the workspace tools rooted at ``workspace``, and ``todo_write``.

    Each call builds fresh definitions, so per-runtime state (the demo counter) is never shared.
    """
    return [*demo_tools(), *workspace_tools(workspace), todo_write_tool(allow_parallel_in_progress=False)]
