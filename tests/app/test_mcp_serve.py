"""``codemode serve``: a real MCP client session (the ``mcp`` SDK) against the codemode MCP server,
in-process and as a spawned stdio server proxying the reference git and time MCP servers (from PyPI)."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, ClientSession, StdioServerParameters, stdio_client

from codemode import CodeMode, tool
from codemode.app._mcp_progress import ProgressRelay
from codemode.app.mcp_bridge import (
    ERROR_META_KEY,
    SDK_PROMPT,
    SDK_URI,
    add_serve_arguments,
    build_server,
    run_serve,
)
from codemode.runtime import Agent, ToolRuntime
from codemode.tools.run_code import PythonCodeRuntime
from codemode.tools.workspace import workspace_tools

from .fixtures import REPOSITORY_FILES, git_server, make_repository, time_server, upstream_spec
from .fixtures.mcp_toolset import toolset

REPO = Path(__file__).resolve().parents[2]
TOOLSET = "tests.app.fixtures.mcp_toolset:toolset"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "notes.md").write_text("# Notes\nserved over MCP\n")
    return root.resolve()


@asynccontextmanager
async def serving(workspace: Path, mode: str = "native") -> AsyncIterator[Client]:
    async with contextlib.AsyncExitStack() as stack:
        code_runtime = None if mode == "native" else await stack.enter_async_context(PythonCodeRuntime())
        rt = await stack.enter_async_context(ToolRuntime(mode=mode, code_runtime=code_runtime))
        for definition in workspace_tools(workspace):
            rt.register(definition)
        yield await stack.enter_async_context(Client(build_server(rt, Agent("mcp"))))


# -- in-process: the mapping ----------------------------------------------------------------------


@pytest.mark.anyio
async def test_native_mode_lists_and_calls_tools(workspace: Path) -> None:
    """It lists the runtime's tools with their parameters and maps a success to text + structured."""
    with anyio.fail_after(20):
        async with serving(workspace) as client:
            listed = await client.list_tools()
            result = await client.call_tool("read_text", {"path": "docs/notes.md"})
    by_name = {tool.name: tool for tool in listed.tools}
    assert sorted(by_name) == ["grep", "list_files", "read_text", "write_text"]
    assert by_name["read_text"].input_schema["required"] == ["path"]
    assert "relative to the workspace root" in (by_name["read_text"].description or "")
    assert result.is_error is False
    assert [block.model_dump(exclude_none=True) for block in result.content] == [
        {"type": "text", "text": "# Notes\nserved over MCP\n"}]
    assert result.structured_content == {"path": "docs/notes.md", "text": "# Notes\nserved over MCP\n"}


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("name", "args", "code"),
    [("read_text", {"path": "../x"}, "DENIED"), ("nope", {}, "UNKNOWN_TOOL"),
     ("read_text", {"path": 3}, "INVALID_ARGS"), ("read_text", {}, "INVALID_ARGS")],
)
async def test_error_results_set_is_error_and_carry_the_code(workspace: Path, name: str, args: dict[str, Any],
                                                             code: str) -> None:
    """It maps error results to isError with "Error: ..." text and the stable code in _meta."""
    with anyio.fail_after(20):
        async with serving(workspace) as client:
            result = await client.call_tool(name, args)
    assert result.is_error is True
    text = result.content[0]
    assert isinstance(text, types.TextContent)
    assert text.text.startswith("Error: ")
    assert result.meta is not None
    assert result.meta[ERROR_META_KEY]["code"] == code
    assert result.structured_content is None


PROGRAM = """
listing = await tools.list_files()
notes = await tools.read_text({"path": listing["files"][0]})
print(listing["files"])
return notes["text"].splitlines()[0]
"""


@pytest.mark.anyio
async def test_code_mode_offers_run_code_with_the_sdk(workspace: Path) -> None:
    """It offers only run_code in code mode, with the SDK in its description and as a prompt and a
    resource, and runs a program that calls the workspace tools."""
    with anyio.fail_after(60):
        async with serving(workspace, mode="code") as client:
            listed = await client.list_tools()
            prompts = await client.list_prompts()
            prompt = await client.get_prompt(SDK_PROMPT)
            resources = await client.list_resources()
            resource = await client.read_resource(SDK_URI)
            ran = await client.call_tool("run_code", {"code": PROGRAM, "description": "Read the notes"})
            direct = await client.call_tool("read_text", {"path": "docs/notes.md"})
    assert [tool.name for tool in listed.tools] == ["run_code"]
    description = listed.tools[0].description or ""
    assert description.startswith("Execute a Python program")
    assert "class ReadTextArgs(TypedDict):" in description
    assert [p.name for p in prompts.prompts] == ["codemode_sdk"]
    message = prompt.messages[0].content
    assert isinstance(message, types.TextContent)
    assert message.text in description
    assert "def grep(" in message.text
    assert [str(r.uri) for r in resources.resources] == ["codemode://sdk"]
    contents = resource.contents[0]
    assert isinstance(contents, types.TextResourceContents)
    assert contents.text == message.text
    assert ran.is_error is False, ran.content
    assert ran.structured_content == {"logs": ["['docs/notes.md']"], "result": "# Notes"}
    assert direct.is_error is True  # collapsed: native tools are reachable only from programs
    assert direct.meta is not None
    assert direct.meta[ERROR_META_KEY]["code"] == "UNKNOWN_TOOL"


@pytest.mark.anyio
async def test_both_mode_offers_native_tools_and_run_code(workspace: Path) -> None:
    """It offers the native tools next to run_code in both mode."""
    with anyio.fail_after(20):
        async with serving(workspace, mode="both") as client:
            listed = await client.list_tools()
            direct = await client.call_tool("list_files", {})
    assert sorted(tool.name for tool in listed.tools) == ["grep", "list_files", "read_text", "run_code",
                                                           "write_text"]
    assert direct.structured_content == {"files": ["docs/notes.md"], "truncated": False}


@pytest.mark.anyio
async def test_native_mode_offers_no_sdk_prompt(workspace: Path) -> None:
    """It offers no SDK prompt or resource when nothing is collapsed into code."""
    with anyio.fail_after(20):
        async with serving(workspace) as client:
            assert (await client.list_prompts()).prompts == []
            assert (await client.list_resources()).resources == []


@pytest.mark.anyio
async def test_one_agent_per_session_records_the_calls(workspace: Path) -> None:
    """It runs every call as a model-level call of the session's agent, recorded in its event log."""
    agent = Agent("mcp")
    with anyio.fail_after(20):
        async with ToolRuntime() as rt:
            for definition in toolset():
                rt.register(definition)
            async with Client(build_server(rt, agent)) as client:
                await client.call_tool("refuse", {"why": "testing"})
                await client.call_tool("list_files", {})
    events = [(event.type, event.data.get("name")) for event in agent.events]
    assert events == [("tool/call", "refuse"), ("tool/result", "refuse"), ("tool/call", "list_files"),
                      ("tool/result", "list_files")]


# -- spawned: codemode serve over stdio, proxying the real git and time servers ----------------------


UPSTREAM_PROGRAM = """
listing = await tools.vcs_git_show({"repo_path": "ROOT", "revision": "HEAD:docs"})
notes = await tools.repo_git_show(repo_path="ROOT", revision="HEAD:docs/notes.md")
print(listing["text"])
return notes["text"]
"""


def _entry_params(workspace: Path, *args: str) -> StdioServerParameters:
    env = {"PYTHONPATH": str(REPO), "PATH": os.environ.get("PATH", "")}
    return StdioServerParameters(command=sys.executable, args=["-m", "codemode", "serve", *args], env=env,
                                 cwd=workspace)


@asynccontextmanager
async def spawned(workspace: Path, *args: str) -> AsyncIterator[ClientSession]:
    params = _entry_params(workspace, *args)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


@pytest.mark.anyio
async def test_serve_over_stdio_proxies_upstream_servers(workspace: Path) -> None:
    """It serves native tools and three upstreams' tools over stdio (two colliding git servers, hence
    prefixed, and a time server that keeps its names); calls reach the upstreams and come back mapped."""
    repo = make_repository(workspace / "repo")
    notes_text = REPOSITORY_FILES["docs/notes.md"]
    upstreams = [upstream_spec(git_server(repo, "vcs")), upstream_spec(git_server(repo, "repo")),
                 upstream_spec(time_server("clock"))]
    with anyio.fail_after(90):
        async with spawned(workspace, "--mode", "both", "--toolset", TOOLSET,
                           *[arg for spec in upstreams for arg in ("--upstream", spec)],
                           "--events", "events.jsonl") as session:
            names = {tool.name for tool in (await session.list_tools()).tools}
            native = await session.call_tool("list_files", {"dir": "docs"})
            listing = await session.call_tool("vcs_git_show", {"repo_path": str(repo),
                                                               "revision": "HEAD:docs"})
            read = await session.call_tool("repo_git_show", {"repo_path": str(repo),
                                                             "revision": "HEAD:docs/notes.md"})
            clock = await session.call_tool("convert_time", {"source_timezone": "UTC", "time": "12:00",
                                                             "target_timezone": "Asia/Tokyo"})
            denied = await session.call_tool("vcs_git_show", {"repo_path": "/etc", "revision": "HEAD"})
            refused = await session.call_tool("refuse", {"why": "because"})
            program = UPSTREAM_PROGRAM.replace("ROOT", str(repo))
            ran = await session.call_tool("run_code", {"code": program, "description": "Read the repository"})
    assert {"read_text", "list_files", "refuse", "vcs_git_show", "repo_git_show", "get_current_time",
            "convert_time"} <= names
    assert "git_show" not in names  # both git upstreams offer it: prefixed with the server names
    assert native.structured_content == {"files": ["docs/notes.md"], "truncated": False}
    assert listing.is_error is False
    assert listing.content[0].model_dump()["text"] == "notes.md"
    assert read.structured_content is not None
    assert read.structured_content["text"] == notes_text
    assert clock.structured_content is not None
    assert clock.structured_content["structured"]["time_difference"] == "+9.0h"
    assert denied.is_error is True
    assert denied.meta is not None
    assert denied.meta[ERROR_META_KEY]["code"] == "TOOL_FAILED"
    message = denied.meta[ERROR_META_KEY]["message"]
    assert 'upstream MCP tool "git_show" (server "vcs") reported an error' in message
    assert "is outside the allowed repository" in message
    assert refused.is_error is True
    assert "refused: because" in refused.content[0].model_dump()["text"]
    assert ran.is_error is False, ran.content
    assert ran.structured_content == {"logs": ["notes.md"], "result": notes_text}
    logged = [json.loads(line) for line in (workspace / "events.jsonl").read_text().splitlines()]
    assert [(event["type"], event["data"].get("name")) for event in logged][-6:] == [
        ("tool/call", "run_code"),
        ("tool/code-dispatch-start", "vcs_git_show"), ("tool/code-dispatch", "vcs_git_show"),
        ("tool/code-dispatch-start", "repo_git_show"), ("tool/code-dispatch", "repo_git_show"),
        ("tool/result", "run_code"),
    ]
    assert [event["type"] for event in logged[:12]] == ["tool/call", "tool/result"] * 6


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--toolset", "nosuchmodule:x"], "cannot import 'nosuchmodule'"),
        (["--toolset", "no-colon"], "must look like MODULE:ATTR"),
        (["--toolset", f"{TOOLSET.split(':')[0]}:missing"], "has no attribute 'missing'"),
        (["--toolset", "codemode.tools.workspace:DEFAULT_LIMITS"], "is not a list of tool definitions"),
        (["--toolset", "codemode.tools.workspace:GrepMatch"], "calling GrepMatch() failed"),
        (["--toolset", TOOLSET, "--upstream", "fs='unterminated"], "No closing quotation"),
        (["--toolset", TOOLSET, "--upstream", "/nonexistent/mcp-server"], "could not be started"),
        (["--toolset", TOOLSET, "--upstream", f"{sys.executable} -c pass"], "upstream MCP server"),
    ],
)
async def test_bad_serve_arguments_return_2_with_a_message(args: list[str], message: str,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """It returns exit status 2 and prints a clear message for bad toolsets and upstreams."""
    parser = argparse.ArgumentParser()
    add_serve_arguments(parser)
    with anyio.fail_after(30):
        status = await run_serve(parser.parse_args(["--mode", "native", *args]))
    captured = capsys.readouterr()
    assert status == 2
    assert captured.err.startswith("codemode serve: ")
    assert message in captured.err
    assert captured.out == ""


def test_serve_arguments_parse_with_defaults() -> None:
    """It defaults to code mode, the current directory and auto prefixing, and accepts repeats."""
    parser = argparse.ArgumentParser()
    add_serve_arguments(parser)
    defaults = parser.parse_args([])
    assert (defaults.mode, defaults.workspace, defaults.upstream_prefix) == ("code", ".", False)
    assert defaults.toolset == []
    given = parser.parse_args(["--mode", "both", "--upstream", "a", "--upstream", "b", "--upstream-prefix"])
    assert (given.mode, given.upstream, given.upstream_prefix) == ("both", ["a", "b"], True)
    with pytest.raises(SystemExit):
        parser.parse_args(["--mode", "weird"])


def test_spawned_serve_exits_2_on_a_bad_toolset(workspace: Path) -> None:
    """It exits the process with status 2 and keeps stdout (the MCP channel) clean."""
    params = _entry_params(workspace, "--mode", "native", "--toolset", "nosuchmodule:x")
    done = subprocess.run([params.command, *params.args], cwd=workspace, env=params.env, input="",
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2, done.stderr
    assert "cannot import 'nosuchmodule'" in done.stderr
    assert done.stdout == ""


# -- live progress and logging while run_code runs ---------------------------------------------------

LIVE_PROGRAM = """
await tools.list_files()
print("line one\\nline two")
try:
    await tools.read_text(path="../outside")
except ToolCallError:
    pass
return await tools.wait_for_news()
"""


@pytest.mark.anyio
async def test_run_code_sends_progress_and_log_notifications_as_they_happen(workspace: Path) -> None:
    """Each settled child call is a progress notification (count and call) and each printed text a
    logging notification, sent while the program runs: its last call waits until the client heard both."""
    heard_progress, heard_log = anyio.Event(), anyio.Event()

    @tool
    async def wait_for_news() -> str:
        """Wait until the client has heard of the program's progress and output."""
        await heard_progress.wait()
        await heard_log.wait()
        return "heard"

    progress: list[tuple[float, float | None, str | None]] = []
    logs: list[tuple[str, str | None, Any]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))
        heard_progress.set()

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append((params.level, params.logger, params.data))
        heard_log.set()

    relay = ProgressRelay()
    with anyio.fail_after(60):
        async with CodeMode(tools=[*workspace_tools(workspace), wait_for_news], on_log=relay.on_log) as cm:
            server = build_server(cm.runtime, cm.agent, relay=relay)
            async with Client(server, logging_callback=on_log, log_level="info") as client:
                result = await client.call_tool("run_code", {"code": LIVE_PROGRAM, "description": "live"},
                                                progress_callback=on_progress)
                quiet = await client.call_tool("run_code", {"code": "print('x')\nreturn 1",
                                                            "description": "no token"})
    assert result.is_error is False, result.content
    assert progress == [(1, None, "mcp-1:code:1 list_files ok"), (2, None, "mcp-1:code:2 read_text DENIED"),
                        (3, None, "mcp-1:code:3 wait_for_news ok")]
    assert logs == [("info", "run_code", "line one\nline two"), ("info", "run_code", "x")]
    assert quiet.is_error is False and len(progress) == 3  # no token: no progress


@pytest.mark.anyio
async def test_spawned_serve_sends_progress_and_logs_over_stdio(workspace: Path) -> None:
    """The `codemode serve` process sends the notifications over its JSON-RPC stdio channel, and writes
    --events while the session is still open."""
    progress: list[str | None] = []
    logs: list[Any] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(message)

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params.data)

    params = _entry_params(workspace, "--mode", "code", "--workspace", str(workspace),
                           "--events", "events.jsonl")
    program = ('await tools.list_files()\nprint("listed")\n'
               'await tools.read_text(path="docs/notes.md")\nreturn 1')
    with anyio.fail_after(60):
        async with stdio_client(params) as (read, write), ClientSession(
                read, write, logging_callback=on_log, log_level="info") as session:
            await session.initialize()
            result = await session.call_tool("run_code", {"code": program, "description": "stdio"},
                                             progress_callback=on_progress)
            live = (workspace / "events.jsonl").read_text(encoding="utf-8").splitlines()
    assert result.is_error is False, result.content
    assert progress == ["mcp-1:code:1 list_files ok", "mcp-1:code:2 read_text ok"]
    assert logs == ["listed"]
    assert [json.loads(line)["type"] for line in live] == [
        "tool/call", "tool/code-dispatch-start", "tool/code-dispatch", "tool/code-dispatch-start",
        "tool/code-dispatch", "tool/result"]
