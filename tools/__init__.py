"""Concrete tools and policy plugins: :class:`CodeMode` (the one entry object), run_code, timeout policy,
repeat reminder, todo_write, demo, workspace and MCP bridge, provider adapters, plus the ``codemode``
command line.

Not to be confused with the ``tools`` object a sandboxed program sees (the SDK proxy).

The MCP names (``McpBridge``, ``serve_stdio``, ...) are imported on first use: the ``mcp`` SDK is heavy
and most users of this package never touch it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from codemode.sandbox._lazy import lazy_exports

from ._codemode import CodeMode as CodeMode
from .demo import demo_tools as demo_tools
from .providers import AnthropicMessages as AnthropicMessages
from .providers import ModelReply as ModelReply
from .providers import OpenAIChat as OpenAIChat
from .providers import OpenAIResponses as OpenAIResponses
from .providers import ProviderAdapter as ProviderAdapter
from .repeat_reminder import RepeatReminder as RepeatReminder
from .repeat_reminder import install_repeat_reminder as install_repeat_reminder
from .run_code import PythonCodeRuntime as PythonCodeRuntime
from .run_code import render_run_output as render_run_output
from .run_code import signature_of as signature_of
from .timeout_policy import TOOL_STALLED_EVENT as TOOL_STALLED_EVENT
from .timeout_policy import TimeoutPolicy as TimeoutPolicy
from .timeout_policy import install_timeout_policy as install_timeout_policy
from .todo_write import latest_todos as latest_todos
from .todo_write import todo_write_tool as todo_write_tool
from .toolsets import default_toolset as default_toolset
from .workspace import Workspace as Workspace
from .workspace import WorkspaceLimits as WorkspaceLimits
from .workspace import workspace_tools as workspace_tools

if TYPE_CHECKING:
    from .mcp_bridge import McpBridge as McpBridge
    from .mcp_bridge import UpstreamServer as UpstreamServer
    from .mcp_bridge import add_serve_arguments as add_serve_arguments
    from .mcp_bridge import parse_upstream as parse_upstream
    from .mcp_bridge import run_serve as run_serve
    from .mcp_bridge import serve_stdio as serve_stdio

#: The names imported on first use, and where they live.
_HOMES = dict.fromkeys(
    ("McpBridge", "UpstreamServer", "add_serve_arguments", "parse_upstream", "run_serve", "serve_stdio"),
    ".mcp_bridge")

__all__ = (  # noqa: RUF022 (plain sorted order, as tests/test_public_api.py checks)
    "AnthropicMessages",
    "CodeMode",
    "McpBridge",
    "ModelReply",
    "OpenAIChat",
    "OpenAIResponses",
    "ProviderAdapter",
    "PythonCodeRuntime",
    "RepeatReminder",
    "TOOL_STALLED_EVENT",
    "TimeoutPolicy",
    "UpstreamServer",
    "Workspace",
    "WorkspaceLimits",
    "add_serve_arguments",
    "default_toolset",
    "demo_tools",
    "install_repeat_reminder",
    "install_timeout_policy",
    "latest_todos",
    "parse_upstream",
    "render_run_output",
    "run_serve",
    "serve_stdio",
    "signature_of",
    "todo_write_tool",
    "workspace_tools",
)


__getattr__, __dir__ = lazy_exports(__name__, _HOMES)
