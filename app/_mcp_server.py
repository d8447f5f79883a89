"""Server side of the MCP bridge: ``codemode serve``, a Model Context Protocol server on stdio.

One server connection is one agent session: every ``tools/call`` is run as a one-call model turn of the
session's agent (``codemode.runtime.scheduler.execute_tool_calls``, i.e. ``rt.execute`` plus the ``tool/call``
and ``tool/result`` events), so hooks, guards, approval and the agent's event log apply exactly as for a model
turn; ``--events FILE`` writes that log as JSON lines when the session ends.

What is offered follows the runtime's mode for that agent (``code``: ``run_code`` only; ``both``: the
native tools plus ``run_code``; ``native``: the native tools), because the tool list *is* the assembled
prompt's tool list (``rt.prompt(agent).tools``).

``run_code``'s MCP description is its own description followed by the ``tools:sdk`` section (the
generated Python declarations of every tool a program may call), so a client that only reads tool
descriptions still sees the SDK. The same text is offered as the prompt ``codemode_sdk`` and the resource
``codemode://sdk``.

Results: content blocks become MCP text (or image) content; error results set ``isError``, carry the
content ``Error: <message>`` and put the stable ``code`` and the message in ``_meta["codemode/error"]``;
a successful value that is a JSON object is also sent as ``structuredContent``. Nothing a client sends
can crash the server: unexpected failures become ``isError`` results, and a line that is no acceptable
JSON-RPC message (not JSON, a batch, too deep, text that is not Unicode) gets a JSON-RPC error. The server
logs on stderr, among other things the sandbox's health events (a template replaced, the restart breaker).
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from typing import Any, Literal

import mcp_types as types
from mcp.server import Server

from codemode.runtime import RUN_CODE, Agent, ToolResult, ToolRuntime, UsageError
from codemode.runtime.modes import MODES
from codemode.runtime.prompt import SDK_SECTION
from codemode.runtime.scheduler import ToolCallRequest, execute_tool_calls
from codemode.sandbox.lossless import thaw
from codemode.tools import CodeMode

from ._common import CliUsageError, app_version, events_file, load_toolsets, open_codemode
from ._mcp_client import McpBridge, parse_upstream
from ._mcp_convert import to_call_tool_result
from ._mcp_progress import ProgressRelay
from ._mcp_stdio import stdio_transport

__all__ = (
    "SDK_PROMPT",
    "SDK_URI",
    "add_serve_arguments",
    "build_server",
    "run_serve",
    "sdk_text",
    "serve_stdio",
)

SDK_PROMPT = "codemode_sdk"
SDK_URI = "codemode://sdk"


def _offer(rt: ToolRuntime, agent: Agent) -> tuple[list[Any], str | None]:
    """The tools offered to ``agent`` (wire order) and the non-empty ``tools:sdk`` text, if any."""
    prompt = rt.prompt(agent)
    section = prompt.section(SDK_SECTION)
    sdk = section.text if section is not None and section.text else None
    return list(prompt.tools), sdk


def sdk_text(rt: ToolRuntime, agent: Agent) -> str | None:
    """The ``tools:sdk`` prompt section the runtime assembles for ``agent`` (None in native mode)."""
    return _offer(rt, agent)[1]


def _tool(schema: Any, sdk: str | None) -> types.Tool:
    description = str(schema["description"])
    if schema["name"] == RUN_CODE and sdk:
        description = f"{description}\n\n{sdk}"
    return types.Tool(name=schema["name"], description=description, input_schema=thaw(schema["parameters"]))


def build_server(rt: ToolRuntime, agent: Agent, *, name: str = "codemode", version: str = "",
                 relay: ProgressRelay | None = None) -> Server[Any]:
    """A low-level MCP ``Server`` whose handlers map to ``rt`` for the one agent ``agent``.

    With ``relay`` (whose ``on_log`` the code runtime was given), a ``run_code`` call sends live
    progress and logging notifications while it runs (see :mod:`codemode.app._mcp_progress`); its
    ``around_execute`` hook is installed on ``rt`` here.
    """
    call_ids = itertools.count(1)
    if relay is not None:
        rt.around_execute(relay.around)

    async def list_tools(_ctx: Any, _params: Any) -> types.ListToolsResult:
        offered, sdk = _offer(rt, agent)
        return types.ListToolsResult(tools=[_tool(schema, sdk) for schema in offered])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        arguments = params.arguments if params.arguments is not None else {}
        request = ToolCallRequest(f"mcp-{next(call_ids)}", params.name, json.dumps(arguments, allow_nan=True))

        async def run() -> ToolResult:
            [result] = await execute_tool_calls(rt, [request], agent=agent)
            return result

        try:
            if relay is not None and params.name == RUN_CODE:
                result = await relay.relaying(request.call_id, ctx, run)
            else:
                result = await run()
        except Exception as exc:  # the pipeline is total; this is a last line of defence
            message = f"codemode could not run {params.name!r}: {exc}"
            return types.CallToolResult(content=[types.TextContent(type="text", text=f"Error: {message}")],
                                        is_error=True)
        return to_call_tool_result(result)

    async def list_prompts(_ctx: Any, _params: Any) -> types.ListPromptsResult:
        if sdk_text(rt, agent) is None:
            return types.ListPromptsResult(prompts=[])
        prompt = types.Prompt(
            name=SDK_PROMPT, title="Code Mode SDK",
            description="The Python declarations of the tools a run_code program can call.",
        )
        return types.ListPromptsResult(prompts=[prompt])

    async def get_prompt(_ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        sdk = sdk_text(rt, agent)
        if params.name != SDK_PROMPT or sdk is None:
            raise ValueError(f"unknown prompt {params.name!r}; code mode offers {SDK_PROMPT!r}")
        message = types.PromptMessage(role="user", content=types.TextContent(type="text", text=sdk))
        return types.GetPromptResult(description="Code Mode SDK", messages=[message])

    async def list_resources(_ctx: Any, _params: Any) -> types.ListResourcesResult:
        if sdk_text(rt, agent) is None:
            return types.ListResourcesResult(resources=[])
        resource = types.Resource(name="sdk", title="Code Mode SDK", uri=SDK_URI, mime_type="text/x-python",
                                  description="The tools:sdk section offered with run_code.")
        return types.ListResourcesResult(resources=[resource])

    async def read_resource(_ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        sdk = sdk_text(rt, agent)
        if str(params.uri) != SDK_URI or sdk is None:
            raise ValueError(f"unknown resource {str(params.uri)!r}")
        contents = types.TextResourceContents(uri=SDK_URI, mime_type="text/x-python", text=sdk)
        return types.ReadResourceResult(contents=[contents])

    return Server(
        name, version=version,
        instructions="Code Mode: call run_code with an async Python program that calls tools.NAME(...).",
        on_list_tools=list_tools, on_call_tool=call_tool, on_list_prompts=list_prompts,
        on_get_prompt=get_prompt, on_list_resources=list_resources, on_read_resource=read_resource,
    )


async def serve_stdio(rt: ToolRuntime, *, agent: Agent | None = None, name: str = "codemode",
                      version: str = "", relay: ProgressRelay | None = None) -> None:
    """Serve ``rt`` as an MCP server on this process's stdin/stdout until the client disconnects.

    ``agent`` is the session's agent (a fresh ``codemode.runtime.Agent("mcp")`` when None): one server
    connection is one agent session. Every line gets an answer, refusals included (see
    :mod:`codemode.app._mcp_stdio`).
    """
    if agent is None:
        agent = Agent("mcp")
    server = build_server(rt, agent, name=name, version=version, relay=relay)
    async with stdio_transport() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


# -- the CLI entry --------------------------------------------------------------------------------


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``codemode serve`` flags to ``parser``."""
    parser.add_argument("--mode", choices=MODES, default="code",
                        help="what to offer: run_code only (code, default), native tools plus run_code "
                             "(both), or the native tools alone (native)")
    parser.add_argument("--toolset", action="append", default=[], metavar="MODULE:ATTR",
                        help="load tools from MODULE:ATTR (a list of definitions or a function returning "
                             "one); repeatable; default: demo tools, workspace tools and todo_write")
    parser.add_argument("--workspace", default=".", metavar="DIR",
                        help="root of the default workspace tools (default: current directory)")
    parser.add_argument("--upstream", action="append", default=[], metavar="'[NAME=]CMD ARGS'",
                        help="also offer the tools of this MCP server (spawned on stdio); repeatable")
    parser.add_argument("--upstream-prefix", action="store_true",
                        help="always register upstream tools as <server>_<tool> (default: only on collision)")
    parser.add_argument("--events", metavar="FILE", default=None,
                        help="write the session's event log to FILE as JSON lines, as events happen")
    parser.add_argument("--upstream-timeout", type=float, default=30.0, metavar="SECONDS",
                        help="bound on each upstream's start and handshake (default 30)")


def _log_sandbox_health(cm: CodeMode) -> None:
    """Log the sandbox's health events (its template lost or replaced, the restart breaker) on stderr,
    the server's log; a session's ``--events`` log has those its runs saw as ``code/sandbox`` events."""
    if cm.code_runtime is not None:
        cm.code_runtime.sandbox.on_health(
            lambda event: print(f"codemode serve: sandbox {event.kind}: {event.message}", file=sys.stderr,
                                flush=True))


def _error(message: str) -> int:
    print(f"codemode serve: {message}", file=sys.stderr)
    return 2


async def run_serve(args: argparse.Namespace) -> int:
    """Run ``codemode serve`` from parsed arguments; returns the exit code (2 for usage errors)."""
    agent = Agent("mcp")
    relay = ProgressRelay()
    observers = {} if args.mode == "native" else {"on_log": relay.on_log}
    try:
        upstreams = [parse_upstream(text) for text in args.upstream]
        definitions = load_toolsets(args.toolset, args.workspace)
        with events_file(args.events, agent):
            async with open_codemode(args.mode, definitions, agent=agent, **observers) as cm:
                _log_sandbox_health(cm)
                prefix: Literal["auto", "always"] = "always" if args.upstream_prefix else "auto"
                # Entered after the runtime and closed before it, in this task: the sessions' task groups
                # nest inside the runtime's lifetime (structured), and no session outlives the runtime.
                async with McpBridge(upstreams, prefix=prefix, taken=[d.name for d in definitions],
                                     connect_timeout_s=args.upstream_timeout) as bridge:
                    bridge.register(cm.runtime)
                    await serve_stdio(cm.runtime, agent=agent, version=app_version(), relay=relay)
    except (UsageError, CliUsageError) as exc:
        return _error(str(exc))
    except ExceptionGroup as group:  # the runtime's task group wraps what fails inside it
        usage = _first_usage_error(group)
        if usage is None:
            raise
        return _error(str(usage))
    return 0


def _first_usage_error(group: BaseExceptionGroup[Any]) -> UsageError | CliUsageError | None:
    for exc in group.exceptions:
        if isinstance(exc, UsageError | CliUsageError):
            return exc
        if isinstance(exc, BaseExceptionGroup):
            found = _first_usage_error(exc)
            if found is not None:
                return found
    return None
