"""Ordinary programs give exactly what plain CPython gives; documented refusals say what to do instead.

Every program in ``programs/*.txt`` (``# --- name`` starts one) runs under plain CPython and in the
sandbox (through the isolated worker); what it printed, returned and raised must be the same. A program
whose header says ``expect: TEXT`` is a documented refusal: the sandbox refuses it and its message
contains TEXT (the construct and what to use instead).
"""

from __future__ import annotations

import pytest

from codemode.sandbox import Sandbox

from ._harness import LIMITS, TOOL_NAMES, Program, echo, load, run_cpython, run_sandbox

_ALL = load()
ORDINARY = [program for program in _ALL if program.expect is None]
REFUSALS = [program for program in _ALL if program.expect is not None]


def test_the_suite_is_broad() -> None:
    """At least 300 ordinary programs, and every refusal has its expected message."""
    assert len(ORDINARY) >= 300
    assert len({program.id for program in _ALL}) == len(_ALL)
    assert all(program.expect for program in REFUSALS)


@pytest.mark.anyio
@pytest.mark.parametrize("program", ORDINARY, ids=lambda program: program.id)
async def test_program_matches_cpython(sandbox: Sandbox, program: Program) -> None:
    """Printed text, value and error are exactly CPython's."""
    expected = await run_cpython(program)
    assert expected.error is None or "expected" in program.id, f"it fails under CPython: {expected.error}"
    assert await run_sandbox(sandbox, program) == expected


@pytest.mark.anyio
@pytest.mark.parametrize("program", REFUSALS, ids=lambda program: program.id)
async def test_documented_refusal_says_what_to_do(sandbox: Sandbox, program: Program) -> None:
    """The sandbox refuses it, naming the construct and the alternative."""
    result = await sandbox.run(program.source, tool_names=TOOL_NAMES, call_tool=echo, limits=LIMITS)
    assert result.error is not None, f"it ran: {result.value!r}"
    assert program.expect is not None and program.expect in result.error.message, result.error.message
