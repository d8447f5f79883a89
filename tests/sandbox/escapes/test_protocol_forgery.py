"""Protocol forgery: a program that owns its worker writes frames of its choosing on every descriptor.

Two halves. First, forged workers: the test stand-in executor runs plain CPython inside a real worker,
so a program can write arbitrary bytes to the protocol channel (fd 3) - the strongest position a
sandbox escape could reach. The host must never raise, must rebuild or refuse every frame, and must end
the run with kind ``protocol`` for anything malformed. Second, the same forging payloads under the real
sandbox: each one is shown to work under plain CPython (the host accepts the forged result), and to
fail under the sandbox.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codemode.sandbox import ERROR_KINDS, RunResult, Sandbox, SandboxLimits
from codemode.sandbox._isolate import OPTIONAL_LAYERS
from codemode.sandbox.lossless import JsonValue
from codemode.sandbox.protocol import HEADER
from tests.sandbox._support import STANDIN, echo_tool, run

pytestmark = pytest.mark.anyio

LIMITS = SandboxLimits(wall_seconds=5.0, cpu_seconds=3.0, frame_bytes=64 * 1024, result_bytes=1024)
FORGED = "FORGED-RESULT"


@pytest.fixture(scope="module")
async def forged() -> AsyncIterator[Sandbox]:
    """Workers that run plain CPython: the program fully controls its end of the channel.

    Without the seccomp layer, which would refuse some payloads' own calls (``socket(fileno=3)`` asks
    the kernel what the socket is, ``fromfd`` duplicates it): here the channel is the attacker's.
    """
    layers = OPTIONAL_LAYERS - {"seccomp"}
    async with Sandbox(executor=STANDIN, warm=2, layers=layers) as box:
        yield box


@pytest.fixture(scope="module")
async def real() -> AsyncIterator[Sandbox]:
    async with Sandbox(warm=1) as box:
        yield box


def frame(obj: Any) -> bytes:
    body = json.dumps(obj).encode()
    return HEADER.pack(len(body)) + body


def raw(body: bytes) -> bytes:
    return HEADER.pack(len(body)) + body


def writer(data: bytes, then: str = "import time\ntime.sleep(30)") -> str:
    """A program that writes ``data`` on the channel and then hangs (so only the forgery can end it)."""
    return f"import os\nos.write(3, {data!r})\n{then}"


async def forge(sandbox: Sandbox, data: bytes, **kwargs: Any) -> RunResult:
    with anyio.fail_after(30):
        return await run(sandbox, writer(data), limits=LIMITS, **kwargs)


MALFORMED = [
    ("garbage", b"\xff" * 16, "exceeds the 65536-byte frame budget"),
    ("oversized-header", HEADER.pack(2**31), "frame_bytes"),
    ("invalid-json", raw(b"{not json"), "undecodable frame"),
    ("invalid-utf8", raw(b'{"type": "log", "text": "\xff"}'), "not UTF-8"),
    ("nan", raw(b'{"type": "log", "text": NaN}'), "undecodable"),
    ("infinity-args", raw(b'{"type": "call", "id": 1, "name": "echo", "args": Infinity}'), "undecodable"),
    ("duplicate-key", raw(b'{"type": "log", "text": "a", "text": "b"}'), "duplicate"),
    ("not-an-object", frame([1, 2, 3]), "JSON object"),
    ("unknown-type", frame({"type": "reply", "id": 0, "ok": True, "value": 1}), "unknown frame type"),
    ("forbidden-kind", frame({"type": "done", "error": {"kind": "timeout", "message": "x"}}),
     "may not report"),
    ("bool-id", frame({"type": "call", "id": True, "name": "echo", "args": {}}), "integer 'id'"),
    ("float-id", frame({"type": "call", "id": 1.5, "name": "echo", "args": {}}), "integer 'id'"),
    ("huge-id", frame({"type": "call", "id": 2**64, "name": "echo", "args": {}}), "integer 'id'"),
    ("missing-args", frame({"type": "call", "id": 1, "name": "echo"}), "needs 'args'"),
    ("second-ready", frame({"type": "ready", "layers": []}), "unexpected ready"),
    ("deep-nesting", raw(b'{"type": "log", "text": ' + b"[" * 3000 + b"]" * 3000 + b"}"),
     "nested too deeply"),
    ("huge-int", raw(b'{"type": "done", "has_value": true, "value": ' + b"9" * 5000 + b"}"), "undecodable"),
]


@pytest.mark.parametrize(("data", "needle"), [m[1:] for m in MALFORMED], ids=[m[0] for m in MALFORMED])
async def test_malformed_frames_end_the_run_as_protocol_errors(forged: Sandbox, data: bytes,
                                                              needle: str) -> None:
    """It ends the run with kind protocol, names the fault, kills the worker and keeps running."""
    result = await forge(forged, data)
    assert result.error is not None and result.error.kind == "protocol", result.error
    assert needle in result.error.message
    assert result.value is None and not result.has_value


async def test_a_frame_cut_short_by_the_worker_dying_is_a_worker_exit(forged: Sandbox) -> None:
    """It reports worker-exit when the channel closes in the middle of a frame."""
    with anyio.fail_after(30):
        result = await run(forged, writer(HEADER.pack(100) + b'{"type"', then="import os\nos._exit(3)"),
                           limits=LIMITS)
    assert result.error is not None and result.error.kind == "worker-exit"
    assert "status 3" in result.error.message


async def test_a_forged_error_wins_over_a_forged_value(forged: Sandbox) -> None:
    """It reports the error of a done frame that carries both an error and a value."""
    result = await forge(forged, frame({"type": "done", "has_value": True, "value": FORGED,
                                        "error": {"kind": "exception", "message": "real failure"}}))
    assert result.error is not None and result.error.kind == "exception" and result.value is None


async def test_duplicate_call_ids_are_served_once(forged: Sandbox) -> None:
    """It ignores a second call with an id already used, so the handler runs once."""
    calls: list[JsonValue] = []

    async def counting(name: str, args: JsonValue) -> JsonValue:
        calls.append(args)
        return len(calls)

    call = frame({"type": "call", "id": 7, "name": "echo", "args": {"n": 1}})
    data = call + call + frame({"type": "call", "id": 7, "name": "echo", "args": {"n": 2}})
    with anyio.fail_after(30):
        result = await run(forged, writer(data, then="import time\ntime.sleep(0.5)\nreturn 'ok'"),
                           limits=LIMITS, call_tool=counting)
    assert result.value == "ok" and calls == [{"n": 1}] and result.stats.tool_calls == 1


@pytest.mark.parametrize(
    ("flood", "needle"),
    [
        (frame({"type": "call", "id": 1, "name": "echo", "args": None}) * 1200, "an id already used"),
        (frame({"type": "log", "text": "z" * 20}) * 1200, "after the log budget"),
    ],
    ids=["duplicate-calls", "logs-past-budget"],
)
async def test_floods_of_ignored_frames_end_the_run(forged: Sandbox, flood: bytes, needle: str) -> None:
    """It stops reading a worker that floods frames the rules ignore, as a protocol violation."""
    with anyio.fail_after(30):
        result = await run(forged, writer(flood), limits=LIMITS.replace(log_bytes=1000), call_tool=echo_tool)
    assert result.error is not None and result.error.kind == "protocol" and needle in result.error.message
    assert result.stats.tool_calls <= 1


async def test_forged_calls_to_undeclared_tools_never_reach_the_handler(forged: Sandbox) -> None:
    """It answers a forged call naming an undeclared tool with an error, without calling the handler."""
    calls: list[str] = []

    async def recording(name: str, args: JsonValue) -> JsonValue:
        calls.append(name)
        return None

    data = frame({"type": "call", "id": 1, "name": "__class__", "args": None})
    with anyio.fail_after(30):
        result = await run(forged, writer(data, then="import time\ntime.sleep(0.3)\nreturn 'ok'"),
                           limits=LIMITS, call_tool=recording, tools=("echo",))
    assert result.value == "ok" and calls == []


async def test_forged_output_over_the_result_budget_is_refused(forged: Sandbox) -> None:
    """It re-checks a forged done value against the result budget."""
    result = await forge(forged, frame({"type": "done", "has_value": True, "value": "x" * 5000}))
    assert result.error is not None and result.error.kind == "output-limit"


async def test_forged_log_floods_are_cut_by_the_host_ledger(forged: Sandbox) -> None:
    """It applies the log budget itself (UTF-8 size + 1 per entry), whatever the worker sends."""
    limits = LIMITS.replace(log_bytes=100)
    data = b"".join(frame({"type": "log", "text": "y" * 60}) for _ in range(10))
    with anyio.fail_after(30):
        result = await run(forged, writer(data, then="import time\ntime.sleep(0.3)\nreturn 1"),
                           limits=limits)
    assert result.value == 1
    assert result.logs[:-1] == ("y" * 60, "y" * 38) and result.logs[-1].startswith("[codemode sandbox]")


async def test_writes_to_every_other_descriptor_reach_nobody(forged: Sandbox) -> None:
    """It is not fooled by frames written to stdin, stdout, stderr or any other descriptor."""
    forged_done = frame({"type": "done", "has_value": True, "value": FORGED})
    program = f"""
import os
for fd in range(64):
    if fd != 3:
        try:
            os.write(fd, {forged_done!r})
        except OSError:
            pass
return 'honest'
"""
    with anyio.fail_after(30):
        result = await run(forged, program, limits=LIMITS)
    assert result.value == "honest"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=120))
async def test_random_bytes_from_a_forged_worker_never_crash_the_host(forged: Sandbox, data: bytes) -> None:
    """It survives any bytes on the channel and reports a well-formed result."""
    with anyio.fail_after(30):
        result = await run(forged, writer(data, then="import time\ntime.sleep(0.2)\nreturn 'tail'"),
                           limits=LIMITS)
    assert result.error is None or result.error.kind in ERROR_KINDS
    assert result.error is None or result.error.kind in (
        "protocol", "worker-exit", "exception", "output-limit", "invalid-output")


_VALID_FRAMES = st.one_of(
    st.builds(lambda text: {"type": "log", "text": text}, st.text(max_size=12)),
    st.builds(lambda call_id, name: {"type": "call", "id": call_id, "name": name, "args": {"k": call_id}},
              st.integers(0, 4), st.sampled_from(["echo", "fail", "undeclared"])),
    st.builds(lambda call_id: {"type": "cancel", "id": call_id}, st.integers(0, 4)),
)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(frames=st.lists(_VALID_FRAMES, max_size=8), forged_done=st.booleans())
async def test_valid_frames_in_any_order_are_served_or_ignored_by_the_rules(
        forged: Sandbox, frames: list[dict[str, Any]], forged_done: bool) -> None:
    """Logs, calls (duplicate ids, undeclared names) and cancels in any order, before or after the first
    call: never a protocol error, each declared call served at most once, and the run ends with its done.
    """
    tail = [{"type": "done", "has_value": True, "value": "forged"}] if forged_done else []
    served: list[int] = []

    async def handler(name: str, args: JsonValue) -> JsonValue:
        assert isinstance(args, dict)
        served.append(int(args["k"]))
        return await echo_tool(name, args)

    with anyio.fail_after(30):
        result = await run(forged, writer(b"".join(frame(f) for f in frames + tail),
                                          then="import time\ntime.sleep(0.2)\nreturn 'tail'"),
                           call_tool=handler, limits=LIMITS)
    assert result.error is None, result.error
    assert result.value == ("forged" if forged_done else "tail")
    declared = {f["id"] for f in frames if f["type"] == "call" and f["name"] != "undeclared"}
    assert len(served) == len(set(served)) and set(served) <= declared


PAYLOADS = [
    ("os-write", "import os\nos.write(3, FRAME)\nreturn 'done'"),
    ("posix-write", "import posix\nposix.write(3, FRAME)\nreturn 'done'"),
    ("socket-fileno", "import socket\nsocket.socket(fileno=3).send(FRAME)\nreturn 'done'"),
    ("socket-fromfd", "import socket\nsocket.fromfd(3, socket.AF_UNIX, socket.SOCK_STREAM).send(FRAME)\n"
                      "return 'done'"),
    ("dunder-import", "__import__('os').write(3, FRAME)\nreturn 'done'"),
    ("io-open-fd", "import io\nio.open(3, 'wb', closefd=False).write(FRAME)\nreturn 'done'"),
    ("builtins-open-fd", "open(3, 'wb', closefd=False).write(FRAME)\nreturn 'done'"),
]


@pytest.mark.parametrize("program", [p[1] for p in PAYLOADS], ids=[p[0] for p in PAYLOADS])
async def test_forging_payloads_work_in_plain_cpython_and_fail_in_the_sandbox(
        forged: Sandbox, real: Sandbox, program: str) -> None:
    """It lets the payload forge the result under plain CPython, and stops it under the sandbox."""
    forged_done = frame({"type": "done", "has_value": True, "value": FORGED})
    source = program.replace("FRAME", repr(forged_done))
    with anyio.fail_after(30):
        plain = await run(forged, source, limits=LIMITS)
        sandboxed = await run(real, source, limits=LIMITS, call_tool=echo_tool)
    assert plain.value == FORGED, plain  # the forgery is real
    assert sandboxed.value != FORGED and FORGED not in repr(sandboxed.logs)
    assert sandboxed.error is not None and sandboxed.error.kind in ("exception", "policy", "syntax")
