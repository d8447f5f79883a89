"""A persistent session's worker holds hard limits too, run after run.

A session worker lives on between runs, so a program could once raise its own limits for the runs
after it (a session worker used to keep its hard limits open and could raise ``RLIMIT_AS`` to
unlimited, then allocate 1 GiB). Now a run's memory budget is always a hard limit. Where the host holds
``CAP_SYS_RESOURCE`` it grants a session worker each run's room and the worker lowers every limit to
exactly that run's budgets (hard = soft throughout). Where it does not (this CI machine's root lacks
it), nobody can raise a hard limit: the memory hard limit stays at the first run's budget, a later run
asking for more is refused with the reason, the CPU hard limit stays open (the host's CPU watch ends a
run at its budget) and the runs do not claim ``rlimits``. Both branches are asserted, whichever this
host is.
"""

from __future__ import annotations

import resource
from collections.abc import AsyncIterator

import anyio
import pytest

from codemode.sandbox import Sandbox, SandboxLimits, SandboxSession
from codemode.sandbox._isolate import can_grant_limits
from codemode.sandbox.limits import MIB
from tests.sandbox.breach.conftest import UNRESTRICTED

pytestmark = pytest.mark.anyio

LIMITS = SandboxLimits(wall_seconds=20.0, cpu_seconds=5.0, memory_bytes=256 * MIB)
LIMITS_OF = """
import resource
names = [n for n in dir(resource) if n.startswith('RLIMIT_')]
return {n: list(resource.getrlimit(getattr(resource, n))) for n in names}
"""
RAISE = """
import resource
raised = []
for which in (resource.RLIMIT_AS, resource.RLIMIT_CPU, resource.RLIMIT_NOFILE, resource.RLIMIT_NPROC):
    try:
        resource.setrlimit(which, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        raised.append(which)
    except (ValueError, OSError):
        pass
return raised
"""


async def _echo(name: str, args: object) -> object:
    return args


@pytest.fixture(scope="module")
async def session() -> AsyncIterator[tuple[Sandbox, SandboxSession]]:
    async with Sandbox(executor=UNRESTRICTED, warm=1, require="all") as sandbox, \
            sandbox.open_session(LIMITS) as opened:
        yield sandbox, opened


async def _run(pair: tuple[Sandbox, SandboxSession], program: str,
               limits: SandboxLimits | None = None) -> tuple[object, str | None]:
    """The run's value (or error kind) and its error message."""
    sandbox, session = pair
    with anyio.fail_after(30):
        result = await sandbox.run(program, tool_names=(), call_tool=_echo, session=session, limits=limits)
    assert "uid" in result.stats.isolation
    assert ("rlimits" in result.stats.isolation) == can_grant_limits()
    assert result.error is None or result.error.kind == "memory-limit", result.error
    assert not result.stats.session_restarted
    if result.error is None:
        return result.value, None
    return result.error.kind, result.error.message


async def test_a_session_cannot_raise_its_limits_then_allocate_a_gibibyte(
        session: tuple[Sandbox, SandboxSession]) -> None:
    """It refuses raising the memory, descriptor and process limits in one run; the next run still
    cannot allocate 1 GiB, and the worker lives on."""
    raised, _ = await _run(session, RAISE)
    assert isinstance(raised, list)
    open_cpu = [] if can_grant_limits() else [resource.RLIMIT_CPU]
    assert raised == open_cpu
    assert (await _run(session, "x = bytearray(1 << 30)\nreturn len(x)"))[0] == "memory-limit"
    assert (await _run(session, "return 'alive'"))[0] == "alive"  # the same worker, globals and all


async def test_the_memory_limit_is_hard_in_every_session_run(session: tuple[Sandbox, SandboxSession]) -> None:
    """It keeps hard = soft for every limit (but CPU time where nobody can raise it), memory at the
    run's budget."""
    for _ in range(2):
        limits, _ = await _run(session, LIMITS_OF)
        assert isinstance(limits, dict)
        if not can_grant_limits():
            limits.pop("RLIMIT_CPU")
        assert all(soft == hard for soft, hard in limits.values()), limits
        assert limits["RLIMIT_AS"] == [LIMITS.memory_bytes, LIMITS.memory_bytes]


async def test_a_later_run_asking_for_more_memory_gets_it_or_is_told_why(
        session: tuple[Sandbox, SandboxSession]) -> None:
    """It grants more room as a hard limit where the host may, and refuses with the reason where not;
    the next run has its own budget again."""
    larger = LIMITS.replace(memory_bytes=512 * MIB)
    program = ("import resource\nx = bytearray(300 * 1024 * 1024)\n"
               "return list(resource.getrlimit(resource.RLIMIT_AS))")
    value, message = await _run(session, program, larger)
    if can_grant_limits():
        assert value == [512 * MIB, 512 * MIB]
    else:
        assert value == "memory-limit" and message is not None and "CAP_SYS_RESOURCE" in message
    assert (await _run(session, program))[0] == "memory-limit"  # 256 MiB: 300 MiB do not fit
    limits, _ = await _run(session, LIMITS_OF)
    assert isinstance(limits, dict) and limits["RLIMIT_AS"] == [256 * MIB, 256 * MIB]
