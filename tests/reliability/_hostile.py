"""A hostile executor for fault tests: the real interpreter, except for programs that ask to misbehave.

A worker runs whatever executor module the sandbox names (``Sandbox(executor=...)``). This one runs
ordinary programs with :mod:`codemode.sandbox.interpreter`, so a runtime built on it serves normal calls, but
a program whose first line is one of the markers below makes the *worker* break the protocol, as a program
that had escaped the language guards could: it writes straight to the protocol channel (descriptor 3), under
the host's frame decoder, or stops answering altogether.

- ``#garbage``: bytes that are no frame at all (a length header followed by invalid UTF-8);
- ``#oversized``: a header announcing a 1 GiB frame (over any frame budget);
- ``#bad-json``: a well-sized frame whose body is not lossless JSON (``NaN``);
- ``#unknown-type``: a valid JSON object with an unknown frame ``type``;
- ``#forged-done``: a ``done`` frame claiming a host-only error kind (``timeout``);
- ``#silent``: the worker blocks forever without sending anything (the host must time it out);
- ``#half-frame``: a header and half a body, then silence.

After misbehaving, the worker hangs: only the host can end the run.

Everything is imported at module level: the template imports this module before forking, and a
worker cannot import lazily.
"""

from __future__ import annotations

import os
import struct
import time
from typing import Any

from codemode.sandbox import interpreter

_CHANNEL = 3
_HEADER = struct.Struct(">I")


def compile_program(source: str) -> Any:
    """Keep the marker line for :func:`run_program`; compile everything else for real."""
    first = source.split("\n", 1)[0].strip()
    if first.startswith("#") and first[1:] in _ACTIONS:
        return first[1:]
    return interpreter.compile_program(source)


def _frame(body: bytes) -> bytes:
    return _HEADER.pack(len(body)) + body


def _write(data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(_CHANNEL, view):]


def _hang() -> None:
    while True:
        time.sleep(3600)


_ACTIONS: dict[str, Any] = {
    "garbage": lambda: _write(_frame(b"\xff\xfe\x00not a frame")),
    "oversized": lambda: _write(_HEADER.pack(1 << 30) + b"{"),
    "bad-json": lambda: _write(_frame(b'{"type": "log", "text": NaN}')),
    "unknown-type": lambda: _write(_frame(b'{"type": "shell", "command": "id"}')),
    "forged-done": lambda: _write(_frame(b'{"type": "done", "error": {"kind": "timeout", "message": "x"}}')),
    "silent": _hang,
    "half-frame": lambda: _write(_HEADER.pack(100) + b'{"type": "lo'),
}


async def run_program(compiled: Any, **kwargs: Any) -> Any:
    """Misbehave for a marker program (then hang, so only the host can end the run); else run it."""
    if isinstance(compiled, str):
        _ACTIONS[compiled]()
        _hang()
    return await interpreter.run_program(compiled, **kwargs)
