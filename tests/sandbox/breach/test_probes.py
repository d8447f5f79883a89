"""Every probe fails under every configuration it names, and the layer it names is the one that stopped it.

Each probe first is real: the same attempt, from this (host) process, reaches what it goes after (a
readable secret, a listener, a live process), which ``test_the_targets_are_real`` checks. Inside a
worker, with the language layer gone, it must fail with the evidence of its layer, and that layer
must be one the worker reports active; a probe stopped by ``seccomp`` must use a system call the
allowlist does not list.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

import pytest

from codemode.sandbox import _seccomp
from tests.sandbox.breach._probes import CONFIGS, PROBES, Probe, Stop
from tests.sandbox.breach.conftest import SECRET, Breach, Host

pytestmark = pytest.mark.anyio

CASES = [(probe, config) for probe in PROBES for config in CONFIGS if config in probe.stops]


def _evidence(outcome: dict[str, Any]) -> str:
    if outcome["ok"]:
        return f"it succeeded and saw {outcome['value']!r}"
    return f"{outcome['exception']} (errno {outcome['errno']}): {outcome['message']}"


def _stopped(outcome: dict[str, Any], stop: Stop) -> bool:
    if stop.errno is not None:
        return not outcome["ok"] and outcome["errno"] == stop.errno
    if stop.exception is not None:
        return not outcome["ok"] and outcome["exception"] == stop.exception
    return bool(outcome["ok"]) and outcome["value"] == stop.value


@pytest.mark.parametrize(("probe", "config"), CASES, ids=[f"{p.id}[{c}]" for p, c in CASES])
async def test_the_attempt_fails_and_names_its_layer(breach: Breach, probe: Probe, config: str) -> None:
    """It fails the attempt with the evidence of the named layer, which the worker reports active."""
    outcome = await breach.outcome(config, probe)
    stop = probe.stops[config]
    assert _stopped(outcome, stop), (
        f"{probe.id} under {config}: expected {stop.layer} to stop it, but {_evidence(outcome)}")
    assert stop.layer in breach.isolation[config], f"{stop.layer} is not active under {config}"
    if stop.layer == "seccomp":
        assert probe.syscall not in _seccomp.ALLOWED, f"{probe.syscall} is on the allowlist"


def test_the_suite_is_large_and_every_probe_is_checked_with_every_layer() -> None:
    """It has at least 40 probes, each checked with every layer on (the production configuration)."""
    assert len({probe.id for probe in PROBES}) == len(PROBES) >= 40
    assert all("all" in probe.stops for probe in PROBES)


def test_the_targets_are_real(host: Host) -> None:
    """The probes' targets exist and are open to plain CPython on this machine (no probe is vacuous)."""
    ctx = host.ctx
    assert Path(ctx["workspace_file"]).read_text() == SECRET
    assert (Path(ctx["other_run"]) / "left.txt").read_text() == SECRET
    assert Path(ctx["source"]).read_text().startswith('"""')
    assert Path("/etc/passwd").read_text() and os.listdir("/")
    assert Path(f"/proc/{ctx['host_pid']}/environ").read_bytes()
    os.kill(ctx["host_pid"], 0)
    for family, kind, address in ((socket.AF_INET, socket.SOCK_STREAM, ("127.0.0.1", ctx["tcp_port"])),
                                  (socket.AF_UNIX, socket.SOCK_STREAM, ctx["abstract"]),
                                  (socket.AF_UNIX, socket.SOCK_STREAM, ctx["unix_path"])):
        with socket.socket(family, kind) as client:
            client.connect(address)
    assert sorted(host.received()) == ["abstract", "tcp", "unix"]  # (drained: they start empty again)


async def test_nothing_reached_the_host_and_nothing_changed(breach: Breach, host: Host) -> None:
    """After every probe, no listener got a byte and the workspace is as the test made it."""
    for probe, config in CASES:
        await breach.outcome(config, probe)
    _check_untouched(host)


def _check_untouched(host: Host) -> None:
    assert host.received() == []
    assert sorted(os.listdir(host.ctx["workspace"])) == ["host.sock", "secret.txt"]
    assert Path(host.ctx["workspace_file"]).read_text() == SECRET
    assert os.stat(host.ctx["workspace_file"]).st_mode & 0o777 == 0o666
    assert not Path("/planted").exists()
