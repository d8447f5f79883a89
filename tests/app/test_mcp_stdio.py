"""``codemode serve`` over real stdio answers every line, refusals included, and stays up."""

from __future__ import annotations

import json
import select
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


class _Server:
    """A spawned ``codemode serve`` spoken to line by line."""

    def __init__(self, workspace: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "codemode", "serve", "--workspace", str(workspace)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def send(self, line: bytes | str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line.encode() if isinstance(line, str) else line)
        self.process.stdin.write(b"\n")
        self.process.stdin.flush()

    def receive(self, seconds: float = 20.0) -> dict[str, Any]:
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], seconds)
        assert ready, "the server sent no answer"
        line = self.process.stdout.readline()
        assert line, f"the server closed its output: {self._stderr()}"
        answer: dict[str, Any] = json.loads(line)
        return answer

    def _stderr(self) -> str:
        self.process.kill()
        self.process.wait()
        assert self.process.stderr is not None
        return self.process.stderr.read().decode(errors="replace")[-2000:]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[_Server]:
    spawned = _Server(tmp_path)
    spawned.send(json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}))
    assert spawned.receive(60)["id"] == 0
    spawned.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
    yield spawned
    if spawned.process.poll() is None:
        assert spawned.process.stdin is not None
        spawned.process.stdin.close()
        try:
            spawned.process.wait(20)
        except subprocess.TimeoutExpired:
            spawned.process.kill()
            spawned.process.wait()
    for stream in (spawned.process.stdin, spawned.process.stdout, spawned.process.stderr):
        if stream is not None:
            stream.close()


def _call(request_id: int, code: str) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                       "params": {"name": "run_code", "arguments": {"code": code, "description": "test"}}})


_HOSTILE: list[tuple[str, bytes | str, int, Any]] = [
    ("not-json", "hello there", -32700, None),
    ("not-utf8", b'{"jsonrpc": "2.0", "id": 3, "method": "\xff"}', -32700, None),
    ("array", json.dumps([{"jsonrpc": "2.0", "id": 4, "method": "tools/list"}]), -32600, None),
    ("scalar", "42", -32600, None),
    ("surrogate", _call(5, "return 1").replace('"test"', '"\\ud800"'), -32600, 5),
    ("deep", _call(6, "return 1").replace('"return 1"', "[" * 50_000 + "]" * 50_000), -32600, 6),
    ("not-jsonrpc", json.dumps({"id": 7, "hello": "world"}), -32600, 7),
]


@pytest.mark.parametrize(("line", "code", "request_id"), [case[1:] for case in _HOSTILE],
                         ids=[case[0] for case in _HOSTILE])
def test_every_line_gets_an_answer_and_the_server_stays_up(server: _Server, line: bytes | str, code: int,
                                                           request_id: Any) -> None:
    """A refused line gets a JSON-RPC error (-32700 or -32600, with its id when readable); then an
    ordinary request still works."""
    server.send(line)
    answer = server.receive()
    assert answer["error"]["code"] == code, answer
    assert answer["id"] == request_id
    server.send(_call(100, "return 41 + 1"))
    assert server.receive()["result"]["structuredContent"] == {"logs": [], "result": 42}


@pytest.mark.parametrize("code", ["print(chr(0xdc80))", "return '\\ud800'", "raise ValueError(chr(0xd800))"])
def test_programs_with_lone_surrogates_get_error_results(server: _Server, code: str) -> None:
    """Text that is not Unicode inside a program becomes an error result, never a dead server."""
    server.send(_call(8, code))
    answer = server.receive()
    assert answer["id"] == 8 and answer["result"]["isError"] is True
    server.send(_call(9, "return 'ok'"))
    assert server.receive()["result"]["structuredContent"]["result"] == "ok"


def test_a_request_nesting_past_the_limit_is_refused_with_its_id() -> None:
    """Nesting beyond MAX_DEPTH (but within the decoder) is refused naming the limit."""
    from codemode.app._mcp_stdio import MAX_DEPTH, check_line

    deep: Any = 1
    for _ in range(MAX_DEPTH + 5):
        deep = [deep]
    line = json.dumps({"jsonrpc": "2.0", "id": "x", "method": "tools/call", "params": {"arguments": deep}})
    checked = check_line(line.encode())
    assert checked is not None
    answer, refused = checked
    assert refused and answer.message.id == "x"  # type: ignore[union-attr]
    assert f"deeper than {MAX_DEPTH}" in answer.message.error.message  # type: ignore[union-attr]


@pytest.mark.parametrize(("text", "expected"), [
    ('{"jsonrpc": "2.0", "id": 12, "params": [[[]]]}', 12),
    ('{"params": {"id": 1}, "id": "top"}', "top"),
    ('{"params": {"id": 1}}', None),
    ('{"a": "\\"id\\": 3", "id": 4}', 4),
])
def test_the_id_of_an_undecodable_request_is_read_at_the_top_level(text: str, expected: Any) -> None:
    """Only a top-level "id" member is taken, never one nested in params or inside a string."""
    from codemode.app._mcp_stdio import _top_level_id

    assert _top_level_id(text) == expected
