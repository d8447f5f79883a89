"""Conversions between MCP wire objects and codemode values (no I/O here).

* upstream ``Tool`` + session -> raw :class:`codemode.runtime.ToolDefinition` (:func:`bridged_definition`);
* upstream ``CallToolResult`` -> the bridged tool's value, or a :class:`codemode.runtime.ToolError`;
* codemode :class:`codemode.runtime.ToolResult` -> MCP ``CallToolResult`` for ``codemode serve``.
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio
import mcp_types as types
from mcp_types.jsonrpc import CONNECTION_CLOSED

from codemode.runtime.definitions import ToolDefinition, ToolOutput, raw_tool
from codemode.runtime.errors import ToolArgsError, ToolError, ToolExecutionError
from codemode.runtime.results import ToolResult
from codemode.runtime.schema import check_schema
from codemode.sandbox.lossless import dumps, is_lossless, thaw

__all__ = (  # noqa: RUF022 (plain sorted order, as tests/test_public_api.py checks for packages)
    "CallUpstream",
    "ERROR_META_KEY",
    "bridged_definition",
    "output_schema_for",
    "to_call_tool_result",
    "upstream_error",
    "value_of",
)

#: ``_meta`` key of an error result carrying codemode's ``{"code", "message"}``.
ERROR_META_KEY = "codemode/error"

#: ``call(tool_name, arguments) -> CallToolResult``: one upstream request (raises MCPError etc.).
CallUpstream = Callable[[str, dict[str, Any]], Awaitable[types.CallToolResult]]

_BLOCK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": True,
    "description": "An MCP content block: {type: 'text', text} or image/audio/resource blocks.",
    "properties": {"type": {"type": "string"}},
    "required": ["type"],
}


def upstream_error(message: str) -> ToolError:
    """The error every upstream failure becomes (one place, so a dedicated code can replace it)."""
    return ToolExecutionError(message)


def _structured_schema(declared: Mapping[str, Any] | None) -> dict[str, Any]:
    """The schema of ``structured``: the upstream's declared output schema when it fits the enforced
    subset once ``$schema`` is dropped, otherwise an annotation-only node (any JSON)."""
    note = "The upstream's structuredContent."
    if declared:
        candidate = {k: copy.deepcopy(v) for k, v in declared.items() if k != "$schema"}
        if is_lossless(candidate) and not check_schema(candidate, "schema"):
            candidate.setdefault("description", note)
            return candidate
    return {"description": note + " (schema not declared or outside the supported subset)"}


def output_schema_for(tool: types.Tool) -> dict[str, Any]:
    """Output declaration of a bridged tool: ``{text, content, structured?}``."""
    return {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "text": {"type": "string", "description": "The text blocks of the result, joined by newlines."},
            "content": {"type": "array", "items": _BLOCK_SCHEMA},
            "structured": _structured_schema(tool.output_schema),
        },
        "required": ["text", "content"],
    }


def _dump_block(block: Any) -> dict[str, Any]:
    dumped = block.model_dump(mode="json", by_alias=True, exclude_none=True)
    return dumped if isinstance(dumped, dict) else {"type": "text", "text": str(dumped)}


def _joined_text(blocks: list[dict[str, Any]]) -> str:
    return "\n".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")


def value_of(result: types.CallToolResult, *, server: str, tool: str) -> dict[str, Any]:
    """The bridged value of a successful upstream result; an ``isError`` result raises."""
    blocks = [_dump_block(block) for block in result.content]
    text = _joined_text(blocks)
    if result.is_error:
        detail = text.strip() or "no error text"
        raise upstream_error(f'upstream MCP tool "{tool}" (server "{server}") reported an error: {detail}')
    value: dict[str, Any] = {"text": text, "content": blocks}
    if result.structured_content is not None:
        value["structured"] = result.structured_content
    return value


def _arguments(args: Any) -> dict[str, Any]:
    if not isinstance(args, Mapping):
        raise ToolArgsError(['"arguments" must be an object'])
    return {str(k): v for k, v in args.items()}


def _parameters(tool: types.Tool) -> dict[str, Any]:
    schema = {k: v for k, v in (tool.input_schema or {}).items() if k != "$schema"}
    schema.setdefault("type", "object")
    return schema


def _render(_args: Any, value: Any) -> list[dict[str, Any]]:
    blocks = [dict(block) for block in value["content"]]
    return blocks or [{"type": "text", "text": "(no content)"}]


def bridged_definition(
    tool: types.Tool, *, name: str, server: str, call: CallUpstream, timeout_s: float | None
) -> ToolDefinition:
    """A raw definition that forwards to ``tool`` on ``server`` under the registered ``name``.

    Parameters are the upstream's input schema as given (it validates its own input); the body maps a
    JSON-RPC error, an ``isError`` result, a lost connection or a timeout to an error result whose
    message names the upstream tool and server. A tool annotated ``readOnlyHint`` is concurrency-safe.
    """
    upstream_name = tool.name

    async def execute(args: Any, _ctx: Any) -> dict[str, Any]:
        arguments = _arguments(args)
        try:
            if timeout_s is None:
                result = await call(upstream_name, arguments)
            else:
                with anyio.fail_after(timeout_s):
                    result = await call(upstream_name, arguments)
        except TimeoutError:
            raise upstream_error(
                f'upstream MCP tool "{upstream_name}" (server "{server}") did not answer within {timeout_s}s'
            ) from None
        except ToolError:
            raise
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream) as exc:
            raise upstream_error(f'upstream MCP server "{server}" is no longer connected ({exc!r})') from None
        except Exception as exc:  # MCPError and anything the client library raises
            code = getattr(exc, "code", None)
            if code == CONNECTION_CLOSED:
                raise upstream_error(
                    f'upstream MCP server "{server}" is no longer connected (it exited or closed its output)'
                ) from None
            suffix = f" (JSON-RPC error {code})" if isinstance(code, int) else ""
            raise upstream_error(
                f'upstream MCP server "{server}" failed the call to "{upstream_name}": {exc}{suffix}'
            ) from None
        return value_of(result, server=server, tool=upstream_name)

    description = (tool.description or tool.title or f"MCP tool {upstream_name}").strip()
    description += f" (MCP tool {upstream_name!r} of upstream server {server!r})"
    read_only = tool.annotations is not None and tool.annotations.read_only_hint is True
    options: dict[str, Any] = {}
    if read_only:
        options["is_concurrency_safe"] = lambda _args: True
    return raw_tool(
        name=name,
        description=description,
        parameters=_parameters(tool),
        output=ToolOutput(schema=output_schema_for(tool), render=_render),
        execute=execute,
        **options,
    )


# -- codemode -> MCP (serve) ----------------------------------------------------------------------


def _mcp_block(block: Mapping[str, Any]) -> types.ContentBlock:
    kind = block.get("type")
    if kind == "text" and isinstance(block.get("text"), str):
        return types.TextContent(type="text", text=block["text"])
    if kind == "image" and isinstance(block.get("data"), str):
        mime = block.get("mimeType") or block.get("mime_type") or "application/octet-stream"
        return types.ImageContent(type="image", data=block["data"], mime_type=str(mime))
    return types.TextContent(type="text", text=dumps(dict(block)))


def to_call_tool_result(result: ToolResult) -> types.CallToolResult:
    """Map a codemode result: text content, ``isError`` for failures (with the stable error code in
    ``_meta["codemode/error"]``), and ``structuredContent`` when the success value is a JSON object (MCP
    requires an object there)."""
    content = [_mcp_block(block) for block in result.content]
    if result.is_error:
        code = result.error.code if result.error is not None else "TOOL_FAILED"
        message = result.error.message if result.error is not None else "tool call failed"
        if not content:
            content = [types.TextContent(type="text", text=f"Error: {message}")]
        meta = {ERROR_META_KEY: {"code": code, "message": message}}
        return types.CallToolResult(content=content, is_error=True).model_copy(update={"meta": meta})
    structured = thaw(result.value) if isinstance(result.value, Mapping) else None
    return types.CallToolResult(content=content, structured_content=structured, is_error=False)
