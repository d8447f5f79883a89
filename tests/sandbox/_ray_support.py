"""Shared pieces of the Ray-backed sandbox tests: tools, a cancel signal, a run helper."""

from __future__ import annotations

from typing import Any

import anyio

from codemode.sandbox import RunResult, Sandbox, SandboxLimits, ToolCallFailure

#: Programs and the tools they use; each returns or prints something that depends on the tool replies.
CALLS = ("total = 0\nfor i in range(10):\n    reply = await tools.double({'n': i})\n    total += reply['n']\n"
         "return total")


async def tools(name: str, args: Any) -> Any:
    """``double``: 2n; ``fail``: a ToolCallFailure; ``bad``: a value that is not JSON; ``hang``: never."""
    if name == "double":
        return {"n": 2 * args["n"]}
    if name == "fail":
        raise ToolCallFailure(f"refused {args['why']}", "REFUSED")
    if name == "bad":
        return {"value": object()}
    if name == "hang":
        await anyio.sleep_forever()
    raise KeyError(name)


NAMES = ("double", "fail", "bad", "hang")


class Cancel:
    """A minimal cancel signal (``cancelled`` and ``async wait()``), fired by the test."""

    def __init__(self) -> None:
        self._event = anyio.Event()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    async def wait(self) -> None:
        await self._event.wait()

    def fire(self) -> None:
        self._event.set()


class CallbackCancel(Cancel):
    """A cancel signal that also offers ``on_cancel(callback) -> disposer`` (as ``CancelSignal`` does)."""

    def __init__(self) -> None:
        super().__init__()
        self._callbacks: list[Any] = []

    def on_cancel(self, callback: Any) -> Any:
        self._callbacks.append(callback)
        return lambda: self._callbacks.remove(callback) if callback in self._callbacks else None

    def fire(self) -> None:
        super().fire()
        for callback in list(self._callbacks):
            callback("cancelled")


async def run(box: Sandbox, program: str, *, wall: float = 20.0, cpu: float = 5.0,
              **kwargs: Any) -> RunResult:
    return await box.run(program, tool_names=NAMES, call_tool=tools,
                         limits=SandboxLimits(wall_seconds=wall, cpu_seconds=cpu), **kwargs)
