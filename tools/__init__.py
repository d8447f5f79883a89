"""Concrete tools and policy plugins: :class:`CodeMode` (the one entry object), run_code, timeout policy,
repeat reminder, todo_write, demo and workspace tools, the built-in toolset, provider adapters.

Not to be confused with the ``tools`` object a sandboxed program sees (the SDK proxy). The command line
and the MCP bridge live in :mod:`codemode.app`.
"""

from __future__ import annotations

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

__all__ = (  # noqa: RUF022 (plain sorted order, as tests/test_public_api.py checks)
    "AnthropicMessages",
    "CodeMode",
    "ModelReply",
    "OpenAIChat",
    "OpenAIResponses",
    "ProviderAdapter",
    "PythonCodeRuntime",
    "RepeatReminder",
    "TOOL_STALLED_EVENT",
    "TimeoutPolicy",
    "Workspace",
    "WorkspaceLimits",
    "default_toolset",
    "demo_tools",
    "install_repeat_reminder",
    "install_timeout_policy",
    "latest_todos",
    "render_run_output",
    "signature_of",
    "todo_write_tool",
    "workspace_tools",
)

