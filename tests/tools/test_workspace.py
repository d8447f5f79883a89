"""Workspace tools: confinement to the root (every escape form), limits, text handling, the tool layer."""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codemode.runtime import ResourceClaims, ToolRuntime
from codemode.runtime.errors import ToolArgsError, ToolDeniedError, ToolError, ToolExecutionError, UsageError
from codemode.runtime.scheduler import ToolCallRequest, execute_tool_calls
from codemode.tools.workspace import Workspace, WorkspaceLimits, workspace_tools

SECRET = "top secret, outside the root\n"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def tree(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """A workspace root with files, inside links and outside links, next to an outside directory."""
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    (root / "docs").mkdir(parents=True)
    (root / "src" / "pkg").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET)
    (root / "docs" / "notes.md").write_text("# Notes\nTODO: write more\n")
    (root / "src" / "app.py").write_text("print('hi')  # TODO later\n")
    (root / "src" / "pkg" / "mod.py").write_text("x = 1\n")
    (root / "link_inside.md").symlink_to("docs/notes.md")
    (root / "abs_link_inside.md").symlink_to(root / "docs" / "notes.md")
    (root / "docs_alias").symlink_to("docs")
    (root / "link_out_abs").symlink_to(outside / "secret.txt")
    (root / "link_out_rel").symlink_to("../outside/secret.txt")
    (root / "dir_out").symlink_to(outside)
    (root / "chain").symlink_to("link_out_rel")
    (root / "loop_a").symlink_to("loop_b")
    (root / "loop_b").symlink_to("loop_a")
    (root / "docs" / "up_link").symlink_to("../../outside/secret.txt")
    yield root, outside


@pytest.fixture
def ws(tree: tuple[Path, Path]) -> Workspace:
    return Workspace(tree[0])


def _outside_snapshot(outside: Path) -> dict[str, str]:
    return {str(p.relative_to(outside)): p.read_text() for p in sorted(outside.rglob("*")) if p.is_file()}


# -- lexical escapes ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    ["../outside/secret.txt", "docs/../../outside/secret.txt", "a/b/../../../x", "..", "./../x"],
)
def test_dotdot_escapes_are_denied(ws: Workspace, path: str) -> None:
    """It refuses ``..`` that climbs above the root, naming the cause."""
    with pytest.raises(ToolDeniedError, match=r'escapes the workspace root through "\.\."'):
        ws.read_text(path)


@pytest.mark.parametrize("path", ["/etc/passwd", "//etc/passwd", "C:/Windows/win.ini", "c:\\x", "D:"])
def test_absolute_paths_are_denied(ws: Workspace, path: str) -> None:
    """It refuses absolute paths and says to use a root-relative one."""
    with pytest.raises(ToolDeniedError, match="is absolute; use a path relative to the workspace root"):
        ws.read_text(path)


def test_absolute_path_inside_root_is_still_denied(ws: Workspace, tree: tuple[Path, Path]) -> None:
    """It refuses absolute paths even when they name a file inside the root."""
    with pytest.raises(ToolDeniedError, match="is absolute"):
        ws.read_text(str(tree[0] / "docs" / "notes.md"))


@pytest.mark.parametrize("path", ["docs/notes.md\x00.txt", "\x00", "docs\x00/x"])
def test_nul_bytes_are_denied(ws: Workspace, path: str) -> None:
    """It refuses paths containing NUL bytes."""
    with pytest.raises(ToolDeniedError, match="NUL byte"):
        ws.read_text(path)


def test_empty_path_is_invalid(ws: Workspace) -> None:
    """It rejects an empty path as an invalid argument with a hint."""
    with pytest.raises(ToolArgsError, match=re.escape('must not be empty; use "." for the workspace root')):
        ws.read_text("")


@pytest.mark.parametrize("path", [".", "./", "docs/.."])
def test_root_is_not_a_file(ws: Workspace, path: str) -> None:
    """It refuses reading the root itself as a file."""
    with pytest.raises(ToolError, match=r"root|directory"):
        ws.read_text(path)


def test_non_string_path_is_invalid(ws: Workspace) -> None:
    """It rejects a path that is not a string."""
    with pytest.raises(ToolArgsError, match='"path" must be a string'):
        ws.read_text(42)


def test_inner_dotdot_stays_allowed(ws: Workspace) -> None:
    """It allows ``..`` that stays inside the root and echoes the normalised path."""
    assert ws.read_text("src/../docs/./notes.md") == ("docs/notes.md", "# Notes\nTODO: write more\n")


# -- symbolic links -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path", ["link_out_abs", "link_out_rel", "dir_out/secret.txt", "chain", "docs/up_link"]
)
def test_links_pointing_outside_are_denied(ws: Workspace, path: str) -> None:
    """It refuses file links, chained links and symlinked parent directories that lead outside."""
    with pytest.raises(ToolDeniedError, match="points outside the workspace root"):
        ws.read_text(path)


def test_link_loops_fail_cleanly(ws: Workspace) -> None:
    """It stops a link loop with a clear error instead of spinning."""
    with pytest.raises(ToolExecutionError, match="too many levels of symbolic links"):
        ws.read_text("loop_a")


@pytest.mark.parametrize("path", ["link_inside.md", "abs_link_inside.md", "docs_alias/notes.md"])
def test_links_inside_the_root_work(ws: Workspace, path: str) -> None:
    """It follows links whose targets stay inside the root."""
    shown, text = ws.read_text(path)
    assert shown == path
    assert text.startswith("# Notes")


@pytest.mark.parametrize("path", ["link_out_abs", "link_out_rel", "dir_out/new.txt", "chain", "../x.txt"])
def test_writes_never_land_outside(ws: Workspace, tree: tuple[Path, Path], path: str) -> None:
    """It refuses writes through outside links and leaves everything outside untouched."""
    before = _outside_snapshot(tree[1])
    with pytest.raises(ToolDeniedError):
        ws.write_text(path, "pwned")
    assert _outside_snapshot(tree[1]) == before
    assert not (tree[0].parent / "x.txt").exists()


def test_write_through_inside_link_replaces_the_target(ws: Workspace, tree: tuple[Path, Path]) -> None:
    """It writes the file an inside link points to and keeps the link."""
    assert ws.write_text("link_inside.md", "new\n") == ("link_inside.md", 4)
    assert (tree[0] / "docs" / "notes.md").read_text() == "new\n"
    assert (tree[0] / "link_inside.md").is_symlink()


def test_parent_directory_swapped_for_link_is_refused(
    ws: Workspace, tree: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """It refuses, rather than follows, a directory replaced by an outside link mid-resolution (race)."""
    root, outside = tree
    original = Workspace._open_dir

    def swap_then_open(dir_fd: int, name: str, shown: str) -> int:
        if name == "src":
            os.rename(root / "src", root / "src_moved")
            os.symlink(outside, root / "src")
        return original(dir_fd, name, shown)

    monkeypatch.setattr(Workspace, "_open_dir", staticmethod(swap_then_open))
    with pytest.raises(ToolDeniedError, match="changed while it was being resolved"):
        ws.write_text("src/secret.txt", "pwned")
    assert (outside / "secret.txt").read_text() == SECRET


def test_file_swapped_for_link_before_open_is_refused(
    ws: Workspace, tree: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """It opens the final component with O_NOFOLLOW, so a last-moment link swap is refused."""
    root, outside = tree
    original = Workspace._read_bytes

    def swap_then_read(self: Workspace, dir_fd: int, name: str, shown: str, max_bytes: int) -> bytes:
        os.unlink(root / "docs" / "notes.md")
        os.symlink(outside / "secret.txt", root / "docs" / "notes.md")
        return original(self, dir_fd, name, shown, max_bytes)

    monkeypatch.setattr(Workspace, "_read_bytes", swap_then_read)
    with pytest.raises(ToolDeniedError, match="symbolic link while being opened"):
        ws.read_text("docs/notes.md")


SEGMENTS = st.sampled_from(["..", ".", "", "docs", "notes.md", "dir_out", "link_out_rel", "docs_alias", "x"])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=st.lists(SEGMENTS, min_size=1, max_size=6), absolute=st.booleans())
def test_no_path_reads_or_writes_outside(ws: Workspace, tree: tuple[Path, Path], parts: list[str],
                                         absolute: bool) -> None:
    """It never returns outside content nor changes anything outside, whatever the path."""
    path = ("/" if absolute else "") + "/".join(parts)
    before = _outside_snapshot(tree[1])
    try:
        _, text = ws.read_text(path)
    except ToolError:
        pass
    else:
        assert text != SECRET
    with contextlib.suppress(ToolError):
        ws.write_text(path + ".new", "written")
    assert _outside_snapshot(tree[1]) == before


# -- reading --------------------------------------------------------------------------------------


def test_read_keeps_line_endings(ws: Workspace, tree: tuple[Path, Path]) -> None:
    """It returns the text byte-for-byte, including CRLF line endings."""
    (tree[0] / "crlf.txt").write_bytes(b"a\r\nb\r\n")
    assert ws.read_text("crlf.txt")[1] == "a\r\nb\r\n"


def test_missing_file_is_a_clear_failure(ws: Workspace) -> None:
    """It names the missing file and points at list_files."""
    expected = re.escape("'docs/missing.md' does not exist; list_files shows")
    with pytest.raises(ToolExecutionError, match=expected):
        ws.read_text("docs/missing.md")


def test_missing_parent_is_a_clear_failure(ws: Workspace) -> None:
    """It names the missing directory."""
    with pytest.raises(ToolExecutionError, match="directory 'nope' does not exist"):
        ws.read_text("nope/file.txt")


def test_directory_is_not_readable(ws: Workspace) -> None:
    """It refuses reading a directory and points at list_files."""
    with pytest.raises(ToolExecutionError, match="is a directory; use list_files"):
        ws.read_text("docs")


def test_file_as_parent_is_a_clear_failure(ws: Workspace) -> None:
    """It says when a path component is a file, not a directory."""
    with pytest.raises(ToolExecutionError, match="is not a directory"):
        ws.read_text("docs/notes.md/x")


def test_oversized_file_is_refused(tree: tuple[Path, Path]) -> None:
    """It refuses files over the read cap instead of truncating them."""
    ws = Workspace(tree[0], limits=WorkspaceLimits(max_read_bytes=10))
    (tree[0] / "big.txt").write_text("x" * 11)
    (tree[0] / "ok.txt").write_text("x" * 10)
    with pytest.raises(ToolExecutionError, match="11 bytes, over the 10-byte limit"):
        ws.read_text("big.txt")
    assert ws.read_text("ok.txt")[1] == "x" * 10


@pytest.mark.parametrize(
    ("data", "message"),
    [(b"\x89PNG\r\n\x1a\n\x00\x00", "binary file"), (b"caf\xe9\n", "not UTF-8 text")],
)
def test_binary_and_undecodable_files_are_refused(ws: Workspace, tree: tuple[Path, Path], data: bytes,
                                                  message: str) -> None:
    """It refuses binary and non-UTF-8 files with a clear message."""
    (tree[0] / "blob.bin").write_bytes(data)
    with pytest.raises(ToolExecutionError, match=message):
        ws.read_text("blob.bin")


def test_fifo_is_refused_without_blocking(ws: Workspace, tree: tuple[Path, Path]) -> None:
    """It refuses special files such as FIFOs instead of blocking on them."""
    os.mkfifo(tree[0] / "pipe")
    with pytest.raises(ToolExecutionError, match="not a regular file"):
        ws.read_text("pipe")


# -- writing --------------------------------------------------------------------------------------


def test_write_creates_parents_and_counts_bytes(ws: Workspace, tree: tuple[Path, Path]) -> None:
    """It creates missing directories and reports the UTF-8 byte count."""
    assert ws.write_text("out/deep/report.txt", "héllo\n") == ("out/deep/report.txt", 7)
    assert (tree[0] / "out" / "deep" / "report.txt").read_text() == "héllo\n"
    assert ws.read_text("out/deep/report.txt")[1] == "héllo\n"


def test_write_replaces_atomically_and_leaves_no_temp(ws: Workspace, tree: tuple[Path, Path]) -> None:
    """It replaces an existing file and leaves no temporary file behind."""
    ws.write_text("docs/notes.md", "v2")
    assert (tree[0] / "docs" / "notes.md").read_text() == "v2"
    assert sorted(p.name for p in (tree[0] / "docs").iterdir()) == ["notes.md", "up_link"]


def test_write_does_not_write_through_hard_links(ws: Workspace, tree: tuple[Path, Path]) -> None:
    """It replaces the directory entry, so another hard link to the old file keeps its content."""
    os.link(tree[0] / "src" / "app.py", tree[1] / "hard.py")
    ws.write_text("src/app.py", "changed")
    assert (tree[1] / "hard.py").read_text() == "print('hi')  # TODO later\n"


@pytest.mark.parametrize(
    ("path", "text", "error", "message"),
    [
        ("docs", "x", ToolExecutionError, "is a directory"),
        ("a.txt", 5, ToolArgsError, '"text" must be a string'),
        ("a.txt", "\ud800", ToolArgsError, "cannot be encoded as UTF-8"),
        ("", "x", ToolArgsError, "must not be empty"),
    ],
)
def test_bad_writes_are_refused(ws: Workspace, path: str, text: object, error: type[ToolError],
                                message: str) -> None:
    """It refuses writes to directories and non-text payloads with specific errors."""
    with pytest.raises(error, match=message):
        ws.write_text(path, text)


def test_oversized_write_is_refused(tree: tuple[Path, Path]) -> None:
    """It refuses a write over the cap and creates nothing."""
    ws = Workspace(tree[0], limits=WorkspaceLimits(max_write_bytes=4))
    with pytest.raises(ToolExecutionError, match="5 bytes, over the 4-byte write limit"):
        ws.write_text("w.txt", "12345")
    assert not (tree[0] / "w.txt").exists()


# -- listing and grep -----------------------------------------------------------------------------


def test_list_files_is_sorted_recursive_and_confined(ws: Workspace, tree: tuple[Path, Path]) -> None:
    """It lists regular files and inside links, never outside links or symlinked directories."""
    (tree[0] / ".git").mkdir()
    (tree[0] / ".git" / "HEAD").write_text("ref")
    files, truncated = ws.list_files(".")
    assert files == [
        "abs_link_inside.md",
        "docs/notes.md",
        "link_inside.md",
        "src/app.py",
        "src/pkg/mod.py",
    ]
    assert truncated is False


@pytest.mark.parametrize(("directory", "expected"), [("src", ["src/app.py", "src/pkg/mod.py"]),
                                                     ("docs_alias", ["docs/notes.md"]),
                                                     (None, None)])
def test_list_files_of_a_subdirectory(ws: Workspace, directory: str | None,
                                      expected: list[str] | None) -> None:
    """It lists a subdirectory with root-relative paths and defaults to the root."""
    files, _ = ws.list_files(directory)
    if expected is None:
        assert files == ws.list_files(".")[0]
    else:
        assert files == expected


@pytest.mark.parametrize("directory", ["dir_out", "../outside", "/tmp"])
def test_list_files_refuses_escapes(ws: Workspace, directory: str) -> None:
    """It refuses listing directories outside the root."""
    with pytest.raises(ToolDeniedError):
        ws.list_files(directory)


def test_list_files_is_bounded(tree: tuple[Path, Path]) -> None:
    """It stops at the cap and says the list was truncated."""
    ws = Workspace(tree[0], limits=WorkspaceLimits(max_list_files=2))
    files, truncated = ws.list_files()
    assert len(files) == 2
    assert truncated is True


def test_grep_finds_lines_in_order(ws: Workspace) -> None:
    """It returns root-relative paths, 1-based line numbers and the line text."""
    matches, truncated = ws.grep(r"TODO\b")
    assert [(m.path, m.line, m.text) for m in matches] == [
        ("abs_link_inside.md", 2, "TODO: write more"),
        ("docs/notes.md", 2, "TODO: write more"),
        ("link_inside.md", 2, "TODO: write more"),
        ("src/app.py", 1, "print('hi')  # TODO later"),
    ]
    assert truncated is False


def test_grep_never_reads_outside(ws: Workspace) -> None:
    """It does not search files reached through outside links."""
    assert ws.grep("secret")[0] == []


def test_grep_skips_binary_and_big_files_and_cuts_long_lines(tree: tuple[Path, Path]) -> None:
    """It skips binary and over-size files and shortens long matching lines."""
    ws = Workspace(tree[0], limits=WorkspaceLimits(max_grep_file_bytes=100, max_grep_line_chars=5))
    (tree[0] / "bin.dat").write_bytes(b"needle\x00")
    (tree[0] / "big.txt").write_text("needle\n" * 50)
    (tree[0] / "long.txt").write_text("needle in a long line\n")
    matches, _ = ws.grep("needle")
    assert [(m.path, m.text) for m in matches] == [("long.txt", "needl...")]


def test_grep_is_bounded(tree: tuple[Path, Path]) -> None:
    """It stops at the match cap and says so."""
    ws = Workspace(tree[0], limits=WorkspaceLimits(max_grep_matches=1))
    matches, truncated = ws.grep("TODO")
    assert len(matches) == 1
    assert truncated is True


def test_grep_on_a_single_file(ws: Workspace) -> None:
    """It accepts a file as the search scope."""
    assert [m.path for m in ws.grep("print", "src/app.py")[0]] == ["src/app.py"]


@pytest.mark.parametrize(("pattern", "message"), [("(", "not a valid RE2 regular expression"),
                                                  ("", "must not be empty"), (3, "must be a string")])
def test_grep_rejects_bad_patterns(ws: Workspace, pattern: object, message: str) -> None:
    """It rejects invalid patterns as invalid arguments."""
    with pytest.raises(ToolArgsError, match=message):
        ws.grep(pattern)


# -- construction ---------------------------------------------------------------------------------


def test_root_must_exist_and_be_a_directory(tmp_path: Path) -> None:
    """It raises a usage error for a missing or non-directory root."""
    with pytest.raises(UsageError, match="does not exist"):
        Workspace(tmp_path / "missing")
    (tmp_path / "f").write_text("")
    with pytest.raises(UsageError, match="is not a directory"):
        Workspace(tmp_path / "f")


@pytest.mark.parametrize("value", [0, -1, True, 1.5])
def test_limits_are_validated(value: object) -> None:
    """It rejects non-positive or non-integer limits."""
    with pytest.raises(UsageError, match="must be a positive integer"):
        WorkspaceLimits(max_read_bytes=value)  # type: ignore[arg-type]


# -- the tool layer, through the full pipeline ----------------------------------------------------


@pytest.fixture
async def rt(tree: tuple[Path, Path]) -> AsyncIterator[ToolRuntime]:
    async with ToolRuntime() as runtime:
        for definition in workspace_tools(tree[0]):
            runtime.register(definition)
        yield runtime


@pytest.mark.anyio
async def test_tools_round_trip_through_the_pipeline(rt: ToolRuntime, tree: tuple[Path, Path]) -> None:
    """It writes, reads, lists and greps through rt.execute with the documented value shapes."""
    with anyio.fail_after(10):
        written = await rt.execute("write_text", {"path": "out/r.txt", "text": "TODO: x\n"})
        read = await rt.execute("read_text", {"path": "out/r.txt"})
        listed = await rt.execute("list_files", {"dir": "out"})
        found = await rt.execute("grep", {"pattern": "TODO", "dir": "out"})
        everything = await rt.execute("list_files", {})
    assert written.value == {"path": "out/r.txt", "bytes": 8}
    assert written.content == [{"type": "text", "text": "Wrote 8 bytes to out/r.txt"}]
    assert read.value == {"path": "out/r.txt", "text": "TODO: x\n"}
    assert read.content == [{"type": "text", "text": "TODO: x\n"}]
    assert listed.value == {"files": ["out/r.txt"], "truncated": False}
    match = {"path": "out/r.txt", "line": 1, "text": "TODO: x"}
    assert found.value == {"matches": [match], "truncated": False}
    assert found.content == [{"type": "text", "text": "out/r.txt:1: TODO: x"}]
    assert "out/r.txt" in everything.value["files"]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("name", "args", "code", "fragment"),
    [
        ("read_text", {"path": "../outside/secret.txt"}, "DENIED", "escapes the workspace root"),
        ("read_text", {"path": "/etc/passwd"}, "DENIED", "is absolute"),
        ("read_text", {"path": "dir_out/secret.txt"}, "DENIED", "points outside"),
        ("read_text", {"path": "a\x00b"}, "DENIED", "NUL byte"),
        ("read_text", {"path": ""}, "INVALID_ARGS", "must not be empty"),
        ("read_text", {}, "INVALID_ARGS", 'missing required property "path"'),
        ("write_text", {"path": "link_out_abs", "text": "x"}, "DENIED", "points outside"),
        ("list_files", {"dir": "../outside"}, "DENIED", "escapes"),
        ("grep", {"pattern": "("}, "INVALID_ARGS", "not a valid RE2 regular expression"),
        ("read_text", {"path": "missing.txt"}, "TOOL_FAILED", "does not exist"),
    ],
)
async def test_bad_calls_are_error_results(rt: ToolRuntime, tree: tuple[Path, Path], name: str,
                                           args: dict[str, Any], code: str, fragment: str) -> None:
    """It turns every refusal into an error result with a specific code and leaves outside untouched."""
    before = _outside_snapshot(tree[1])
    with anyio.fail_after(10):
        result = await rt.execute(name, args)
    assert result.is_error
    assert result.error is not None
    assert result.error.code == code
    assert fragment in result.error.message
    assert _outside_snapshot(tree[1]) == before


@pytest.mark.anyio
async def test_reads_are_parallel_and_writes_exclusive(rt: ToolRuntime) -> None:
    """It classifies reads, listings and searches as concurrency-safe and writes as exclusive."""
    assert rt.execution_mode("read_text", {"path": "a"}) == "parallel"
    assert rt.execution_mode("list_files", {}) == "parallel"
    assert rt.execution_mode("grep", {"pattern": "x"}) == "parallel"
    assert rt.execution_mode("write_text", {"path": "a", "text": ""}) == "exclusive"


def test_claims_name_the_normalised_file(tree: tuple[Path, Path]) -> None:
    """It declares a read claim for reads and a write claim for writes on the normalised path."""
    tools = {definition.name: definition for definition in workspace_tools(tree[0])}
    read_claims = tools["read_text"].claims
    write_claims = tools["write_text"].claims
    assert read_claims is not None
    assert write_claims is not None
    key = f"file:{tree[0].resolve()}/docs/notes.md"
    assert read_claims({"path": "./docs//notes.md"}) == ResourceClaims(reads=frozenset({key}))
    assert write_claims({"path": "docs/x/../notes.md", "text": ""}) == ResourceClaims(writes=frozenset({key}))
    assert write_claims({"path": "/abs", "text": ""}) is None


def test_descriptions_state_the_limits(tree: tuple[Path, Path]) -> None:
    """It states the confinement rule and the limits in force in the model-facing descriptions."""
    limits = WorkspaceLimits(max_read_bytes=2048, max_grep_matches=7, max_list_files=9)
    tools = {definition.name: definition for definition in workspace_tools(tree[0], limits=limits)}
    assert "2048 bytes" in tools["read_text"].description
    assert "1 MiB" in tools["write_text"].description
    assert "At most 9 files" in tools["list_files"].description
    assert "at most 7 matches" in tools["grep"].description
    assert all("relative to the workspace root" in d.description for d in tools.values())


@pytest.mark.anyio
async def test_parallel_reads_while_writing_see_whole_texts(rt: ToolRuntime) -> None:
    """It never lets a concurrent reader observe a partly written file."""
    old, new = "a" * 50_000, "b" * 60_000
    await rt.execute("write_text", {"path": "big.txt", "text": old})
    seen: list[str] = []

    async def reader() -> None:
        for _ in range(20):
            result = await rt.execute("read_text", {"path": "big.txt"})
            seen.append(result.value["text"])

    async def writer() -> None:
        for i in range(20):
            await rt.execute("write_text", {"path": "big.txt", "text": new if i % 2 == 0 else old})

    with anyio.fail_after(20):
        async with anyio.create_task_group() as group:
            group.start_soon(reader)
            group.start_soon(writer)
    assert seen
    assert all(text in (old, new) for text in seen)


@pytest.mark.parametrize("name", ["a:b.txt", "C", "ab:/c"])
def test_colon_names_that_are_not_drives_stay_allowed(ws: Workspace, tree: tuple[Path, Path],
                                                      name: str) -> None:
    """It refuses only drive-letter forms, not ordinary names that contain a colon."""
    assert ws.write_text(name, "t") == (name, 1)
    assert (tree[0] / name).read_text() == "t"


def test_in_flight_temporary_files_are_not_listed(ws: Workspace, tree: tuple[Path, Path]) -> None:
    """It hides the temporary sibling of a write that is still in flight."""
    (tree[0] / "docs" / ".codemode-0123456789abcdef.tmp").write_text("partial")
    assert ws.list_files("docs")[0] == ["docs/notes.md"]


def test_grep_stops_at_its_time_budget(tree: tuple[Path, Path]) -> None:
    """It stops searching when the wall-clock budget runs out and reports truncation."""
    ws = Workspace(tree[0], limits=WorkspaceLimits(max_grep_seconds=1e-9))
    assert ws.grep("TODO") == ([], True)


@pytest.mark.parametrize("seconds", [0, -1.0, float("inf"), float("nan"), True])
def test_grep_budget_is_validated(seconds: object) -> None:
    """It rejects a non-positive or non-finite grep budget."""
    with pytest.raises(UsageError, match="max_grep_seconds must be a positive finite number"):
        WorkspaceLimits(max_grep_seconds=seconds)  # type: ignore[arg-type]


def test_write_keeps_the_permission_bits_and_long_names_work(ws: Workspace, tree: tuple[Path, Path]) -> None:
    """It keeps an existing file's mode across the atomic replacement and handles 255-byte names."""
    script = tree[0] / "run.sh"
    script.write_text("echo old\n")
    script.chmod(0o750)
    ws.write_text("run.sh", "echo new\n")
    assert script.stat().st_mode & 0o777 == 0o750
    long_name = "n" * 255
    assert ws.write_text(long_name, "x") == (long_name, 1)


@pytest.mark.parametrize("call", ["list", "grep"])
def test_missing_directories_are_clear_failures(ws: Workspace, call: str) -> None:
    """It names a missing directory given to list_files or grep."""
    with pytest.raises(ToolExecutionError, match="'nope' does not exist"):
        ws.list_files("nope") if call == "list" else ws.grep("x", "nope")


@pytest.mark.anyio
async def test_a_turn_of_mixed_calls_sees_its_own_writes_in_order(rt: ToolRuntime) -> None:
    """It lets the scheduler overlap by claims while a read still sees the write submitted before it."""
    calls = [
        ToolCallRequest("1", "write_text", json.dumps({"path": "a.txt", "text": "v1"})),
        ToolCallRequest("2", "write_text", json.dumps({"path": "b.txt", "text": "b"})),
        ToolCallRequest("3", "read_text", json.dumps({"path": "a.txt"})),
        ToolCallRequest("4", "write_text", json.dumps({"path": "a.txt", "text": "v2"})),
        ToolCallRequest("5", "read_text", json.dumps({"path": "a.txt"})),
        ToolCallRequest("6", "list_files", "{}"),
    ]
    with anyio.fail_after(20):
        results = await execute_tool_calls(rt, calls)
    assert [r.error for r in results] == [None] * 6
    assert results[2].value["text"] == "v1"
    assert results[4].value["text"] == "v2"
    assert {"a.txt", "b.txt"} <= set(results[5].value["files"])


def test_absolute_links_may_name_the_root_as_it_was_given(tmp_path: Path) -> None:
    """It accepts absolute link targets written with the unresolved root path (a symlinked parent)."""
    real = tmp_path / "real"
    (real / "ws").mkdir(parents=True)
    (real / "ws" / "f.txt").write_text("via alias")
    (tmp_path / "alias").symlink_to(real)
    given = tmp_path / "alias" / "ws"
    (real / "ws" / "link").symlink_to(given / "f.txt")
    (real / "ws" / "escape").symlink_to(tmp_path / "alias" / "other")
    ws = Workspace(given)
    assert ws.read_text("link") == ("link", "via alias")
    with pytest.raises(ToolDeniedError, match="points outside"):
        ws.read_text("escape")
