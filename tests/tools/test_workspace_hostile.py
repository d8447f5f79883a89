"""The workspace tools under hostile use: no frozen event loop, no lingering thread, bounded descriptors,
bounded paths and a quota on what the tools may add."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codemode.runtime import ToolRuntime
from codemode.tools.workspace import Workspace, WorkspaceLimits, workspace_tools

pytestmark = pytest.mark.anyio

#: Longest pause of the event loop a tool body may cause (the heartbeat below measures it).
MAX_STALL = 0.050


async def _stall_while(work: Callable[[], Awaitable[Any]]) -> tuple[float, Any]:
    """Run ``work`` beside a 2 ms heartbeat; return the longest the heartbeat was held up, and the outcome."""
    worst = 0.0
    done = anyio.Event()
    outcome: list[Any] = []

    async def heartbeat() -> None:
        nonlocal worst
        while not done.is_set():
            before = time.perf_counter()
            await anyio.sleep(0.002)
            worst = max(worst, time.perf_counter() - before - 0.002)

    async def run() -> None:
        try:
            outcome.append(await work())
        finally:
            done.set()

    async with anyio.create_task_group() as group:
        group.start_soon(heartbeat)
        group.start_soon(run)
    return worst, outcome[0]


@pytest.fixture
async def rt(tmp_path: Path) -> AsyncIterator[ToolRuntime]:
    async with ToolRuntime("native") as runtime:
        for definition in workspace_tools(tmp_path, limits=WorkspaceLimits(max_grep_seconds=5.0)):
            runtime.register(definition)
        yield runtime


# -- 1. catastrophic patterns: linear time, the loop keeps beating ---------------------------------

#: Patterns that backtrack exponentially in a backtracking engine on "aaaa...!".
_NESTED = st.sampled_from(["(a+)+$", "(a|aa)+$", "(a*)*b", "(a|a?)+$", "(.*a){12}$", "((a+)+)+c",
                           "(?:a+|a)+!x", "(a+)*(b+)*$"])


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pattern=_NESTED, length=st.integers(min_value=24, max_value=4000), copies=st.integers(1, 40))
async def test_no_pattern_stalls_the_event_loop(rt: ToolRuntime, tmp_path: Path, pattern: str, length: int,
                                                copies: int) -> None:
    """Property: grep with a catastrophic pattern on adversarial lines never holds the loop 50 ms."""
    (tmp_path / "evil.txt").write_text(("a" * length + "!\n") * copies)
    with anyio.fail_after(30):
        stall, result = await _stall_while(lambda: rt.execute("grep", {"pattern": pattern}))
    assert not result.is_error, result.error
    assert stall < MAX_STALL, f"{pattern!r} on {copies} lines of {length}: the loop stalled {stall:.3f} s"


@pytest.mark.parametrize(("name", "args"), [
    ("list_files", {}),
    ("read_text", {"path": "big.txt"}),
    ("write_text", {"path": "copy/big.txt", "text": "y" * (1 << 20)}),
    ("grep", {"pattern": r"(\w+\s?){100}$"}),
])
async def test_no_tool_body_stalls_the_event_loop(rt: ToolRuntime, tmp_path: Path, name: str,
                                                  args: dict[str, Any]) -> None:
    """Every workspace tool body does its work off the event loop (a wide tree, a 1 MiB file)."""
    for index in range(300):
        (tmp_path / f"d{index % 30}").mkdir(exist_ok=True)
        (tmp_path / f"d{index % 30}" / f"f{index}.txt").write_text("x\n")
    (tmp_path / "big.txt").write_text(("word " * 3000 + "\n") * 60)
    with anyio.fail_after(30):
        stall, result = await _stall_while(lambda: rt.execute(name, args))
    assert not result.is_error, result.error
    assert stall < MAX_STALL, f"{name}: the loop stalled {stall:.3f} s"


async def test_a_cancelled_search_stops_its_thread(tmp_path: Path) -> None:
    """A grep whose caller gives up stops using CPU at once (its thread does not run on unobserved)."""
    for index in range(10):  # (about 1.5 s of searching in all)
        (tmp_path / f"big{index}.txt").write_text(("a" * 20 + "\n") * 49_000)
    [grep] = [d for d in workspace_tools(tmp_path, limits=WorkspaceLimits(max_grep_seconds=60.0))
              if d.name == "grep"]
    started = time.perf_counter()
    with anyio.move_on_after(0.2):
        await grep.execute({"pattern": r"(a|aa)*c"}, None)
    assert time.perf_counter() - started < 2.0, "the body held its caller after cancellation"
    cpu = time.process_time()
    await anyio.sleep(0.5)
    assert time.process_time() - cpu < 0.2, "a search thread kept running after its call was cancelled"


@pytest.mark.parametrize(("pattern", "fragment"), [
    (r"(a)\1", "backreference"),
    (r"(?P<x>a)(?P=x)", "named backreference"),
    (r"foo(?=bar)", "lookahead"),
    (r"(?<!x)foo", "negative lookbehind"),
    (r"a++", "possessive"),
    (r"end\Z", r"\z"),
    (r"x{2000}", "not a valid RE2"),
    (r"(\w+\s?){999}", "too complex"),
    ("a" * 1001, "max_grep_pattern_chars"),
])
async def test_unsupported_patterns_are_invalid_args(rt: ToolRuntime, pattern: str, fragment: str) -> None:
    """Features a linear-time engine lacks are refused as INVALID_ARGS saying which and why."""
    result = await rt.execute("grep", {"pattern": pattern})
    assert result.is_error and result.error is not None
    assert result.error.code == "INVALID_ARGS"
    assert fragment in result.error.message


async def test_lines_over_the_scan_cap_are_counted_not_searched(tmp_path: Path) -> None:
    """A line longer than max_grep_scan_chars is skipped and counted; the others are searched."""
    (tmp_path / "f.txt").write_text("needle short\n" + "needle " * 100 + "\nneedle again\n")
    async with ToolRuntime("native") as runtime:
        for definition in workspace_tools(tmp_path, limits=WorkspaceLimits(max_grep_scan_chars=100)):
            runtime.register(definition)
        result = await runtime.execute("grep", {"pattern": "needle"})
    assert [m["line"] for m in result.value["matches"]] == [1, 3]
    assert result.value["long_lines"] == 1
    assert "1 lines over 100 characters were not searched" in result.text


# -- 3. deep paths and descriptors ------------------------------------------------------------------


async def test_deep_paths_are_refused_before_the_file_system_is_touched(rt: ToolRuntime,
                                                                        tmp_path: Path) -> None:
    """A 19,000-level path and a 40-level one are INVALID_ARGS naming the cap, and create nothing."""
    for path, cap in (("d/" * 19000 + "f.txt", "max_path_chars"), ("d/" * 40 + "f.txt", "max_path_depth")):
        result = await rt.execute("write_text", {"path": path, "text": "x"})
        assert result.is_error and result.error is not None and result.error.code == "INVALID_ARGS"
        assert cap in result.error.message
    assert not (tmp_path / "d").exists()
    long_name = await rt.execute("read_text", {"path": "x" * 5000})
    assert long_name.error is not None and "max_path_chars" in long_name.error.message


def test_walks_hold_one_directory_descriptor_at_a_time(tmp_path: Path) -> None:
    """Listing a wide, deep tree under a 40-descriptor limit finds every file (no EMFILE, no gaps)."""
    root = tmp_path / "ws"
    deep = root.joinpath(*[f"l{i}" for i in range(30)])
    deep.mkdir(parents=True)
    (deep / "bottom.txt").write_text("deep needle\n")
    for index in range(150):
        (root / "wide" / f"s{index:03}").mkdir(parents=True)
        (root / "wide" / f"s{index:03}" / "f.txt").write_text("needle\n")
    script = textwrap.dedent(f"""
        import os, resource
        from codemode.tools.workspace import Workspace
        ws = Workspace({str(root)!r})
        used = len(os.listdir("/proc/self/fd"))
        resource.setrlimit(resource.RLIMIT_NOFILE, (used + 12, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
        files, cut = ws.list_files(".")
        matches, _ = ws.grep("needle")
        deep = ws.read_text("/".join(f"l{{i}}" for i in range(30)) + "/bottom.txt")
        chain = "/".join(f"l{{i}}" for i in range(30))
        back = ws.read_text("wide/s000/../s001/../../" + chain + "/bottom.txt")
        print(len(files), cut, len(matches), deep[1] == back[1] == "deep needle\\n")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["151", "False", "151", "True"]


def test_names_that_are_not_utf8_are_skipped_by_listings(tmp_path: Path) -> None:
    """A file whose name is not UTF-8 is left out (no path a model sends could name it)."""
    os.close(os.open(os.path.join(os.fsencode(tmp_path), b"bad-\xff.txt"), os.O_CREAT | os.O_WRONLY, 0o644))
    (tmp_path / "good.txt").write_text("ok\n")
    assert Workspace(tmp_path).list_files(".") == (["good.txt"], False)


def _disk_usage(root: Path) -> int:
    return sum(os.path.getsize(os.path.join(top, name)) for top, _dirs, names in os.walk(root)
               for name in names)


# -- 4. the quota -----------------------------------------------------------------------------------


def test_the_quota_bounds_what_writes_add(tmp_path: Path) -> None:
    """Writes count in 4 KiB blocks (directories too); past the quota they are refused, naming it;
    replacing a file gives back what it used."""
    ws = Workspace(tmp_path, limits=WorkspaceLimits(max_workspace_bytes=64 * 1024))
    ws.write_text("big.txt", "b" * 8 * 4096)  # 8 blocks
    for index in range(7):
        ws.write_text(f"f{index}.txt", "x" * 100)  # 1 block each: 15 in all
    ws.write_text("f0.txt", "y" * 4096)  # (still one block: no growth)
    with pytest.raises(Exception, match="max_workspace_bytes") as refused:
        ws.write_text("sub/f.txt", "z")  # a directory (the 16th block) and a file: one too many
    assert getattr(refused.value, "code", None) == "TOOL_FAILED"
    assert not (tmp_path / "sub" / "f.txt").exists()
    assert ws.grown == 64 * 1024
    ws.write_text("big.txt", "")  # gives 7 blocks back
    assert ws.write_text("sub/f.txt", "fits") == ("sub/f.txt", 4)
    assert ws.grown == 10 * 4096


async def test_a_flood_of_writes_stops_at_the_quota(tmp_path: Path) -> None:
    """300 writes of 1 MiB stop at a 16 MiB quota; the disk holds no more than that."""
    async with ToolRuntime("native") as runtime:
        limits = WorkspaceLimits(max_workspace_bytes=16 << 20)
        for definition in workspace_tools(tmp_path, limits=limits):
            runtime.register(definition)
        refused = 0
        for index in range(300):
            args = {"path": f"flood/{index}.bin", "text": "q" * (1 << 20)}
            refused += (await runtime.execute("write_text", args)).is_error
    assert refused >= 280
    on_disk = _disk_usage(tmp_path)
    assert on_disk <= 16 << 20
