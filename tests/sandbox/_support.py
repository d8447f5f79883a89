"""Helpers shared by the host-side sandbox tests (private to the tests)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Sequence
from typing import Any

import anyio

from codemode.sandbox import ISOLATION_LAYERS, RunResult, Sandbox, SandboxLimits, ToolCallFailure
from codemode.sandbox.lossless import JsonValue

#: The plain-CPython executor: programs run unrestricted inside a real, isolated worker.
STANDIN = "tests.sandbox._standin"
#: Every isolation layer (what a worker on this machine reports: CI runs with all of them).
FULL_LAYERS = ISOLATION_LAYERS
FAST = SandboxLimits(wall_seconds=5.0, cpu_seconds=3.0)


async def echo_tool(name: str, args: JsonValue) -> JsonValue:
    """A host handler: ``fail`` fails with a code, ``boom`` raises a plain exception, others echo."""
    if name == "fail":
        raise ToolCallFailure("the tool failed on purpose", "E_PURPOSE")
    if name == "boom":
        raise RuntimeError("host-side secret detail")
    return {"tool": name, "args": args}


async def run(sandbox: Sandbox, program: str, tools: Sequence[str] = ("echo", "fail", "boom"),
              **kwargs: Any) -> RunResult:
    """Run with the echo handler and fast limits unless told otherwise."""
    kwargs.setdefault("limits", FAST)
    return await sandbox.run(program, tool_names=tools, call_tool=kwargs.pop("call_tool", echo_tool),
                             **kwargs)


def pid_alive(pid: int) -> bool:
    """True if ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
            state = handle.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state != "Z"


def open_fds() -> set[int]:
    """Descriptors open in this (host) process."""
    return {int(name) for name in os.listdir("/proc/self/fd")}


def worker_dirs(template_pid: int) -> set[str]:
    """Working directories of the workers of one template (named after the template's pid)."""
    root = tempfile.gettempdir()
    return {name for name in os.listdir(root) if name.startswith(f"codemode-worker-{template_pid}-")}


class Cancel:
    """A minimal cancel signal, the shape the sandbox accepts: ``cancelled`` and ``async wait()``."""

    def __init__(self) -> None:
        self.event = anyio.Event()

    @property
    def cancelled(self) -> bool:
        return self.event.is_set()

    async def wait(self) -> None:
        await self.event.wait()


class CallbackCancel(Cancel):
    """A cancel signal that also offers ``on_cancel(callback) -> disposer`` (as
    ``codemode.runtime.CancelSignal``).

    The sandbox observes such a signal with a callback instead of a watcher task; ``subscribed`` counts
    the callbacks still registered, so a test can check that every run disposes of its own.
    """

    def __init__(self, *, broken: bool = False) -> None:
        super().__init__()
        self.callbacks: list[Callable[[str], object]] = []
        self.broken = broken
        self.subscriptions = 0

    @property
    def subscribed(self) -> int:
        return len(self.callbacks)

    def fire(self) -> None:
        self.event.set()
        for callback in list(self.callbacks):
            callback("cancelled by the test")

    def on_cancel(self, callback: Callable[[str], object]) -> Callable[[], None]:
        self.subscriptions += 1
        if self.broken:
            raise RuntimeError("this signal cannot take callbacks")
        self.callbacks.append(callback)
        return lambda: self.callbacks.remove(callback)


def typed_equal(a: Any, b: Any) -> bool:
    """Equality that also compares scalar types (True is not 1, 1 is not 1.0); a dict equals a FrozenDict."""
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(typed_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(typed_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


class ShortSend:
    """A stand-in channel that takes one byte of whatever it is sent (framing would be lost)."""

    def __init__(self, sock: Any) -> None:
        self._sock = sock

    def send(self, data: bytes) -> int:
        return 1

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)
