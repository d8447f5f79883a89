"""Live progress of a ``run_code`` call served over MCP: child calls as progress, printed lines as logs.

While a program runs, the MCP request that started it receives

* a progress notification (``notifications/progress``) each time one of its child calls settles, when
  the client gave a progress token: ``progress`` counts the settled calls (no ``total``: a program's
  call count is not known in advance), ``message`` is ``"<call id> <tool> ok"`` or ``"... <ERROR_CODE>"``;
* a logging notification (``notifications/message``, level ``info``, logger ``run_code``) for each
  printed line, when the client opted in to logging.

The sandbox reports printed lines through a synchronous observer and child calls settle in the
pipeline's tasks; both are put on one unbounded in-memory stream per request (so their order is kept and
neither waits on the client), which a forwarding task inside the request's handler drains. A client
that goes away only ends the forwarding: the program runs to its end either way.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Awaitable, Callable
from typing import Any, Literal

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.exceptions import MCPDeprecationWarning

from codemode.runtime import ToolCall, ToolContext, ToolResult

__all__ = ("LOGGER", "ProgressRelay")

#: The logger name of the logging notifications that carry printed lines.
LOGGER = "run_code"

_Note = tuple[Literal["log", "settled"], str]


class ProgressRelay:
    """Routes what running programs do to the MCP requests that started them (see the module docs).

    Give :meth:`on_log` to the code runtime (``CodeMode(on_log=...)``) and install :meth:`around` on the
    tool runtime (``rt.around_execute``; :func:`~codemode.app.mcp_bridge.build_server` does this); the
    request handler wraps each ``run_code`` call in :meth:`relaying`.
    """

    def __init__(self) -> None:
        self._open: dict[str, MemoryObjectSendStream[_Note]] = {}

    def on_log(self, ctx: ToolContext, line: str) -> None:
        """A code-runtime log observer: one printed text of the program run by ``ctx``."""
        stream = self._open.get(ctx.call.root_call_id)
        if stream is not None:
            stream.send_nowait(("log", line))

    async def around(self, call: ToolCall, call_next: Callable[[], Awaitable[ToolResult]]) -> ToolResult:
        """An ``around_execute`` hook that reports each settled child call to its request."""
        result = await call_next()
        if call.parent is not None and (stream := self._open.get(call.root_call_id)) is not None:
            status = (result.error.code if result.error else "ERROR") if result.is_error else "ok"
            stream.send_nowait(("settled", f"{call.call_id} {call.name} {status}"))
        return result

    async def relaying(self, call_id: str, request: Any,
                       work: Callable[[], Awaitable[ToolResult]]) -> ToolResult:
        """Run ``work()`` (the call ``call_id``) while forwarding its notes to the MCP request whose
        handler context is ``request`` (its ``session`` and ``request_id``)."""
        send, receive = anyio.create_memory_object_stream[_Note](math.inf)
        self._open[call_id] = send
        outcome: list[ToolResult] = []
        async with anyio.create_task_group() as group:
            group.start_soon(_forward, receive, request)
            with send:  # closing it lets the forwarder drain what is left, then end
                try:
                    outcome.append(await work())
                finally:
                    del self._open[call_id]
        return outcome[0]


async def _forward(receive: MemoryObjectReceiveStream[_Note], request: Any) -> None:
    settled = 0
    deliver = True
    async with receive:
        async for kind, text in receive:
            if not deliver:
                continue  # keep draining, so nothing waits on a client that went away
            try:
                if kind == "settled":
                    settled += 1
                    await request.session.report_progress(settled, None, text)
                else:
                    await _send_log(request, text)
            except Exception:
                deliver = False


async def _send_log(request: Any, text: str) -> None:
    # The SDK marks logging deprecated (SEP-2577) but still delivers it to clients that opt in, and
    # clients still read it; the warning is raised when the coroutine is made, so only that is muted.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        sending = request.session.send_log_message("info", text, logger=LOGGER,
                                                   related_request_id=request.request_id)
    await sending
