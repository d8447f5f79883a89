"""Concrete tools and policy plugins: run_code, timeout policy, repeat reminder, todo_write, demo,
workspace and MCP bridge, plus the ``codemode`` command line.

Not to be confused with the ``tools`` object a sandboxed program sees (the SDK proxy).
"""

from __future__ import annotations

__all__ = ()
