"""The MCP bridge: other MCP servers' tools as codemode tools, and codemode itself as an MCP server.

Client side (``codemode serve --upstream``): :class:`McpBridge` is an async context manager that spawns
each upstream MCP server (stdio), initialises a client session with the official ``mcp`` SDK, lists its
tools and turns every one into a *raw* :class:`codemode.runtime.ToolDefinition`:

* parameters are the upstream's input schema as given (``$schema`` dropped); the upstream validates its
  own input, so the registry does not;
* the value a program gets is ``{"text": <text blocks joined by newlines>, "content": [<MCP content
  blocks>], "structured": <structuredContent>}`` (``structured`` only when the upstream sent it; its schema
  is the upstream's output schema when that fits the supported subset, otherwise any JSON);
* an ``isError`` result, a JSON-RPC error, a lost connection or a call timeout becomes an error result
  (code ``TOOL_FAILED``) whose message names the upstream tool and server;
* a tool annotated ``readOnlyHint: true`` is concurrency-safe; every other tool is exclusive.

Naming (predictable, in upstream order then listing order):

* server names: the ``name=`` given in the spec (``fs=npx -y @modelcontextprotocol/server-filesystem .``),
  else the server's self-reported ``serverInfo.name`` reduced to ``[a-z0-9_]``
  (``secure-filesystem-server`` -> ``secure_filesystem_server``); repeats get ``_2``, ``_3``;
* tool names: a tool keeps its own name unless ``prefix="always"`` (``--upstream-prefix``), or the name
  is offered by more than one upstream, is already in use (``taken``, e.g. a native tool, or assigned to
  an earlier upstream tool) or is the reserved ``run_code``; then it becomes ``<server>_<tool>`` (for
  every upstream offering it), and a name still in use gets ``_2``, ``_3``...

Snapshot and environment: each upstream's tool list is read once, when the bridge connects (later
``tools/list_changed`` notifications are not followed). Upstream processes get the ``mcp`` SDK's default
environment (``HOME``, ``PATH``, ``USER``, ... - not this process's whole environment, so secrets in it
are not handed on) plus any ``env`` given in the :class:`UpstreamServer`.

Lifetime: the sessions (and the child processes) live exactly as long as the ``async with`` block; each
session runs its reader tasks in its own task group inside the block, so nothing outlives it. Enter it
right after the runtime, in the same task (``async with ToolRuntime() as rt, McpBridge(specs) as
bridge: bridge.register(rt)``), so the sessions close before the runtime does; a call that still reaches a
closed session is an error result ("no longer connected"), never a hang.

Server side (``codemode serve``): :func:`serve_stdio` offers a runtime's tools over MCP stdio, with live
progress and logging notifications while ``run_code`` runs (:class:`ProgressRelay`);
:func:`add_serve_arguments` and :func:`run_serve` are the CLI entry (see :mod:`codemode.app._mcp_server`).
"""

# ruff: noqa: E402 (the extra is checked before the modules that need it are imported)
from __future__ import annotations

from ._common import require_extra

require_extra("mcp", ("mcp", "mcp_types"), "the MCP bridge (codemode serve, McpBridge)")

from ._mcp_client import McpBridge as McpBridge
from ._mcp_client import UpstreamServer as UpstreamServer
from ._mcp_client import UpstreamTool as UpstreamTool
from ._mcp_client import parse_upstream as parse_upstream
from ._mcp_convert import ERROR_META_KEY as ERROR_META_KEY
from ._mcp_progress import ProgressRelay as ProgressRelay
from ._mcp_server import SDK_PROMPT as SDK_PROMPT
from ._mcp_server import SDK_URI as SDK_URI
from ._mcp_server import add_serve_arguments as add_serve_arguments
from ._mcp_server import build_server as build_server
from ._mcp_server import run_serve as run_serve
from ._mcp_server import serve_stdio as serve_stdio

__all__ = (  # noqa: RUF022 (plain sorted order, as tests/test_public_api.py checks for packages)
    "ERROR_META_KEY",
    "McpBridge",
    "ProgressRelay",
    "SDK_PROMPT",
    "SDK_URI",
    "UpstreamServer",
    "UpstreamTool",
    "add_serve_arguments",
    "build_server",
    "parse_upstream",
    "run_serve",
    "serve_stdio",
)
