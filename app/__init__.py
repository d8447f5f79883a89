"""The application surface: the ``codemode`` command line and the MCP bridge (``codemode serve`` and
the client side that offers other MCP servers' tools), built on :class:`codemode.CodeMode`.

``main`` is the console script (and ``python -m codemode``); ``load_toolsets`` resolves ``--toolset
module:attr`` specs the way both commands do. The MCP names (``McpBridge``, ``serve_stdio``, ...) are
imported on first use: they need the ``mcp`` extra (``pip install 'codemode[mcp]'``), and a missing
extra is named when one of them is first used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from codemode.sandbox._lazy import lazy_exports

from ._common import CliUsageError as CliUsageError
from ._common import MissingExtraError as MissingExtraError
from ._common import load_toolsets as load_toolsets
from .cli import main as main

if TYPE_CHECKING:
    from .mcp_bridge import ERROR_META_KEY as ERROR_META_KEY
    from .mcp_bridge import McpBridge as McpBridge
    from .mcp_bridge import ProgressRelay as ProgressRelay
    from .mcp_bridge import UpstreamServer as UpstreamServer
    from .mcp_bridge import UpstreamTool as UpstreamTool
    from .mcp_bridge import add_serve_arguments as add_serve_arguments
    from .mcp_bridge import build_server as build_server
    from .mcp_bridge import parse_upstream as parse_upstream
    from .mcp_bridge import run_serve as run_serve
    from .mcp_bridge import serve_stdio as serve_stdio

#: The names imported on first use (they need the ``mcp`` extra), and where they live.
_HOMES = dict.fromkeys(
    ("ERROR_META_KEY", "McpBridge", "ProgressRelay", "UpstreamServer", "UpstreamTool", "add_serve_arguments",
     "build_server", "parse_upstream", "run_serve", "serve_stdio"),
    ".mcp_bridge")

__all__ = (  # noqa: RUF022 (plain sorted order, as tests/test_public_api.py checks)
    "CliUsageError",
    "ERROR_META_KEY",
    "McpBridge",
    "MissingExtraError",
    "ProgressRelay",
    "UpstreamServer",
    "UpstreamTool",
    "add_serve_arguments",
    "build_server",
    "load_toolsets",
    "main",
    "parse_upstream",
    "run_serve",
    "serve_stdio",
)

__getattr__, __dir__ = lazy_exports(__name__, _HOMES)
