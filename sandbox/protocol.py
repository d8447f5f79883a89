"""The wire protocol between the host and one worker: length-prefixed lossless JSON frames.

Every frame is a 4-byte big-endian length followed by that many bytes of UTF-8 JSON text holding one
object with a ``type``. The channel is a dedicated socket (never stdout), so program output cannot
corrupt it; but the program may own the worker, so **every frame from the worker is hostile**:

- the length header is checked against the frame budget before a byte of the body is buffered;
- a frame may hold at most :func:`max_frame_values` JSON values (a count bounded from above by its
  punctuation, see :func:`frame_values`), so the host's memory for one decoded frame stays within a
  small multiple of the frame budget however the values are shaped (``[[], [], ...]`` would otherwise
  cost some 27 bytes of host memory per byte sent);
- the body is decoded strictly (:func:`codemode.sandbox.lossless.loads`: no NaN/Infinity, no -0.0, no
  duplicate keys, exact integers, bounded nesting);
- the object is validated and rebuilt field by field into a frozen frame value; unknown fields never
  survive, and anything malformed raises :class:`ProtocolViolation`, which the host turns into a run
  failure of kind ``protocol`` - never into an exception of its own.

Frames, worker to host: ``ready {layers}`` (isolation set up, waiting for ``run``), ``call {id, name,
args}`` (worker-issued id), ``log {text, truncated}`` (streamed as it happens, so output survives a
kill) and ``done {has_value, value, cpu_ms}`` or ``done {error: {kind, message}, cpu_ms}`` (``cpu_ms``
is the worker's own, advisory measurement of the run's CPU time). Host to worker: ``run
{program, tool_names, limits}``, ``reply {id, ok, value}`` or ``reply {id, ok: false, message,
code}``, and ``wake {}`` (a run is coming: the worker reads it and goes on waiting, which wakes its
CPU ahead of the run). Wall-clock timeouts, CPU kills, cancellation and worker death are observed by
the host, never carried as frames.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, TypeAlias

from .lossless import JsonValue, LosslessJsonError, dumps, escape_lone_surrogates, loads

__all__ = (
    "HEADER",
    "LOG_TRUNCATION_MARKER",
    "MAX_VALUE_DEPTH",
    "WAKE_FRAME",
    "WORKER_ERROR_KINDS",
    "CallFrame",
    "CancelFrame",
    "DoneFrame",
    "FrameDecoder",
    "LogFrame",
    "ProtocolViolation",
    "ReadyFrame",
    "WorkerFrame",
    "encode_frame",
    "frame_values",
    "max_frame_values",
    "parse_worker_frame",
    "value_depth",
)

HEADER: Final = struct.Struct(">I")

#: Values crossing the channel may nest at most this deep (the strict decoder recurses).
MAX_VALUE_DEPTH: Final = 400

#: The only failure kinds a worker may report itself; every other kind is observed by the host.
WORKER_ERROR_KINDS: Final = frozenset(
    {"syntax", "policy", "exception", "invalid-output", "output-limit", "memory-limit"}
)

#: Largest id a worker may use for a call (ids are echoed back in replies).
_MAX_ID: Final = 2**53

#: Frames at least this large get a fresh decoder buffer once they are out (see FrameDecoder.feed).
_SMALL_FRAME: Final = 1 << 20

#: The one line that replaces log text beyond the log budget (the host keeps exactly one).
LOG_TRUNCATION_MARKER: Final = "[codemode sandbox] log capture truncated at {limit} bytes"


def frame_values(body: bytes | bytearray | memoryview, most: int | None = None) -> int:
    """An upper bound on the number of JSON values in a frame body, from its punctuation.

    Every value (object keys included) but the outermost follows a ``,``, a ``:`` or the opening
    bracket of a non-empty container, so counting those bytes (a few passes at memory speed, no
    decoding) bounds the values from above. Punctuation inside strings counts too, which only loosens
    the bound: when it exceeds ``most``, the strings are cut out (one regular-expression pass) and the
    punctuation outside them is counted instead, so text full of commas is never mistaken for data.
    """
    data = body if isinstance(body, bytes | bytearray) else bytes(body)
    bound = _punctuation(data)
    if most is None or bound <= most:
        return bound
    return _punctuation(_JSON_STRING.sub(b'""', data))


def _punctuation(data: bytes | bytearray) -> int:
    opened = data.count(b"[") + data.count(b"{") - data.count(b"[]") - data.count(b"{}")
    return data.count(b",") + data.count(b":") + opened + 1


_JSON_STRING: Final = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')


def max_frame_values(frame_bytes: int) -> int:
    """The most JSON values a frame may hold under a frame budget of ``frame_bytes``: a 32nd of it
    (and at least 65,536, so that small budgets keep their meaning).

    A decoded value costs the host up to ~80 bytes (an empty list with its reference), so a frame
    within both bounds decodes into at most about 2.5 times the frame budget, whatever its shape. A
    result within its default budget (1 MiB) always fits.
    """
    return max(frame_bytes // 32, 1 << 16)


class ProtocolViolation(Exception):
    """A worker frame is malformed; the message says what was wrong, for the run's ``protocol`` error."""


@dataclass(frozen=True, slots=True)
class ReadyFrame:
    """The worker set up its isolation and waits for ``run``; ``layers`` lists what took effect."""

    layers: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class CallFrame:
    """The program called ``tools.<name>(args)``; ``id`` is chosen by the worker.

    ``size`` is the frame's body in bytes: the host holds a call's frame until the call is served, and
    stops reading a worker whose calls in flight hold more than a frame budget (see ``_reader``).
    """

    id: int
    name: str
    args: JsonValue
    size: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class CancelFrame:
    """The program stopped waiting for call ``id`` (e.g. ``asyncio.wait_for`` timed out): stop serving it."""

    id: int


@dataclass(frozen=True, slots=True)
class LogFrame:
    """One piece of captured program output; ``truncated`` marks the worker's truncation marker."""

    text: str
    truncated: bool


@dataclass(frozen=True, slots=True)
class DoneFrame:
    """The program finished: a value (``has_value``) or, when ``error_kind`` is set, a failure."""

    has_value: bool
    value: JsonValue
    error_kind: str | None
    error_message: str | None
    cpu_ms: float | None = None


WorkerFrame: TypeAlias = ReadyFrame | CallFrame | CancelFrame | LogFrame | DoneFrame


def encode_frame(frame: dict[str, Any], *, validate: bool = True) -> bytes:
    """Encode one frame (a lossless JSON object) with its length header.

    ``validate=False`` skips the lossless check for frames built only from already-checked parts.
    """
    body = dumps(frame, validate=validate).encode("utf-8", "surrogatepass")
    return HEADER.pack(len(body)) + body


#: The host's ``wake`` frame, encoded once (see :meth:`codemode.sandbox.Sandbox.prewake`).
WAKE_FRAME: Final = encode_frame({"type": "wake"})


class FrameDecoder:
    """Split a byte stream into frame bodies, refusing any frame over ``max_frame_bytes``.

    The length is checked as soon as the 4 header bytes are in, so an oversized frame is refused before
    its body is buffered. After a violation the decoder stays broken (the stream has lost its framing).
    """

    __slots__ = ("_broken", "_buffer", "_max", "_max_values")

    def __init__(self, max_frame_bytes: int) -> None:
        self._max = max_frame_bytes
        self._max_values = max_frame_values(max_frame_bytes)
        self._buffer = bytearray()
        self._broken = False

    @property
    def max_frame_bytes(self) -> int:
        """The frame budget this decoder applies."""
        return self._max

    @property
    def pending(self) -> int:
        """Bytes received but not yet returned as a whole frame."""
        return len(self._buffer)

    def feed(self, data: bytes | bytearray) -> list[bytes]:
        """Add received bytes; return every complete frame body, in order."""
        if self._broken:
            raise ProtocolViolation("the channel already lost its framing")
        self._buffer += data
        bodies: list[bytes] = []
        while len(self._buffer) >= HEADER.size:
            (length,) = HEADER.unpack_from(self._buffer)
            if length > self._max:
                self._broken = True
                raise ProtocolViolation(
                    f"frame of {length} bytes exceeds the {self._max}-byte frame budget (frame_bytes)"
                )
            end = HEADER.size + length
            if len(self._buffer) < end:
                break
            with memoryview(self._buffer) as view:
                body = bytes(view[HEADER.size:end])  # (one copy: a bytearray slice would be a second)
                if length >= _SMALL_FRAME:  # (let a large buffer go now, not after the next frames)
                    self._buffer = bytearray(view[end:])
            if length < _SMALL_FRAME:
                del self._buffer[:end]
            if length > self._max_values:  # (fewer bytes than that cannot hold too many values)
                values = frame_values(body, self._max_values)
                if values > self._max_values:
                    self._broken = True
                    raise ProtocolViolation(
                        f"frame of {length} bytes may hold {values} JSON values, over the "
                        f"{self._max_values} a frame may hold (frame_bytes / 32)")
            bodies.append(body)
        return bodies


def value_depth(value: object) -> int:
    """Nesting depth of a JSON value (a scalar is 0), computed without recursion."""
    deepest = 0
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            depth += 1
            stack.extend((child, depth) for child in item.values())
        elif isinstance(item, list):
            depth += 1
            stack.extend((child, depth) for child in item)
        deepest = max(deepest, depth)
    return deepest


def _string(obj: dict[str, Any], key: str, what: str) -> str:
    value = obj.get(key)
    if type(value) is not str:
        raise ProtocolViolation(f"{what} frame needs a string {key!r}")
    return value


def _ready(obj: dict[str, Any]) -> ReadyFrame:
    layers = obj.get("layers")
    if type(layers) is not list or any(type(layer) is not str for layer in layers):
        raise ProtocolViolation("ready frame needs a list of strings 'layers'")
    return ReadyFrame(layers=tuple(layers))


def _call(obj: dict[str, Any], size: int = 0) -> CallFrame:
    call_id = obj.get("id")
    if type(call_id) is not int or not 0 <= call_id < _MAX_ID:
        raise ProtocolViolation("call frame needs an integer 'id' in [0, 2**53)")
    if "args" not in obj:
        raise ProtocolViolation("call frame needs 'args'")
    return CallFrame(id=call_id, name=_string(obj, "name", "call"), args=obj["args"], size=size)


def _cancel(obj: dict[str, Any]) -> CancelFrame:
    call_id = obj.get("id")
    if type(call_id) is not int or not 0 <= call_id < _MAX_ID:
        raise ProtocolViolation("cancel frame needs an integer 'id' in [0, 2**53)")
    return CancelFrame(id=call_id)


def _log(obj: dict[str, Any]) -> LogFrame:
    truncated = obj.get("truncated", False)
    if type(truncated) is not bool:
        raise ProtocolViolation("log frame 'truncated' must be a boolean")
    return LogFrame(text=_string(obj, "text", "log"), truncated=truncated)


def _done(obj: dict[str, Any]) -> DoneFrame:
    cpu_ms = obj.get("cpu_ms")
    if cpu_ms is not None and (type(cpu_ms) not in (int, float) or not 0 <= cpu_ms < 1e12):
        raise ProtocolViolation("done frame 'cpu_ms' must be a non-negative number")
    return _done_outcome(obj, None if cpu_ms is None else float(cpu_ms))


def _done_outcome(obj: dict[str, Any], cpu_ms: float | None) -> DoneFrame:
    if "error" in obj:
        error = obj["error"]
        if type(error) is not dict:
            raise ProtocolViolation("done frame 'error' must be an object")
        kind = _string(error, "kind", "done error")
        if kind not in WORKER_ERROR_KINDS:
            raise ProtocolViolation(f"done frame reports kind {kind!r}, which a worker may not report")
        return DoneFrame(has_value=False, value=None, error_kind=kind,
                         error_message=_string(error, "message", "done error"), cpu_ms=cpu_ms)
    has_value = obj.get("has_value")
    if type(has_value) is not bool:
        raise ProtocolViolation("done frame needs a boolean 'has_value'")
    if has_value and "value" not in obj:
        raise ProtocolViolation("done frame with has_value needs 'value'")
    return DoneFrame(has_value=has_value, value=obj.get("value") if has_value else None,
                     error_kind=None, error_message=None, cpu_ms=cpu_ms)


_PARSERS: Final[dict[str, Callable[[dict[str, Any]], WorkerFrame]]] = {
    "ready": _ready, "call": _call, "cancel": _cancel, "log": _log, "done": _done,
}


def parse_worker_frame(body: bytes) -> WorkerFrame:
    """Decode and rebuild one worker frame body; raise :class:`ProtocolViolation` if it is malformed."""
    try:
        obj = loads(body.decode("utf-8"))  # (strict: an encoded lone surrogate is not UTF-8)
    except UnicodeDecodeError as exc:
        raise ProtocolViolation(f"frame is not UTF-8: {exc.reason}") from None
    except LosslessJsonError as exc:
        raise ProtocolViolation(f"undecodable frame: {exc.reason}") from None
    except Exception as exc:  # defensive: the decoder must never take the host down
        raise ProtocolViolation(f"undecodable frame: {type(exc).__name__}") from None
    if type(obj) is not dict:
        raise ProtocolViolation("a frame must be a JSON object")
    kind = obj.get("type")
    if kind == "call":
        return _call(obj, len(body))
    parser = _PARSERS.get(kind) if type(kind) is str else None
    if parser is None:
        raise ProtocolViolation(f"unknown frame type {escape_lone_surrogates(repr(kind))}"[:200])
    return parser(obj)
