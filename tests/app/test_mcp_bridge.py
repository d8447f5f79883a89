"""The MCP bridge, client side: real third-party MCP servers (the reference git and time servers, from
PyPI through the ``dev`` extra) bridged into codemode tools, plus the naming rules and the value/error
mapping."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codemode.app._mcp_convert import bridged_definition, output_schema_for, value_of
from codemode.app._mcp_names import assign_tool_names, server_slug, unique_server_names
from codemode.app.mcp_bridge import McpBridge, UpstreamServer, parse_upstream
from codemode.runtime import ToolRuntime
from codemode.runtime.errors import ToolArgsError, ToolError, UsageError
from codemode.tools.run_code import PythonCodeRuntime

from .fixtures import COMMIT_MESSAGE, REPOSITORY_FILES, git_server, make_repository, time_server

NOTES = REPOSITORY_FILES["docs/notes.md"]


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_repository(tmp_path_factory.mktemp("mcp") / "served")


@pytest.fixture(scope="module")
async def bridge(repo: Path) -> AsyncIterator[McpBridge]:
    """One session with the git and time servers, shared by the read-only tests of this module."""
    with anyio.fail_after(60):
        async with McpBridge([git_server(repo, "git"), time_server("clock")]) as connected:
            yield connected


def _tool(bridge: McpBridge, name: str) -> Any:
    return next(t.definition for t in bridge.tools if t.name == name)


# -- against the real reference servers -----------------------------------------------------------


@pytest.mark.anyio
async def test_upstream_tools_become_raw_definitions(bridge: McpBridge) -> None:
    """It lists the upstreams' tools under their own names with their input schemas as parameters."""
    names = {tool.name for tool in bridge.tools}
    assert {"git_status", "git_log", "git_show", "git_add", "git_commit", "get_current_time",
            "convert_time"} <= names
    assert bridge.server_names == ("git", "clock")
    show = _tool(bridge, "git_show")
    assert show.parameters["type"] == "object"
    assert {"repo_path", "revision"} <= set(show.parameters["properties"])
    assert "$schema" not in show.parameters
    assert show.validate_arguments is None
    assert "upstream server 'git'" in show.description
    assert "upstream server 'clock'" in _tool(bridge, "convert_time").description


@pytest.mark.anyio
async def test_read_only_tools_are_concurrency_safe(bridge: McpBridge) -> None:
    """It marks readOnlyHint tools concurrency-safe and leaves writers exclusive."""
    for reader in ("git_show", "git_log", "git_status", "convert_time"):
        assert _tool(bridge, reader).is_concurrency_safe({"repo_path": "x"}) is True
    for writer in ("git_commit", "git_add", "git_reset"):
        assert _tool(bridge, writer).is_concurrency_safe is None


@pytest.mark.anyio
async def test_listing_and_reading_through_the_upstream(bridge: McpBridge, repo: Path) -> None:
    """It forwards calls and returns {text, content} values that render as content."""
    with anyio.fail_after(30):
        log = await _tool(bridge, "git_log").execute({"repo_path": str(repo)}, None)
        show = _tool(bridge, "git_show").execute
        tree = await show({"repo_path": str(repo), "revision": "HEAD:"}, None)
        text = await show({"repo_path": str(repo), "revision": "HEAD:docs/notes.md"}, None)
    assert f"Message: {COMMIT_MESSAGE}" in log["text"]
    assert "Author: Codemode Tests" in log["text"]
    assert tree["text"].splitlines() == ["a.txt", "docs/"]
    assert text["text"] == NOTES
    assert text["content"] == [{"type": "text", "text": NOTES}]
    assert "structured" not in text  # this tool declares no structured output
    rendered = _tool(bridge, "git_show").output.render({}, text)
    assert rendered == [{"type": "text", "text": NOTES}]


@pytest.mark.anyio
async def test_structured_content_passes_through_with_its_schema(bridge: McpBridge) -> None:
    """It keeps an upstream's structuredContent beside the text and adopts a declared output schema that
    fits the supported subset."""
    with anyio.fail_after(30):
        now = await _tool(bridge, "get_current_time").execute({"timezone": "Asia/Tokyo"}, None)
        converted = await _tool(bridge, "convert_time").execute(
            {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}, None)
    assert now["structured"]["timezone"] == "Asia/Tokyo"
    assert now["structured"]["datetime"].endswith("+09:00")
    assert _tool(bridge, "get_current_time").output.schema["properties"]["structured"]["type"] == "object"
    assert converted["structured"]["time_difference"] == "+9.0h"
    assert converted["structured"]["target"]["datetime"].endswith("T21:00:00+09:00")


@pytest.mark.anyio
@pytest.mark.parametrize(("arguments", "message"), [
    ({"revision": "no-such-revision"}, "Ref 'no-such-revision' did not resolve to an object"),
    ({"repo_path": "/etc", "revision": "HEAD"}, "is outside the allowed repository"),
])
async def test_upstream_error_results_become_tool_errors(bridge: McpBridge, repo: Path,
                                                         arguments: dict[str, str], message: str) -> None:
    """It maps an isError result (an unknown revision, a path outside the upstream's repository) to a
    ToolError naming the tool and the server."""
    with anyio.fail_after(30), pytest.raises(ToolError) as caught:
        await _tool(bridge, "git_show").execute({"repo_path": str(repo), **arguments}, None)
    assert caught.value.code == "TOOL_FAILED"
    assert 'upstream MCP tool "git_show" (server "git") reported an error' in str(caught.value)
    assert message in str(caught.value)


@pytest.mark.anyio
async def test_non_object_arguments_are_rejected_locally(bridge: McpBridge) -> None:
    """It refuses non-object arguments before sending anything upstream."""
    with pytest.raises(ToolArgsError, match='"arguments" must be an object'):
        await _tool(bridge, "git_status").execute(["x"], None)


@pytest.mark.anyio
async def test_two_upstreams_with_the_same_tools_are_prefixed(repo: Path) -> None:
    """It prefixes colliding tool names with their server names, for every upstream involved (an unnamed
    one by the name it reports); a third upstream nothing collides with keeps its names (the spawned
    ``codemode serve`` test checks that)."""
    with anyio.fail_after(60):
        async with McpBridge([git_server(repo, "one"), git_server(repo)]) as bridge:
            names = {tool.name for tool in bridge.tools}
            assert bridge.server_names == ("one", "mcp_git")
            assert {"one_git_show", "mcp_git_git_show"} <= names
            assert "git_show" not in names
            value = await _tool(bridge, "one_git_show").execute(
                {"repo_path": str(repo), "revision": "HEAD:a.txt"}, None)
            assert value["text"] == "alpha\n"


@pytest.mark.anyio
async def test_prefix_always_prefixes_every_tool(repo: Path) -> None:
    """It registers every upstream tool as <server>_<tool> with prefix="always"."""
    with anyio.fail_after(60):
        async with McpBridge([git_server(repo, "vcs")], prefix="always") as bridge:
            assert bridge.tools
            assert all(tool.name == f"vcs_{tool.upstream_name}" for tool in bridge.tools)


@pytest.mark.anyio
async def test_sessions_end_with_the_block(repo: Path) -> None:
    """It closes the sessions on exit, so a call afterwards is an error result, not a hang."""
    with anyio.fail_after(60):
        async with McpBridge([git_server(repo, "git")]) as bridge:
            definition = _tool(bridge, "git_status")
        assert bridge.tools == ()
        with pytest.raises(ToolError, match="upstream MCP server"):
            await definition.execute({"repo_path": str(repo)}, None)


@pytest.mark.anyio
async def test_an_upstream_that_cannot_start_is_a_usage_error(tmp_path: Path) -> None:
    """It raises a clear UsageError for a command that does not exist or is not an MCP server."""
    with anyio.fail_after(30):
        with pytest.raises(UsageError, match="could not be started"):
            async with McpBridge([UpstreamServer(command=str(tmp_path / "missing-server"))]):
                pass
        with pytest.raises(UsageError, match="upstream MCP server"):
            async with McpBridge([UpstreamServer(command=sys.executable, args=("-c", "pass"))],
                                 connect_timeout_s=10):
                pass


# -- parsing and naming ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("npx -y pkg /data", UpstreamServer("npx", ("-y", "pkg", "/data"))),
        ("fs=npx pkg 'a b'", UpstreamServer("npx", ("pkg", "a b"), name="fs")),
        ("/usr/bin/srv --x=1", UpstreamServer("/usr/bin/srv", ("--x=1",))),
        ("./srv a=b", UpstreamServer("./srv", ("a=b",))),
    ],
)
def test_parse_upstream(spec: str, expected: UpstreamServer) -> None:
    """It splits shell-style and takes an optional NAME= prefix."""
    assert parse_upstream(spec) == expected


@pytest.mark.parametrize(("spec", "message"), [("", "needs a command"), ("   ", "needs a command"),
                                                ("fs='unterminated", "No closing quotation"),
                                                ("fs=", "no command"), ("1x=cmd", "Python identifier")])
def test_parse_upstream_rejects_bad_specs(spec: str, message: str) -> None:
    """It rejects empty, unbalanced or badly named specs with a usage error."""
    with pytest.raises(UsageError, match=message):
        parse_upstream(spec)


@pytest.mark.parametrize(("raw", "slug"), [("secure-filesystem-server", "secure_filesystem_server"),
                                           ("My Server!", "my_server"), ("", "upstream"), (None, "upstream"),
                                           ("---", "upstream")])
def test_server_slug(raw: str | None, slug: str) -> None:
    """It reduces server names to [a-z0-9_]."""
    assert server_slug(raw) == slug


def test_unique_server_names() -> None:
    """It suffixes repeated server names in order."""
    assert unique_server_names(["fs", "git", "fs", "fs"]) == ["fs", "git", "fs_2", "fs_3"]


@pytest.mark.parametrize(
    ("servers", "always", "taken", "expected"),
    [
        ([("a", ["x", "y"]), ("b", ["z"])], False, [], [["x", "y"], ["z"]]),
        ([("a", ["x", "y"]), ("b", ["x"])], False, [], [["a_x", "y"], ["b_x"]]),
        ([("a", ["x"])], True, [], [["a_x"]]),
        ([("a", ["echo", "run_code"])], False, ["echo"], [["a_echo", "a_run_code"]]),
        ([("a", ["x", "a_x"]), ("b", ["x"])], False, [], [["a_x", "a_a_x"], ["b_x"]]),
        ([("a", ["x", "a_x"]), ("a", ["x"])], False, [], [["a_x", "a_a_x"], ["a_x_2"]]),
    ],
)
def test_assign_tool_names(servers: list[tuple[str, list[str]]], always: bool, taken: list[str],
                           expected: list[list[str]]) -> None:
    """It keeps names, prefixes collisions, reserved and taken names, and suffixes what still clashes."""
    assert assign_tool_names(servers, always_prefix=always, taken=taken) == expected


def test_assigned_names_are_unique_and_stable() -> None:
    """It never assigns one name twice and gives the same answer for the same input."""
    servers = [("a", ["x", "a_x", "b_x"]), ("b", ["x", "a_x"]), ("a_2", ["x"])]
    first = assign_tool_names(servers, taken=["b_x"])
    flat = [name for names in first for name in names]
    assert len(flat) == len(set(flat))
    assert first == assign_tool_names(servers, taken=["b_x"])


# -- value and error mapping ----------------------------------------------------------------------


def _result(*texts: str, is_error: bool = False, structured: Any = None) -> types.CallToolResult:
    blocks: list[Any] = [types.TextContent(type="text", text=t) for t in texts]
    return types.CallToolResult(content=blocks, is_error=is_error, structured_content=structured)


def test_value_of_joins_text_and_keeps_blocks() -> None:
    """It joins text blocks, keeps every block and passes structured content through."""
    value = value_of(_result("a", "b", structured={"k": 1}), server="s", tool="t")
    blocks = [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]
    assert value == {"text": "a\nb", "content": blocks, "structured": {"k": 1}}
    assert "structured" not in value_of(_result("a"), server="s", tool="t")


def test_value_of_error_without_text() -> None:
    """It still explains an isError result that carries no text."""
    with pytest.raises(ToolError, match="reported an error: no error text"):
        value_of(_result(is_error=True), server="s", tool="t")


def test_output_schema_uses_a_supported_declared_schema() -> None:
    """It adopts the upstream output schema when it fits the subset and falls back to any JSON."""
    good = types.Tool(name="t", input_schema={"type": "object"}, output_schema={
        "$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
        "properties": {"content": {"type": "string"}}, "required": ["content"],
        "additionalProperties": False})
    bad = types.Tool(name="t", input_schema={"type": "object"},
                     output_schema={"type": "object", "properties": {"n": {"type": "number", "minimum": 0}}})
    assert output_schema_for(good)["properties"]["structured"]["type"] == "object"
    assert "type" not in output_schema_for(bad)["properties"]["structured"]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("raised", "message"),
    [
        (RuntimeError("boom"), 'failed the call to "t": boom'),
        (anyio.ClosedResourceError(), "is no longer connected"),
    ],
)
async def test_call_failures_become_tool_errors(raised: Exception, message: str) -> None:
    """It maps client-library failures to ToolErrors naming the server."""
    async def call(_name: str, _args: dict[str, Any]) -> types.CallToolResult:
        raise raised

    definition = bridged_definition(types.Tool(name="t", input_schema={"type": "object"}), name="t",
                                    server="s", call=call, timeout_s=None)
    with pytest.raises(ToolError, match=message):
        await definition.execute({}, None)


@pytest.mark.anyio
async def test_call_timeout_becomes_a_tool_error() -> None:
    """It bounds a call by timeout_s and says so."""
    async def call(_name: str, _args: dict[str, Any]) -> types.CallToolResult:
        await anyio.sleep(10)
        raise AssertionError("not reached")

    definition = bridged_definition(types.Tool(name="t", input_schema={"type": "object"}), name="t",
                                    server="s", call=call, timeout_s=0.05)
    with anyio.fail_after(5), pytest.raises(ToolError, match=r"did not answer within 0\.05s"):
        await definition.execute({}, None)


# -- failure modes (a tiny fixture server) and programs through the pipeline ----------------------

TINY = Path(__file__).resolve().parent / "fixtures" / "tiny_mcp_server.py"


@pytest.mark.anyio
async def test_upstream_failures_are_error_results_and_the_host_survives(tmp_path: Path) -> None:
    """It prefixes taken and reserved names, maps a JSON-RPC error and a dying upstream to error results,
    fails later calls fast and clearly, and still exits cleanly."""
    with (tmp_path / "tiny.err").open("w") as errlog, anyio.fail_after(60):
        tiny = McpBridge([UpstreamServer(sys.executable, (str(TINY),), name="tiny")], taken=["echo"],
                         errlog=errlog)
        async with ToolRuntime() as rt, tiny as bridge:
            bridge.register(rt)
            names = [tool.name for tool in bridge.tools]
            ok = await rt.execute("tiny_echo", {"text": "hi"})
            boom = await rt.execute("boom", {})
            died = await rt.execute("die", {})
            after = await rt.execute("tiny_echo", {"text": "again"})
    assert names == ["tiny_echo", "boom", "die", "tiny_run_code"]
    warning = "codemode: skipping 1 unnamed tool(s) of upstream MCP server 'tiny'"
    assert warning in (tmp_path / "tiny.err").read_text()
    assert ok.value == {"text": "hi", "content": [{"type": "text", "text": "hi"}]}
    assert boom.error is not None
    assert boom.error.code == "TOOL_FAILED"
    assert 'failed the call to "boom": kaboom' in boom.error.message
    for result in (died, after):
        assert result.error is not None
        assert result.error.code == "TOOL_FAILED"
        assert 'upstream MCP server "tiny" is no longer connected' in result.error.message


@pytest.mark.anyio
async def test_a_program_reads_the_repository_through_the_upstream(repo: Path) -> None:
    """It lets a run_code program call the bridged tools as tools.<name>, through the whole pipeline."""
    program = f"""
import asyncio
log, notes = await asyncio.gather(tools.git_log({{"repo_path": "{repo}", "max_count": 1}}),
                                  tools.git_show(repo_path="{repo}", revision="HEAD:docs/notes.md"))
print(log["text"].splitlines()[-2])
return notes["text"]
"""
    with anyio.fail_after(60):
        async with (PythonCodeRuntime() as code, ToolRuntime(mode="code", code_runtime=code) as rt,
                    McpBridge([git_server(repo, "git")]) as bridge):
            bridge.register(rt)
            result = await rt.execute("run_code", {"code": program, "description": "Read the repository"})
    assert result.error is None
    assert result.value == {"logs": [f"Message: {COMMIT_MESSAGE}"], "result": NOTES}


_NAMES = st.sampled_from(["x", "y", "a_x", "b_x", "run_code", "echo", "a", "b"])


_SERVERS = st.lists(st.tuples(st.sampled_from(["a", "b", "a_2"]), st.lists(_NAMES, max_size=4, unique=True)),
                    max_size=4)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(servers=_SERVERS, taken=st.lists(_NAMES, max_size=3), always=st.booleans())
def test_assigned_names_property(servers: list[tuple[str, list[str]]], taken: list[str],
                                 always: bool) -> None:
    """It always yields unique names that avoid taken and reserved ones, and keeps a tool's own name
    exactly when nothing forces a prefix."""
    assigned = assign_tool_names(servers, always_prefix=always, taken=taken)
    flat = [name for names in assigned for name in names]
    assert len(flat) == len(set(flat))
    assert "run_code" not in flat
    assert not set(flat) & set(taken)
    offered = [tool for _, tools in servers for tool in tools]
    position = 0
    for (server, tools), names in zip(servers, assigned, strict=True):
        for tool, name in zip(tools, names, strict=True):
            free = (not always and tool != "run_code" and tool not in taken and offered.count(tool) == 1
                    and tool not in flat[:position])
            assert (name == tool) == free
            assert free or name.startswith(f"{server}_{tool}")
            position += 1
