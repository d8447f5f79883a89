"""``codemode run`` helpers: live progress on stderr, the child-call table and the ``--json`` shape.

Kept apart from :mod:`codemode.app.cli` so the parser module stays small; nothing here parses arguments.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TextIO, TypeVar

import anyio

from codemode.runtime import Agent, ToolCall, ToolContext, ToolResult
from codemode.sandbox import RunResult
from codemode.sandbox.lossless import thaw

__all__ = ("RunReport", "dispatch_rows", "format_table", "run_json")

T = TypeVar("T")

#: A child call still running after this many seconds gets a "started" line on the progress stream.
STARTED_AFTER_S = 1.0


@dataclass
class RunReport:
    """What one ``codemode run`` observed: the sandbox outcome, child-call timings, live progress.

    ``progress`` (stderr unless ``--quiet``) receives each log line and each settled child call as it
    happens, so a long program is never silent; a child call still running after
    ``started_after_s`` gets a "started" line while :meth:`watching` runs the program.
    """

    progress: TextIO | None = None
    outcome: RunResult | None = None
    started_after_s: float = STARTED_AFTER_S
    started: dict[str, float] = field(default_factory=dict)
    elapsed_ms: dict[str, float] = field(default_factory=dict)
    running: dict[str, str] = field(default_factory=dict)  # call id -> tool name, until it settles

    def on_log(self, ctx: ToolContext, line: str) -> None:
        if self.progress is not None:  # one printed text may hold several lines: each is prefixed
            print("\n".join(f"  | {part}" for part in line.split("\n")), file=self.progress, flush=True)

    async def watching(self, work: Callable[[], Awaitable[T]]) -> T:
        """Run ``work()`` while announcing child calls that run longer than ``started_after_s``."""
        if self.progress is None:
            return await work()
        outcome: list[T] = []
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(self._announce_slow_calls)
                try:
                    outcome.append(await work())
                finally:
                    group.cancel_scope.cancel()
        except BaseExceptionGroup as failed:  # the announcer never fails: this is work()'s own error
            if len(failed.exceptions) == 1:
                raise failed.exceptions[0] from None
            raise
        return outcome[0]

    async def _announce_slow_calls(self) -> None:
        announced: set[str] = set()
        while True:
            await anyio.sleep(min(0.1, self.started_after_s / 2))
            now = time.perf_counter()
            for call_id, name in list(self.running.items()):
                age = now - self.started[call_id]
                if call_id not in announced and age >= self.started_after_s:
                    announced.add(call_id)
                    print(f"  > {call_id} {name} started, still running after {age:.1f} s",
                          file=self.progress, flush=True)

    def on_run(self, ctx: ToolContext, outcome: RunResult) -> None:
        self.outcome = outcome

    async def around(self, call: ToolCall, call_next: Any) -> ToolResult:
        """An around_execute hook timing child calls (those with a parent token)."""
        if call.parent is None:
            result: ToolResult = await call_next()
            return result
        start = time.perf_counter()
        self.started[call.call_id] = start
        self.running[call.call_id] = call.name
        try:
            result = await call_next()
        finally:
            self.running.pop(call.call_id, None)
        elapsed = (time.perf_counter() - start) * 1000
        self.elapsed_ms[call.call_id] = elapsed
        if self.progress is not None:
            status = result.error.code if result.is_error and result.error else "ok"
            print(f"  > {call.call_id} {call.name} {status} {elapsed:.1f} ms", file=self.progress, flush=True)
        return result


def dispatch_rows(agent: Agent) -> list[dict[str, Any]]:
    """The settled child calls of the agent's log: ``{"call_id", "name", "parent", "is_error"}``."""
    return [
        {"call_id": event.data["sub_call_id"], "name": event.data["name"],
         "parent": event.data["parent_call_id"], "is_error": bool(event.data["is_error"])}
        for event in agent.events.events if event.type == "tool/code-dispatch"
    ]


def format_table(rows: list[dict[str, Any]], elapsed_ms: dict[str, float]) -> str:
    """A compact fixed-width table of child calls with their timings."""
    header = ("call", "tool", "status", "ms")
    lines = [(row["call_id"], row["name"], "error" if row["is_error"] else "ok",
              f"{elapsed_ms.get(row['call_id'], 0.0):.1f}") for row in rows]
    widths = [max(len(str(item[i])) for item in [header, *lines]) for i in range(4)]
    out = []
    for item in [header, *lines]:
        out.append("  ".join(str(cell).ljust(width) if i < 3 else str(cell).rjust(width)
                             for i, (cell, width) in enumerate(zip(item, widths, strict=True))))
    return "\n".join(out)


def run_json(result: ToolResult, report: RunReport, agent: Agent) -> dict[str, Any]:
    """The pinned ``codemode run --json`` object."""
    outcome = report.outcome
    logs: list[str] = list(outcome.logs) if outcome is not None else []
    value = thaw(result.value) if not result.is_error else None
    error: dict[str, str] | None = None
    if result.is_error:
        if outcome is not None and outcome.error is not None:
            error = {"kind": outcome.error.kind, "message": outcome.error.message}
        else:
            info = result.error
            error = {"kind": (info.code if info else "TOOL_FAILED").lower().replace("_", "-"),
                     "message": info.message if info else "run_code failed"}
    return {
        "is_error": result.is_error,
        "logs": value["logs"] if value is not None else logs,
        "result": value.get("result") if value is not None else None,
        "error": error,
        "dispatches": dispatch_rows(agent),
    }


def default_progress(quiet: bool) -> TextIO | None:
    return None if quiet else sys.stderr
