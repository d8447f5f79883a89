"""codemode: the model answers with one sandboxed async Python program that calls tools.

The distribution installs this one import name. Its five parts are subpackages:

- :mod:`codemode.runtime`: tool definitions, the registry, the five-stage pipeline, the scheduler,
  modes and the event log;
- :mod:`codemode.sandbox`: the restricted interpreter, the isolated worker processes and their
  protocol and limits;
- :mod:`codemode.sdk`: the prompt section, ``.pyi`` stubs and the program checker;
- :mod:`codemode.tools`: concrete tools and policies (``run_code``, the timeout policy, the repeat
  reminder, ``todo_write``, demo and workspace tools, provider adapters) and :class:`CodeMode`;
- :mod:`codemode.app`: the command line and the MCP bridge (``codemode serve``), built on ``CodeMode``.

The names an integrator needs first are re-exported here: ``tool`` (a typed function becomes a tool) and
``CodeMode`` (the sandbox, the code runtime and the tool runtime in one ``async with``) first of all.
They are imported on first use (PEP 562), so ``import codemode`` stays cheap and loads neither the
sandbox's host side, nor the interpreter, nor pydantic (which ``tool`` uses when it builds a tool).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .sandbox._lazy import lazy_exports

if TYPE_CHECKING:
    from .runtime import Agent as Agent
    from .runtime import LifecycleError as LifecycleError
    from .runtime import ToolCallRequest as ToolCallRequest
    from .runtime import ToolContext as ToolContext
    from .runtime import ToolDefinition as ToolDefinition
    from .runtime import ToolOutput as ToolOutput
    from .runtime import ToolResult as ToolResult
    from .runtime import ToolRuntime as ToolRuntime
    from .runtime import define_tool as define_tool
    from .runtime import tool as tool
    from .sandbox import Sandbox as Sandbox
    from .sandbox import SandboxLimits as SandboxLimits
    from .tools import CodeMode as CodeMode
    from .tools import PythonCodeRuntime as PythonCodeRuntime

#: Where each public name lives (a subpackage of this package); ``__all__`` is derived from it, and
#: tests/test_public_api.py checks that the ``TYPE_CHECKING`` imports above say the same.
_HOMES: dict[str, str] = {
    "Agent": ".runtime",
    "CodeMode": ".tools",
    "LifecycleError": ".runtime",
    "PythonCodeRuntime": ".tools",
    "Sandbox": ".sandbox",
    "SandboxLimits": ".sandbox",
    "ToolCallRequest": ".runtime",
    "ToolContext": ".runtime",
    "ToolDefinition": ".runtime",
    "ToolOutput": ".runtime",
    "ToolResult": ".runtime",
    "ToolRuntime": ".runtime",
    "define_tool": ".runtime",
    "tool": ".runtime",
}

__all__ = tuple(sorted(_HOMES))
__getattr__, __dir__ = lazy_exports(__name__, _HOMES)
