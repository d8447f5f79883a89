"""Client side of the MCP bridge: upstream server specs and :class:`McpBridge` (see
:mod:`codemode.app.mcp_bridge` for the value shape, the error mapping and the naming rules)."""

from __future__ import annotations

import contextlib
import shlex
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, TextIO

import anyio
import mcp_types as types
from mcp import ClientSession, StdioServerParameters, stdio_client

from codemode.runtime.definitions import ToolDefinition
from codemode.runtime.errors import UsageError

from ._mcp_convert import bridged_definition
from ._mcp_names import assign_tool_names, server_slug, unique_server_names

__all__ = ("McpBridge", "UpstreamServer", "UpstreamTool", "parse_upstream")

_MAX_PAGES = 100


@dataclass(frozen=True)
class UpstreamServer:
    """How to start one upstream MCP server on stdio. ``name`` None means "use its serverInfo.name"."""

    command: str
    args: tuple[str, ...] = ()
    name: str | None = None
    env: tuple[tuple[str, str], ...] = ()
    cwd: str | None = None


def parse_upstream(spec: str) -> UpstreamServer:
    """Parse ``"[name=]CMD ARGS..."`` (shell quoting rules) into an :class:`UpstreamServer`.

    Raises :class:`codemode.runtime.UsageError` for an empty spec, unbalanced quotes or a bad name.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise UsageError("--upstream needs a command, e.g. --upstream 'fs=npx -y some-mcp-server .'")
    try:
        words = shlex.split(spec)
    except ValueError as exc:
        raise UsageError(f"--upstream {spec!r}: {exc}") from None
    name: str | None = None
    head = words[0]
    if "=" in head and not head.startswith(("/", ".")) and "/" not in head.split("=", 1)[0]:
        name, rest = head.split("=", 1)
        if not name or server_slug(name, fallback="") != name.lower() or not name.isidentifier():
            raise UsageError(f"--upstream {spec!r}: server name {name!r} must be a Python identifier")
        words = ([rest] if rest else []) + words[1:]
    if not words:
        raise UsageError(f"--upstream {spec!r}: no command after the server name")
    return UpstreamServer(command=words[0], args=tuple(words[1:]), name=name)


@dataclass(frozen=True)
class UpstreamTool:
    """One bridged tool: its registered ``name``, the upstream ``server`` and tool, and the definition."""

    name: str
    server: str
    upstream_name: str
    definition: ToolDefinition = field(repr=False)


@dataclass
class _Connected:
    spec: UpstreamServer
    session: ClientSession
    server_info: types.Implementation
    tools: list[types.Tool]


class McpBridge:
    """Connects to upstream MCP servers and exposes their tools as raw definitions.

    ``prefix`` is ``"auto"`` (prefix only on collision) or ``"always"``; ``taken`` lists names that are
    already registered (so a collision with a native tool is resolved by prefixing the upstream one).
    ``connect_timeout_s`` bounds each server's start, handshake and tool listing; ``call_timeout_s``
    (None: unbounded) bounds each forwarded call. ``errlog`` receives the servers' stderr (default this
    process's stderr). Failing to start or initialise any upstream raises :class:`codemode.runtime.UsageError`
    after closing the ones already started.
    """

    def __init__(
        self,
        servers: Sequence[UpstreamServer],
        *,
        prefix: Literal["auto", "always"] = "auto",
        taken: Iterable[str] = (),
        connect_timeout_s: float = 30.0,
        call_timeout_s: float | None = None,
        errlog: TextIO | None = None,
    ) -> None:
        if prefix not in ("auto", "always"):
            raise UsageError(f'prefix must be "auto" or "always", not {prefix!r}')
        self._servers = tuple(servers)
        self._prefix = prefix
        self._taken = frozenset(taken)
        self._connect_timeout_s = connect_timeout_s
        self._call_timeout_s = call_timeout_s
        self._errlog = errlog
        self._stack: contextlib.AsyncExitStack | None = None
        self.tools: tuple[UpstreamTool, ...] = ()
        self.server_names: tuple[str, ...] = ()

    @property
    def definitions(self) -> list[ToolDefinition]:
        """The bridged definitions, in upstream then listing order (valid inside the ``async with``)."""
        return [tool.definition for tool in self.tools]

    def register(self, rt: Any, *, scope: Any = None) -> Callable[[], None]:
        """Register every bridged definition on ``rt``; returns one disposer that removes them all."""
        disposers = [rt.register(definition, scope=scope) for definition in self.definitions]

        def dispose() -> None:
            for undo in reversed(disposers):
                undo()

        return dispose

    async def __aenter__(self) -> McpBridge:
        if self._stack is not None:
            raise UsageError("an McpBridge can be entered only once at a time")
        stack = contextlib.AsyncExitStack()
        await stack.__aenter__()
        try:
            connected = [await self._connect(stack, spec) for spec in self._servers]
            self._build(connected)
        except Exception as exc:
            # Close what was started without re-raising through the sessions' task groups (which would
            # wrap the clear error in an exception group), then report the error itself.
            with contextlib.suppress(Exception):
                await stack.aclose()
            raise exc from None
        except BaseException:
            await stack.__aexit__(*sys.exc_info())
            raise
        self._stack = stack
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        stack, self._stack = self._stack, None
        self.tools = ()
        if stack is not None:
            return await stack.__aexit__(exc_type, exc, tb)
        return None

    async def _connect(self, stack: contextlib.AsyncExitStack, spec: UpstreamServer) -> _Connected:
        shown = shlex.join([spec.command, *spec.args])
        params = StdioServerParameters(
            command=spec.command, args=list(spec.args), env=dict(spec.env) or None,
            cwd=Path(spec.cwd) if spec.cwd else None,
        )
        try:
            errlog = self._errlog or sys.stderr
            read, write = await stack.enter_async_context(stdio_client(params, errlog=errlog))
            session = await stack.enter_async_context(ClientSession(read, write))
            with anyio.fail_after(self._connect_timeout_s):
                init = await session.initialize()
                tools = await self._list_tools(session)
        except TimeoutError:
            limit = self._connect_timeout_s
            message = f"upstream MCP server `{shown}` did not finish its handshake within {limit}s"
            raise UsageError(message) from None
        except UsageError:
            raise
        except Exception as exc:
            raise UsageError(f"upstream MCP server `{shown}` could not be started: {exc}") from None
        return _Connected(spec, session, init.server_info, tools)

    def _warn(self, message: str) -> None:
        """Tell the operator (the upstreams' stderr log) about something skipped; never fails."""
        with contextlib.suppress(Exception):
            print(f"codemode: {message}", file=self._errlog or sys.stderr, flush=True)

    @staticmethod
    async def _list_tools(session: ClientSession) -> list[types.Tool]:
        tools: list[types.Tool] = []
        cursor: str | None = None
        for _ in range(_MAX_PAGES):
            params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await session.list_tools(params=params)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        return tools

    def _build(self, connected: list[_Connected]) -> None:
        for c in connected:
            unnamed = [tool for tool in c.tools if not tool.name]
            if unnamed:
                server = c.spec.name or c.server_info.name
                self._warn(f"skipping {len(unnamed)} unnamed tool(s) of upstream MCP server {server!r}")
                c.tools = [tool for tool in c.tools if tool.name]
        servers = unique_server_names(
            [c.spec.name or server_slug(c.server_info.name) for c in connected]
        )
        names = assign_tool_names(
            [(server, [tool.name for tool in c.tools]) for server, c in zip(servers, connected, strict=True)],
            always_prefix=self._prefix == "always",
            taken=self._taken,
        )
        built: list[UpstreamTool] = []
        for server, c, chosen in zip(servers, connected, names, strict=True):
            call = _caller(c.session)
            for tool, name in zip(c.tools, chosen, strict=True):
                try:
                    definition = bridged_definition(
                        tool, name=name, server=server, call=call, timeout_s=self._call_timeout_s
                    )
                except UsageError as exc:  # one malformed upstream tool must not take the others down
                    self._warn(f"skipping tool {tool.name!r} of upstream MCP server {server!r}: {exc}")
                    continue
                built.append(UpstreamTool(name, server, tool.name, definition))
        self.server_names = tuple(servers)
        self.tools = tuple(built)


def _caller(session: ClientSession) -> Callable[[str, dict[str, Any]], Any]:
    async def call(name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        return await session.call_tool(name, arguments)

    return call
