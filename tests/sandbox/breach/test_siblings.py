"""A worker cannot reach a sibling worker running at the same time: no signal, no trace, no memory read.

Two runs of one sandbox run concurrently: the sibling tells the host its pid (as its namespace numbers
it, the only number the attacker could use) and waits; the attacker gets that pid from the host and
tries. Both stay alive until the attacker is done, so the target exists throughout.
"""

from __future__ import annotations

import errno
from typing import Any

import pytest

from tests.sandbox.breach._pair import attack_beside_a_sibling
from tests.sandbox.breach._probes import Stop
from tests.sandbox.breach.conftest import LIMITS, PRELUDE, Breach

pytestmark = pytest.mark.anyio

ATTEMPTS = {
    "signal-sibling": "os.kill(pid, 0)\nreturn 'reached'",
    "ptrace-sibling": "return sc(101, 16, pid, 0, 0)",  # PTRACE_ATTACH
    "process-vm-readv-sibling": "buffer = ctypes.create_string_buffer(64)\n"
                                "local = (ctypes.c_void_p * 2)(ctypes.addressof(buffer), 64)\n"
                                "remote = (ctypes.c_void_p * 2)(0x400000, 64)\n"
                                "return sc(310, pid, local, 1, remote, 1, 0)",
}
#: Without seccomp, the uid check answers first (each worker has a uid of its own).
STOPS = {"all": Stop("seccomp", errno.EPERM), "no-seccomp": Stop("uid", errno.EPERM),
         "no-seccomp-no-landlock": Stop("uid", errno.EPERM)}
CASES = [(attempt, config) for attempt in ATTEMPTS for config in STOPS]

SIBLING = "import os\nawait tools.register(pid=os.getpid())\nawait tools.hold()\nreturn 'held'"


def _attacker() -> str:
    parts = [PRELUDE.format(ctx="{}"), "pid = (await tools.sibling())['pid']", "results = {}"]
    for name, body in ATTEMPTS.items():
        indented = "\n".join("    " + line for line in body.splitlines())
        parts.append(f"async def _attempt(pid):\n{indented}\n"
                     f"try:\n    results[{name!r}] = {{'ok': True, 'value': _plain(await _attempt(pid))}}\n"
                     f"except OSError as exc:\n    results[{name!r}] = {{'ok': False, 'errno': exc.errno}}")
    parts.append("return results")
    return "\n".join(parts)


_outcomes: dict[str, dict[str, Any]] = {}


async def _run_pair(breach: Breach, config: str) -> dict[str, Any]:
    if config not in _outcomes:
        _, attack = await attack_beside_a_sibling(breach.sandboxes[config], SIBLING, _attacker(), LIMITS)
        _outcomes[config] = {"values": attack.value, "isolation": attack.stats.isolation}
    return _outcomes[config]


@pytest.mark.parametrize(("attempt", "config"), CASES, ids=[f"{a}[{c}]" for a, c in CASES])
async def test_a_sibling_worker_is_out_of_reach(breach: Breach, attempt: str, config: str) -> None:
    """It fails to signal, trace or read a live sibling, and names the layer that stops it."""
    found = await _run_pair(breach, config)
    outcome = found["values"][attempt]
    stop = STOPS[config]
    assert not outcome["ok"] and outcome["errno"] == stop.errno, (
        f"{attempt} under {config}: expected {stop.layer} to stop it, got {outcome}")
    assert stop.layer in found["isolation"]
