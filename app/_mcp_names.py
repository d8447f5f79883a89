"""Naming rules of the MCP bridge: upstream server names and collision-free tool names.

Kept apart from the session plumbing because it is pure and the rules are part of the public contract
(documented in :mod:`codemode.app.mcp_bridge`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

__all__ = ("assign_tool_names", "server_slug", "unique_server_names")

_NON_IDENT = re.compile(r"[^0-9A-Za-z_]+")
RUN_CODE = "run_code"


def server_slug(raw: str | None, fallback: str = "upstream") -> str:
    """A lower-case ``[a-z0-9_]`` slug of a server name (``secure-filesystem-server`` ->
    ``secure_filesystem_server``); ``fallback`` when nothing usable is left."""
    slug = _NON_IDENT.sub("_", raw or "").strip("_").lower()
    return slug or fallback


def unique_server_names(names: Sequence[str]) -> list[str]:
    """Make server names unique in order: the second ``fs`` becomes ``fs_2``, the third ``fs_3``."""
    seen: set[str] = set()
    out: list[str] = []
    for name in names:
        candidate, n = name, 1
        while candidate in seen:
            n += 1
            candidate = f"{name}_{n}"
        seen.add(candidate)
        out.append(candidate)
    return out


def assign_tool_names(
    servers: Sequence[tuple[str, Sequence[str]]],
    *,
    always_prefix: bool = False,
    taken: Iterable[str] = (),
) -> list[list[str]]:
    """Choose the registered name of every upstream tool, deterministically.

    ``servers`` is ``[(server_name, [tool names in listing order]), ...]`` in upstream order; the result
    has the same shape. A tool keeps its own name unless ``always_prefix`` is set, or the name is
    ``run_code``, already ``taken`` (e.g. a native tool), or offered by more than one upstream: then it is
    registered as ``<server>_<tool>``. If even that name is used, ``_2``, ``_3``... is appended, in
    upstream order then listing order.
    """
    used = set(taken)
    counts: dict[str, int] = {}
    for _, tools in servers:
        for tool in tools:
            counts[tool] = counts.get(tool, 0) + 1
    result: list[list[str]] = []
    for server, tools in servers:
        names: list[str] = []
        for tool in tools:
            clash = always_prefix or tool == RUN_CODE or tool in used or counts[tool] > 1
            base = f"{server}_{tool}" if clash else tool
            candidate, n = base, 1
            while candidate in used or candidate == RUN_CODE:
                n += 1
                candidate = f"{base}_{n}"
            used.add(candidate)
            names.append(candidate)
        result.append(names)
    return result
