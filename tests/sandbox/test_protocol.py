"""The wire protocol: framing, strict decoding and field-by-field rebuilding of hostile frames."""

from __future__ import annotations

import contextlib
import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codemode.sandbox import SandboxLimits
from codemode.sandbox._run import run_frame
from codemode.sandbox.protocol import (
    HEADER,
    MAX_VALUE_DEPTH,
    CallFrame,
    DoneFrame,
    FrameDecoder,
    LogFrame,
    ProtocolViolation,
    ReadyFrame,
    encode_frame,
    parse_worker_frame,
    value_depth,
)
from tests.sandbox._support import typed_equal

finite = st.floats(allow_nan=False, allow_infinity=False).filter(
    lambda f: not (f == 0.0 and math.copysign(1.0, f) < 0))
lossless_values = st.recursive(
    st.none() | st.booleans() | st.integers() | finite | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=25,
)


def _body(obj: Any) -> bytes:
    return json.dumps(obj).encode()


@given(value=lossless_values, cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=6))
def test_lossless_values_round_trip_exactly_through_frames(value: Any, cuts: list[int]) -> None:
    """It delivers a call frame's args unchanged, with types, however the stream is chunked."""
    wire = encode_frame({"type": "call", "id": 7, "name": "t", "args": value}) * 2
    decoder = FrameDecoder(1 << 20)
    bodies: list[bytes] = []
    start = 0
    for cut in [*sorted(c % (len(wire) + 1) for c in cuts), len(wire)]:
        bodies += decoder.feed(wire[start:cut])
        start = max(start, cut)
    assert len(bodies) == 2 and decoder.pending == 0
    for body in bodies:
        frame = parse_worker_frame(body)
        assert isinstance(frame, CallFrame) and frame.id == 7 and typed_equal(frame.args, value)


@settings(max_examples=300)
@given(st.binary(max_size=300))
def test_random_bytes_never_raise_anything_but_a_violation(data: bytes) -> None:
    """It turns any byte string into frames or a ProtocolViolation, never another exception."""
    decoder = FrameDecoder(4096)
    try:
        for body in decoder.feed(data):
            parse_worker_frame(body)
    except ProtocolViolation:
        pass
    with contextlib.suppress(ProtocolViolation):
        parse_worker_frame(data)


def test_an_oversized_header_is_refused_before_the_body_arrives() -> None:
    """It rejects a frame whose length header exceeds the budget and stays broken afterwards."""
    decoder = FrameDecoder(1024)
    with pytest.raises(ProtocolViolation, match="1025 bytes exceeds the 1024-byte frame budget"):
        decoder.feed(HEADER.pack(1025))
    with pytest.raises(ProtocolViolation, match="lost its framing"):
        decoder.feed(b"")


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        ({"type": "ready", "layers": ["process", "netns"]}, ReadyFrame(("process", "netns"))),
        ({"type": "log", "text": "hi", "extra": 1}, LogFrame("hi", False)),
        ({"type": "log", "text": "[marker]", "truncated": True}, LogFrame("[marker]", True)),
        ({"type": "call", "id": 0, "name": "x", "args": None}, CallFrame(0, "x", None)),
        ({"type": "done", "has_value": True, "value": [1, 2.5]}, DoneFrame(True, [1, 2.5], None, None)),
        ({"type": "done", "has_value": False, "value": "ignored"}, DoneFrame(False, None, None, None)),
        ({"type": "done", "error": {"kind": "exception", "message": "boom"}, "value": 1},
         DoneFrame(False, None, "exception", "boom")),
        ({"type": "done", "has_value": False, "cpu_ms": 1.5}, DoneFrame(False, None, None, None, 1.5)),
    ],
)
def test_valid_frames_are_rebuilt_without_extra_fields(obj: Any, expected: object) -> None:
    """It rebuilds each frame field by field; an error wins over a forged value."""
    assert parse_worker_frame(_body(obj)) == expected


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"\xff\xfe", "not UTF-8|undecodable"),
        (b"{", "undecodable"),
        (b'{"type": "log", "text": NaN}', "undecodable"),
        (b'{"type": "call", "id": 1, "name": "x", "args": Infinity}', "undecodable"),
        (b'{"type": "log", "type": "log", "text": "x"}', "duplicate"),
        (b'{"type": "call", "id": 1, "name": "x", "args": -0.0}', "negative zero"),
        (b"[1, 2]", "must be a JSON object"),
        (b'{"type": "hello"}', "unknown frame type"),
        (b'{"type": 5}', "unknown frame type"),
        # (host-to-worker frames are not worker frames: a worker echoing them is refused)
        (b'{"type": "wake"}', "unknown frame type"),
        (b'{"type": "run", "program": "return 1", "tool_names": [], "limits": {}}', "unknown frame type"),
        (b'{"type": "reply", "id": 1, "ok": true, "value": 1}', "unknown frame type"),
        (b'{"type": "log"}', "string 'text'"),
        (b'{"type": "log", "text": "x", "truncated": 1}', "boolean"),
        (b'{"type": "call", "id": true, "name": "x", "args": 1}', "integer 'id'"),
        (b'{"type": "call", "id": -1, "name": "x", "args": 1}', "integer 'id'"),
        (b'{"type": "call", "id": 1.0, "name": "x", "args": 1}', "integer 'id'"),
        (b'{"type": "call", "id": 9007199254740992, "name": "x", "args": 1}', "integer 'id'"),
        (b'{"type": "call", "id": 1, "name": "x"}', "needs 'args'"),
        (b'{"type": "call", "id": 1, "name": 3, "args": 1}', "string 'name'"),
        (b'{"type": "done"}', "boolean 'has_value'"),
        (b'{"type": "done", "has_value": true}', "needs 'value'"),
        (b'{"type": "done", "error": "boom"}', "must be an object"),
        (b'{"type": "done", "error": {"kind": "timeout", "message": "x"}}', "may not report"),
        (b'{"type": "done", "error": {"kind": "exception"}}', "string 'message'"),
        (b'{"type": "done", "has_value": false, "cpu_ms": -1}', "cpu_ms"),
        (b'{"type": "ready", "layers": "seccomp"}', "list of strings"),
        (b"[" * 5000 + b"]" * 5000, "nested too deeply"),
    ],
)
def test_malformed_frames_are_violations_naming_the_fault(body: bytes, reason: str) -> None:
    """It raises ProtocolViolation with a message that says what was wrong."""
    with pytest.raises(ProtocolViolation, match=reason):
        parse_worker_frame(body)


def test_values_as_deep_as_the_depth_budget_decode() -> None:
    """It decodes a frame whose value nests exactly as deep as MAX_VALUE_DEPTH allows."""
    value: Any = 1
    for _ in range(MAX_VALUE_DEPTH - 2):
        value = [value]
    assert value_depth(value) == MAX_VALUE_DEPTH - 2
    frame = parse_worker_frame(encode_frame({"type": "done", "has_value": True, "value": value})[4:])
    assert isinstance(frame, DoneFrame) and value_depth(frame.value) == MAX_VALUE_DEPTH - 2


@pytest.mark.parametrize(("value", "depth"), [(1, 0), ([], 1), ({"a": [1, {"b": []}]}, 4), ([[], [[]]], 3)])
def test_value_depth_counts_containers(value: Any, depth: int) -> None:
    """It counts nesting levels of containers, scalars being depth 0."""
    assert value_depth(value) == depth


@pytest.mark.parametrize("body", [b'{"type":"cancel"}', b'{"type":"cancel","id":-1}',
                                  b'{"type":"cancel","id":"1"}', b'{"type":"cancel","id":1.5}',
                                  b'{"type":"cancel","id":true}'])
def test_forged_cancel_frames_are_protocol_violations(body: bytes) -> None:
    """It refuses a cancel frame without a valid call id."""
    from codemode.sandbox.protocol import ProtocolViolation, parse_worker_frame

    with pytest.raises(ProtocolViolation):
        parse_worker_frame(body)


def test_cancel_frames_are_rebuilt() -> None:
    """It rebuilds a cancel frame to its id alone (extra fields never survive)."""
    from codemode.sandbox.protocol import CancelFrame, parse_worker_frame

    assert parse_worker_frame(b'{"type":"cancel","id":3,"evil":1}') == CancelFrame(id=3)


# Any text a program or a tool name can hold: every code point but lone surrogates (refused earlier, with
# a syntax error for programs and a usage error for names).
_any_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40)
_limits = st.builds(SandboxLimits, cpu_seconds=st.floats(0.01, 1e6) | st.integers(1, 10**6),
                    memory_bytes=st.integers(32 << 20, 1 << 40), log_bytes=st.integers(64, 1 << 30),
                    result_bytes=st.integers(16, 1 << 20), frame_bytes=st.integers(1 << 21, 1 << 30))


@given(program=_any_text, names=st.lists(_any_text, max_size=5), persist=st.booleans(), limits=_limits)
@settings(max_examples=200)
def test_the_run_frame_is_the_encoding_of_its_object(program: str, names: list[str], persist: bool,
                                                      limits: SandboxLimits) -> None:
    """The run frame, assembled from cached parts, is byte for byte ``encode_frame`` of its dict."""
    expected = encode_frame({
        "type": "run", "program": program, "tool_names": names, "persist": persist,
        "limits": {"cpu_seconds": limits.cpu_seconds, "memory_bytes": limits.memory_bytes,
                   "log_bytes": limits.log_bytes, "result_bytes": limits.result_bytes,
                   "frame_bytes": limits.frame_bytes},
    })
    assert run_frame(program, tuple(names), persist, limits) == expected
    assert run_frame(program, names, persist, limits) == expected  # (the limits' text is cached now)
