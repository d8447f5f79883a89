"""A toolset whose ``kill_template`` tool SIGKILLs the sandbox template of the process it runs in.

The CLI and MCP tests load it with ``--toolset tests.reliability._chaos_tools:toolset`` to kill the template
from inside a run, where the test cannot reach the sandbox object: the template is this (host) process's
child started as ``python -I -c <bootstrap>``, found through ``/proc``. Also: the demo tools.
"""

from __future__ import annotations

import os
import signal
from typing import Any

from codemode.runtime import ToolDefinition, ToolOutput, define_tool, text_block
from codemode.tools.demo import demo_tools

__all__ = ("template_pids", "toolset")

_TEMPLATE_MARK = b"codemode.sandbox._template"


def template_pids(parent: int | None = None) -> list[int]:
    """Pids of the sandbox templates that are children of ``parent`` (default: this process)."""
    parent = os.getpid() if parent is None else parent
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
            with open(f"/proc/{name}/cmdline", "rb") as handle:
                command = handle.read()
        except OSError:
            continue
        if int(fields[1]) == parent and fields[0] != b"Z" and _TEMPLATE_MARK in command:
            found.append(int(name))
    return found


async def _kill_template(args: Any, ctx: Any) -> Any:
    pids = template_pids()
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    return {"killed": pids}


def toolset() -> list[ToolDefinition]:
    """The demo tools plus ``kill_template``."""
    kill = define_tool(
        name="kill_template", description="SIGKILL this process's sandbox template (fault injection).",
        parameters={}, output=ToolOutput(schema={"type": "object"}, render=lambda a, v: [text_block("ok")]),
        execute=_kill_template)
    return [*demo_tools(), kill]
