"""The stdio transport of ``codemode serve``: one JSON-RPC message per line, and an answer to every line.

The MCP SDK's own stdio transport drops a line it cannot parse (the client waits forever for an answer)
and dies when a message cannot be serialised (the next write is a broken pipe). This one checks each
line before the server sees it and answers what it refuses, so a client always hears back and the server
stays up:

* a line that is not UTF-8 or not JSON gets ``-32700`` (parse error, ``id`` null);
* a JSON array (a batch: MCP has none), a value that is no object, a message nesting deeper than
  :data:`MAX_DEPTH` levels, one holding text that is not Unicode (a lone surrogate, refused as by
  :mod:`codemode.sandbox.lossless`) or one that is not a JSON-RPC message gets ``-32600`` (invalid
  request), with the request's ``id`` when one can be read;
* a line longer than :data:`MAX_LINE_BYTES` is skipped whole and gets ``-32600``;
* an outgoing message that cannot be serialised is replaced by a ``-32603`` error for its ``id``.

While serving, descriptor 0 reads the null device and descriptor 1 writes to standard error (the wire
is served from private duplicates), so nothing a tool or a child process prints can corrupt the stream;
both are restored on exit.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator
from typing import Any, Final

import anyio
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage

from codemode.sandbox.lossless import LosslessJsonError, escape_lone_surrogates, snapshot
from codemode.sandbox.protocol import value_depth

__all__ = ("MAX_DEPTH", "MAX_LINE_BYTES", "stdio_transport")

#: The deepest a message may nest (the envelope included); the SDK cannot serialise much deeper.
MAX_DEPTH: Final = 100
#: The longest line read as one message.
MAX_LINE_BYTES: Final = 64 * 1024 * 1024
_CHUNK: Final = 1 << 16

Incoming = SessionMessage | Exception


def _error(code: int, message: str, request_id: object = None) -> SessionMessage:
    valid = request_id if (type(request_id) is int or type(request_id) is str) else None
    error = types.ErrorData(code=code, message=escape_lone_surrogates(message))
    return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=valid, error=error))


def _top_level_id(text: str) -> object:
    """The ``id`` member of a JSON object too deep to decode, read without decoding it (or None).

    A linear scan that tracks nesting outside strings and decodes only the value after a top-level
    ``"id":`` key, so a client still hears which of its requests was refused.
    """
    depth, index, size = 0, 0, len(text)
    while index < size:
        char = text[index]
        if char == '"':
            end = index + 1
            while end < size and text[end] != '"':
                end += 2 if text[end] == "\\" else 1
            if depth == 1 and text[index:end + 1] == '"id"':
                rest = text[end + 1:end + 200].lstrip()
                if rest.startswith(":"):
                    with contextlib.suppress(ValueError):
                        value, _ = json.JSONDecoder().raw_decode(rest[1:].lstrip())
                        return value
            index = end + 1
            continue
        if char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
        index += 1
    return None


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def check_line(line: bytes) -> tuple[SessionMessage, bool] | None:
    """``(message, refused)`` for one line (None for a blank line): the message it carries and False,
    or the error to send back for it and True."""
    if not line.strip():
        return None
    try:
        return SessionMessage(_checked(line)), False
    except _Refused as refusal:
        return refusal.answer, True


class _Refused(Exception):
    def __init__(self, answer: SessionMessage) -> None:
        super().__init__()
        self.answer = answer


def _refuse(code: int, message: str, request_id: object = None) -> _Refused:
    return _Refused(_error(code, message, request_id))


def _checked(line: bytes) -> types.JSONRPCMessage:
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _refuse(types.PARSE_ERROR, f"Parse error: the line is not UTF-8 ({exc.reason} at byte "
                                         f"{exc.start})") from None
    try:
        obj = json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        raise _refuse(types.INVALID_REQUEST, f"Invalid Request: the message nests deeper than {MAX_DEPTH} "
                                             "levels", _top_level_id(text)) from None
    except ValueError as exc:
        raise _refuse(types.PARSE_ERROR, f"Parse error: {exc}") from None
    if isinstance(obj, list):
        raise _refuse(types.INVALID_REQUEST, "Invalid Request: batches (JSON arrays) are not supported; "
                                             "send one message per line")
    if not isinstance(obj, dict):
        raise _refuse(types.INVALID_REQUEST, "Invalid Request: a message must be a JSON object")
    request_id = obj.get("id")
    if value_depth(obj) > MAX_DEPTH:
        raise _refuse(types.INVALID_REQUEST, f"Invalid Request: the message nests deeper than {MAX_DEPTH} "
                                             "levels", request_id)
    try:
        snapshot(obj, root="message")
    except LosslessJsonError as exc:
        raise _refuse(types.INVALID_REQUEST, f"Invalid Request: {exc}", request_id) from None
    try:
        message: types.JSONRPCMessage = types.jsonrpc_message_adapter.validate_python(obj, by_name=False)
    except Exception as exc:  # pydantic's ValidationError, and anything else a validator raises
        first = str(exc).splitlines()
        detail = "; ".join(first[:3]) if first else type(exc).__name__
        raise _refuse(types.INVALID_REQUEST, f"Invalid Request: not a JSON-RPC 2.0 message ({detail})",
                      request_id) from None
    return message


def encode_message(message: SessionMessage) -> bytes:
    """One line of wire text; a message that cannot be serialised becomes a ``-32603`` error for its id."""
    try:
        text = message.message.model_dump_json(by_alias=True, exclude_unset=True)
        return (text + "\n").encode("utf-8")
    except Exception as exc:  # pydantic's serialisation errors: depth, text that is not Unicode, ...
        request_id = getattr(message.message, "id", None)
        reason = escape_lone_surrogates(f"{type(exc).__name__}: {exc}")[:500]
        print(f"codemode serve: could not send a message: {reason}", file=sys.stderr)
        fallback = _error(types.INTERNAL_ERROR, f"Internal error: the response could not be encoded as "
                                                f"JSON ({reason})", request_id)
        return (fallback.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n").encode("utf-8")


async def _read(fd: int, incoming: MemoryObjectSendStream[Incoming],
                answers: MemoryObjectSendStream[SessionMessage]) -> None:
    """Read lines from ``fd`` until end of file: messages go to the server, refusals straight back."""
    async with incoming, answers:
        buffer = bytearray()
        skipping = False
        while True:
            chunk = await anyio.to_thread.run_sync(os.read, fd, _CHUNK, abandon_on_cancel=True)
            lines: list[bytes] = []
            if chunk:
                buffer += chunk
                while (end := buffer.find(b"\n")) >= 0:
                    line = bytes(buffer[:end])
                    del buffer[:end + 1]
                    if skipping:
                        skipping = False
                        await answers.send(_error(types.INVALID_REQUEST, "Invalid Request: the line is "
                                                  f"longer than {MAX_LINE_BYTES} bytes"))
                        continue
                    lines.append(line)
                if len(buffer) > MAX_LINE_BYTES:
                    skipping = True
                    buffer.clear()
            else:
                lines.append(bytes(buffer))  # (a last line without its newline)
            for line in lines:
                checked = check_line(line)
                if checked is None:
                    continue
                message, refused = checked
                await (answers if refused else incoming).send(message)
            if not chunk:
                return


async def _write(fd: int, outgoing: MemoryObjectReceiveStream[SessionMessage]) -> None:
    """Write every message as one line; stop when the client is gone (a broken pipe)."""
    sink = anyio.wrap_file(os.fdopen(fd, "wb", buffering=0, closefd=False))
    async with outgoing:
        async for message in outgoing:
            data = encode_message(message)
            try:
                await sink.write(data)
            except (BrokenPipeError, ConnectionResetError):
                return


@contextlib.contextmanager
def _claimed_stdio() -> Any:
    """Private duplicates of descriptors 0 and 1, which meanwhile read null and write to stderr."""
    wire_in = os.dup(0)
    wire_out = os.dup(1)
    saved_in, saved_out = os.dup(0), os.dup(1)
    try:
        null = os.open(os.devnull, os.O_RDONLY)
        try:
            os.dup2(null, 0)
        finally:
            os.close(null)
        os.dup2(2, 1)
        yield wire_in, wire_out
    finally:
        with contextlib.suppress(OSError):
            os.dup2(saved_in, 0)
        with contextlib.suppress(OSError):
            os.dup2(saved_out, 1)
        for fd in (saved_in, saved_out, wire_out):
            with contextlib.suppress(OSError):
                os.close(fd)
        # (wire_in stays open: an abandoned read may still be blocked on it; exit closes it)


@contextlib.asynccontextmanager
async def stdio_transport() -> AsyncIterator[tuple[MemoryObjectReceiveStream[Incoming],
                                                   MemoryObjectSendStream[SessionMessage]]]:
    """``(read_stream, write_stream)`` for ``Server.run`` over this process's stdin and stdout."""
    with _claimed_stdio() as (wire_in, wire_out):
        incoming_send, incoming = anyio.create_memory_object_stream[Incoming](0)
        outgoing, outgoing_receive = anyio.create_memory_object_stream[SessionMessage](16)
        async with anyio.create_task_group() as group:
            reader = anyio.CancelScope()

            async def read() -> None:
                with reader:
                    await _read(wire_in, incoming_send, outgoing.clone())

            group.start_soon(read)
            group.start_soon(_write, wire_out, outgoing_receive)
            try:
                yield incoming, outgoing
            finally:
                reader.cancel()  # (the server is done: stop reading; the writer drains what is left)
                await outgoing.aclose()
