"""Hostile values and programs at the sandbox boundary: lone surrogates, deep results, huge programs,
floods of diagnostics and frames built to multiply in the host's memory."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codemode.sandbox import Sandbox, SandboxLimits, compiler, lossless, protocol
from codemode.sandbox.compiler import ProgramPolicyError, compile_program
from codemode.sandbox.lossless import LosslessJsonError, dumps, is_lossless, is_plain, loads, snapshot
from codemode.sandbox.protocol import FrameDecoder, ProtocolViolation, encode_frame

# (new names are read from their modules inside the tests, so that this file also runs, and fails
# test by test, against a checkout from before they existed)

pytestmark = pytest.mark.anyio

surrogates = st.integers(0xD800, 0xDFFF).map(chr)


async def _nothing(name: str, args: Any) -> Any:
    return None


# -- 2. text is Unicode: lone surrogates are refused where values enter --------------------------


@settings(max_examples=60)
@given(prefix=st.text(max_size=5), lone=surrogates, suffix=st.text(max_size=5),
       where=st.sampled_from(["value", "key", "nested"]))
def test_a_lone_surrogate_is_refused_wherever_it_sits(prefix: str, lone: str, suffix: str,
                                                      where: str) -> None:
    """Property: snapshot, dumps and is_plain refuse a lone surrogate in any string, key or depth,
    with an error that is itself valid Unicode."""
    text = prefix + lone + suffix
    value: Any = {"value": text, "key": {text: 1}, "nested": {"a": [1, {"b": [text]}]}}[where]
    assert not is_lossless(value) and not is_plain(value)
    with pytest.raises(LosslessJsonError, match="lone surrogate") as refused:
        snapshot(value, freeze=True)
    str(refused.value).encode("utf-8")  # (the message has no lone surrogate itself)
    with pytest.raises(LosslessJsonError):
        dumps(value)


@pytest.mark.parametrize("text", ['"\\ud800"', '{"a": ["\\udc80"]}', '{"\\udfff": 1}', '"x\ud800"'])
def test_loads_refuses_lone_surrogates_raw_or_escaped(text: str) -> None:
    """Decoding refuses a lone surrogate however it is written; a real pair is one character."""
    with pytest.raises(LosslessJsonError, match="lone surrogate"):
        loads(text)
    assert loads('"\\ud83d\\ude00"') == "\U0001f600"
    assert loads('"\\\\ud800"') == "\\ud800"  # (an escaped backslash: plain text)


def test_escaping_is_for_diagnostics_only() -> None:
    """escape_lone_surrogates writes each as \\udc80 (as CPython's stderr) and leaves text alone."""
    assert lossless.escape_lone_surrogates("a\udc80b") == "a\\udc80b"
    assert lossless.escape_lone_surrogates("plain é") == "plain é"


@pytest.mark.parametrize(("program", "kind", "fragment"), [
    ("return '\\ud800'", "invalid-output", "lone surrogate \\ud800"),
    ("print(chr(0xdc80))", "exception", "UnicodeEncodeError"),
    ("await tools.echo(text=chr(0xd800))", "exception", "lone surrogate \\ud800"),
    ("raise ValueError(chr(0xd800))", "exception", "ValueError: \\ud800"),
    ("return {chr(0xdc80): 1}", "invalid-output", "object key"),
    ("x = '\ud800'", "syntax", "lone surrogate \\ud800 at column 6"),
])
async def test_programs_cannot_send_text_that_is_not_unicode(program: str, kind: str, fragment: str) -> None:
    """Results, printed lines, tool arguments and error messages leave a program as Unicode only."""
    async with Sandbox(SandboxLimits(wall_seconds=10)) as sandbox:
        result = await sandbox.run(program, tool_names=["echo"], call_tool=_nothing)
        after = await sandbox.run("print('still fine')\nreturn 1", tool_names=[], call_tool=_nothing)
    assert result.error is not None and result.error.kind == kind, result.error
    assert fragment in result.error.message
    result.error.message.encode("utf-8")
    for line in result.logs:
        line.encode("utf-8")
    assert after.value == 1 and after.logs == ("still fine",)


async def test_a_caught_print_error_behaves_as_in_cpython() -> None:
    """A program may catch the UnicodeEncodeError of print and go on, as under CPython."""
    program = "try:\n    print('a' + chr(0xdc80))\nexcept UnicodeEncodeError as e:\n    return e.reason"
    async with Sandbox() as sandbox:
        result = await sandbox.run(program, tool_names=[], call_tool=_nothing)
    assert result.value == "surrogates not allowed" and result.logs == ()


# -- 5. diagnostics are capped ---------------------------------------------------------------------


def test_a_flood_of_policy_errors_is_reported_briefly() -> None:
    """A 480 KB program of `__x = 1` lines gets the first few diagnostics and a count, not megabytes."""
    source = "__x = 1\n" * 60_000
    with pytest.raises(ProgramPolicyError) as refused:
        compile_program(source)
    lines = str(refused.value).splitlines()
    most = compiler.MAX_DIAGNOSTICS
    assert len(lines) == most + 1
    assert lines[0].startswith("line 1: ") and lines[most - 1].startswith(f"line {most}:")
    assert lines[-1].startswith(f"... and {60_000 - most} more problems up to line 60000")
    assert len(str(refused.value)) < 5000


# -- 6. deep results and huge programs name what they hit ------------------------------------------


def test_a_deep_value_is_checked_in_linear_time_and_memory() -> None:
    """A 20,000-deep list is copied without building a path per node; a bad leaf names its path."""
    deep: list[Any] = []
    for _ in range(20_000):
        deep = [deep]
    assert is_lossless(deep)
    node = deep
    for _ in range(3):
        node = node[0]
    node.append(float("nan"))
    with pytest.raises(LosslessJsonError) as refused:
        snapshot(deep)
    assert refused.value.path == "value[0][0][0][1]"


async def test_a_deep_result_is_invalid_output_not_memory_limit() -> None:
    """Returning a 20,000-deep list is refused as invalid-output naming the nesting limit."""
    program = "x = []\nfor _ in range(20000):\n    x = [x]\nreturn x"
    async with Sandbox() as sandbox:
        result = await sandbox.run(program, tool_names=[], call_tool=_nothing)
    assert result.error is not None and result.error.kind == "invalid-output", result.error
    assert "nests deeper than" in result.error.message


async def test_a_huge_program_names_the_memory_budget() -> None:
    """A 30 MB program does not fit the parser in the run's memory: the error names memory_bytes."""
    async with Sandbox() as sandbox:
        result = await sandbox.run("x = 1\n" * 5_000_000, tool_names=[], call_tool=_nothing)
    assert result.error is not None and result.error.kind == "syntax", result.error
    assert "memory_bytes" in result.error.message and "30,000,000 bytes" in result.error.message


def test_deep_nesting_is_named_as_the_parser_limit() -> None:
    """A program nesting past the parser's limit says so (not 'too large or too deep')."""
    with pytest.raises(Exception, match=r"nests too deeply|too many nested") as refused:
        compile_program("x = " + "-" * 100_000 + "1")
    assert "too large or nests" not in str(refused.value)


# -- 4. a frame cannot multiply in the host's memory ------------------------------------------------


@given(st.recursive(st.none() | st.integers() | st.text(max_size=3),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner,
                                                                               max_size=4), max_leaves=40))
def test_frame_values_bounds_the_values_from_above(value: Any) -> None:
    """Property: the punctuation count is never below the real number of values (keys included)."""
    def count(item: Any) -> int:
        if isinstance(item, dict):
            return 1 + sum(1 + count(child) for child in item.values())
        if isinstance(item, list):
            return 1 + sum(count(child) for child in item)
        return 1
    assert protocol.frame_values(dumps(value).encode()) >= count(value)


def test_a_frame_of_too_many_values_is_refused_before_decoding() -> None:
    """A frame whose punctuation allows more values than frame_bytes / 32 is a protocol violation."""
    frame = encode_frame({"type": "call", "id": 1, "name": "x", "args": [[]] * 600_000})
    with pytest.raises(ProtocolViolation, match="frame_bytes / 32"):
        FrameDecoder(16 << 20).feed(frame)
    assert FrameDecoder(16 << 20).feed(encode_frame({"type": "log", "text": ",[{" * 600_000}))  # (one string)


_MEMORY_PROBE = textwrap.dedent("""
    import sys, anyio
    from codemode.sandbox import Sandbox, SandboxLimits

    def peak() -> int:
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:")) * 1024

    async def main() -> None:
        async def hold(name, args):
            await anyio.sleep(1.0)
            return None
        limits = SandboxLimits(wall_seconds=60, cpu_seconds=30, memory_bytes=1 << 30)
        async with Sandbox(limits) as sandbox:
            await sandbox.run("return 1", tool_names=["hold"], call_tool=hold)
            before = peak()
            result = await sandbox.run(sys.argv[1], tool_names=["hold"], call_tool=hold)
            print((peak() - before) >> 20, result.error.kind if result.error else "ok")
    anyio.run(main)
""")


@pytest.mark.parametrize(("program", "most_mib", "outcome"), [
    # 15 MiB of empty lists: ~325 MiB of host memory before the bound; now refused in the worker.
    ("await tools.hold(pad=[[]] * (4 << 20))\nreturn 1", 40, "exception"),
    # eight 15 MiB calls at once: the reader holds about two frame budgets, not eight frames.
    ("import asyncio\nbig = 'x' * (15 << 20)\n"
     "await asyncio.gather(*[tools.hold(pad=big) for _ in range(8)])\nreturn 1", 120, "ok"),
])
def test_host_memory_per_frame_is_bounded(program: str, most_mib: int, outcome: str) -> None:
    """The host's peak RSS grows by a bounded amount however a program shapes its tool arguments."""
    done = subprocess.run([sys.executable, "-c", _MEMORY_PROBE, program], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    grown, kind = done.stdout.split()
    assert kind == outcome
    assert int(grown) <= most_mib, f"host peak RSS grew by {grown} MiB"
