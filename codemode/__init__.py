"""codemode: the model answers with one sandboxed async Python program that calls tools.

The distribution installs this one import name. Its four parts are subpackages:

- :mod:`codemode.runtime`: tool definitions, the registry, the five-stage pipeline, the scheduler,
  modes and the event log;
- :mod:`codemode.sandbox`: the restricted interpreter, the isolated worker processes and their
  protocol and limits;
- :mod:`codemode.sdk`: the prompt section, ``.pyi`` stubs and the program checker;
- :mod:`codemode.tools`: concrete tools and policies (``run_code``, the timeout policy, the repeat
  reminder, ``todo_write``, demo and workspace tools, the MCP bridge) and the command line.

The names an integrator needs first are re-exported here. They are imported on first use (PEP 562),
so ``import codemode`` stays cheap and loads neither the sandbox's host side nor the interpreter.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .runtime import Agent as Agent
    from .runtime import ToolCallRequest as ToolCallRequest
    from .runtime import ToolOutput as ToolOutput
    from .runtime import ToolResult as ToolResult
    from .runtime import ToolRuntime as ToolRuntime
    from .runtime import define_tool as define_tool
    from .sandbox import Sandbox as Sandbox
    from .sandbox import SandboxLimits as SandboxLimits
    from .tools import PythonCodeRuntime as PythonCodeRuntime

#: Where each public name lives (a subpackage of this package).
_HOMES: dict[str, str] = {
    "Agent": "runtime",
    "PythonCodeRuntime": "tools",
    "Sandbox": "sandbox",
    "SandboxLimits": "sandbox",
    "ToolCallRequest": "runtime",
    "ToolOutput": "runtime",
    "ToolResult": "runtime",
    "ToolRuntime": "runtime",
    "define_tool": "runtime",
}

__all__ = (
    "Agent",
    "PythonCodeRuntime",
    "Sandbox",
    "SandboxLimits",
    "ToolCallRequest",
    "ToolOutput",
    "ToolResult",
    "ToolRuntime",
    "define_tool",
)


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'codemode' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{home}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
