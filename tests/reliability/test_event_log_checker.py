"""The event-log checker the reliability tests rely on must itself catch every kind of damage."""

from __future__ import annotations

from typing import Any

import pytest

from codemode.runtime import EventLog
from tests.reliability._support import event_log_problems


def _sound() -> list[tuple[str, dict[str, Any]]]:
    start = {"root_call_id": "c1", "parent_call_id": "c1", "name": "add", "arguments": {}}
    return [
        ("tool/call", {"call_id": "c1", "name": "run_code", "arguments": "{}"}),
        ("tool/code-dispatch-start", {**start, "sub_call_id": "c1:code:1"}),
        ("tool/code-dispatch-start", {**start, "sub_call_id": "c1:code:2"}),
        ("tool/code-dispatch", {**start, "sub_call_id": "c1:code:1", "is_error": False, "content": []}),
        ("tool/code-dispatch", {**start, "sub_call_id": "c1:code:2", "is_error": True, "content": []}),
        ("tool/result", {"call_seq": 1, "call_id": "c1", "name": "run_code", "is_error": False}),
        ("tool/call", {"call_id": "c2", "name": "echo", "arguments": "{}"}),
        ("tool/result", {"call_seq": 7, "call_id": "c2", "name": "echo", "is_error": False}),
    ]


def _log(entries: list[tuple[str, dict[str, Any]]]) -> EventLog:
    log = EventLog()
    for type_, data in entries:
        log.append(type_, data)
    return log


def test_a_sound_log_has_no_problems() -> None:
    """It accepts a log where every call and child is paired, numbered and ordered."""
    assert event_log_problems(_log(_sound())) == []


@pytest.mark.parametrize(
    ("damage", "expected"),
    [
        (lambda e: e[:-1], "tool/call c2 has 0 results"),
        (lambda e: [*e, e[-1]], "tool/call c2 has 2 results"),
        (lambda e: [x for i, x in enumerate(e) if i != 3], "child c1:code:1 has 0 ends"),
        (lambda e: [e[0], e[3], *e[1:3], *e[4:]], "ended without an earlier start"),
        (lambda e: [e[0], e[2], e[1], *e[3:]], "numbered ['c1:code:2', 'c1:code:1']"),
        (lambda e: [e[0], e[1], e[2], e[3], e[5], e[4], *e[6:]], "logged outside its call/result"),
        (lambda e: [*e[:5], e[6], e[5], e[7]], "links to no earlier matching call"),
    ],
)
def test_each_kind_of_damage_is_reported(damage: Any, expected: str) -> None:
    """It names a lost or duplicated result, a lost child end, misnumbering and misplacement."""
    entries = damage(_sound())
    fixed = []
    for type_, data in entries:  # keep call_seq links pointing at the calls' new positions
        fixed.append((type_, dict(data)))
    positions = {d["call_id"]: i + 1 for i, (t, d) in enumerate(fixed) if t == "tool/call"}
    for type_, data in fixed:
        if type_ == "tool/result" and "links to no earlier" not in expected:
            data["call_seq"] = positions[data["call_id"]]
    problems = event_log_problems(_log(fixed))
    assert any(expected in problem for problem in problems), problems
