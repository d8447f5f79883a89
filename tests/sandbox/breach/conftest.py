"""Harness of the assume-breach suite: plain CPython inside real workers, one sandbox per configuration.

The language layer is assumed fallen: every program here runs as unrestricted CPython
(``codemode.sandbox.testing.unrestricted``) in a worker made exactly as production makes it. The
sandboxes are shared by the whole suite (one per layer configuration, each requiring every layer it
attempts, so a missing layer fails the suite instead of weakening it), and the probes of one
configuration run together in one worker run (those that may end or change their worker run alone),
so the suite takes seconds.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest

import codemode.sandbox
from codemode.sandbox import Sandbox, SandboxLimits
from codemode.sandbox._isolate import OPTIONAL_LAYERS
from tests.sandbox.breach._probes import PROBES, Probe

UNRESTRICTED = "codemode.sandbox.testing.unrestricted"
LIMITS = SandboxLimits(wall_seconds=20.0, cpu_seconds=10.0, memory_bytes=256 * 1024 * 1024)
#: The layers each configuration attempts (and requires).
LAYERS = {
    "all": OPTIONAL_LAYERS,
    "no-seccomp": OPTIONAL_LAYERS - {"seccomp"},
    "no-seccomp-no-mount": OPTIONAL_LAYERS - {"seccomp", "mount-ns"},
    "no-seccomp-no-landlock": OPTIONAL_LAYERS - {"seccomp", "landlock"},
}
SECRET = "breach-secret-3f1c"

PRELUDE = """\
import ctypes, errno, mmap, os, resource, signal, socket, sys
CTX = {ctx}
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
def sc(number, *args):
    result = _libc.syscall(number, *args)
    if result == -1:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    return result
def _plain(value):
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return repr(value)
"""

_PROBE_RUNNER = """
_results = {{}}
for _name, _attempt in [{entries}]:
    try:
        _results[_name] = {{"ok": True, "value": _plain(await _attempt())}}
    except BaseException as _exc:
        _results[_name] = {{"ok": False, "exception": type(_exc).__name__,
                            "errno": getattr(_exc, "errno", None), "message": str(_exc)[:300]}}
return _results
"""


def probe_program(ctx: dict[str, Any], probes: list[Probe]) -> str:
    """One program that runs every probe in turn and returns what each got, by probe id."""
    parts = [PRELUDE.format(ctx=repr(ctx))]
    for index, probe in enumerate(probes):
        body = "\n".join("    " + line for line in probe.body.splitlines())
        parts.append(f"async def _probe_{index}():\n{body}\n")
    entries = ", ".join(f"({probe.id!r}, _probe_{index})" for index, probe in enumerate(probes))
    parts.append(_PROBE_RUNNER.format(entries=entries))
    return "\n".join(parts)


@dataclass
class Host:
    """What the host holds for the probes to go after: files, listeners and its own identity."""

    workspace: Path
    listeners: dict[str, socket.socket] = field(default_factory=dict)
    ctx: dict[str, Any] = field(default_factory=dict)

    def received(self) -> list[str]:
        """Names of the listeners that got a connection or a datagram (must stay empty)."""
        got = []
        for name, listener in self.listeners.items():
            listener.setblocking(False)
            try:
                if listener.type == socket.SOCK_DGRAM:
                    listener.recv(64)
                else:
                    listener.accept()[0].close()
                got.append(name)
            except BlockingIOError:
                pass
        return got


@pytest.fixture(scope="session")
def host() -> Iterator[Host]:
    """A world-writable workspace with a secret, another run's directory, TCP/UDP listeners on
    127.0.0.1, abstract and path Unix sockets: everything plain CPython on this machine could reach
    without the OS layers (file modes let anyone in, so only the layers can keep a worker out)."""
    workspace = Path(tempfile.mkdtemp(prefix="codemode-breach-"))
    os.chmod(workspace, 0o777)
    secret = workspace / "secret.txt"
    secret.write_text(SECRET)
    os.chmod(secret, 0o666)
    other_run = Path(tempfile.mkdtemp(prefix="codemode-worker-breach-"))
    (other_run / "left.txt").write_text(SECRET)
    os.chmod(other_run, 0o777)
    os.chmod(other_run / "left.txt", 0o666)
    tcp = socket.socket()
    tcp.bind(("127.0.0.1", 0))
    tcp.listen()
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    abstract_name = f"\0codemode-breach-{uuid.uuid4().hex}"
    abstract = socket.socket(socket.AF_UNIX)
    abstract.bind(abstract_name)
    abstract.listen()
    unix_path = str(workspace / "host.sock")
    unix = socket.socket(socket.AF_UNIX)
    unix.bind(unix_path)
    unix.listen()
    os.chmod(unix_path, 0o777)
    source = Path(codemode.sandbox.__file__).resolve().parent / "_isolate.py"
    state = Host(workspace, {"tcp": tcp, "udp": udp, "abstract": abstract, "unix": unix})
    state.ctx = {
        "source": str(source), "workspace": str(workspace), "workspace_file": str(secret),
        "other_run": str(other_run),
        "tmp": tempfile.gettempdir(), "host_pid": os.getpid(), "host_pgid": os.getpgid(0),
        "tcp_port": tcp.getsockname()[1], "udp_port": udp.getsockname()[1], "abstract": abstract_name,
        "unix_path": unix_path, "python": sys.executable, "memory_bytes": LIMITS.memory_bytes,
    }
    yield state
    for listener in state.listeners.values():
        listener.close()
    shutil.rmtree(workspace, ignore_errors=True)
    shutil.rmtree(other_run, ignore_errors=True)


async def _no_tools(name: str, args: object) -> object:
    raise AssertionError(f"the probes call no tool ({name})")


@dataclass
class Breach:
    """One sandbox per configuration, and the probes' outcomes, each batch run once."""

    host: Host
    sandboxes: dict[str, Sandbox]
    outcomes: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    #: The layers each configuration's workers reported.
    isolation: dict[str, tuple[str, ...]] = field(default_factory=dict)

    async def outcome(self, config: str, probe: Probe) -> dict[str, Any]:
        """What ``probe`` got under ``config`` (running its batch the first time it is asked for)."""
        key = (config, probe.id)
        if key not in self.outcomes:
            batch = [probe] if probe.alone else [
                p for p in PROBES
                if not p.alone and config in p.stops and (config, p.id) not in self.outcomes]
            self.outcomes.update({(config, name): value for name, value in
                                  (await self.run(config, batch)).items()})
        return self.outcomes[key]

    async def run(self, config: str, probes: list[Probe]) -> dict[str, Any]:
        sandbox = self.sandboxes[config]
        ctx = {**self.host.ctx, "template_pid": sandbox.template_pid}
        with anyio.fail_after(60):
            result = await sandbox.run(probe_program(ctx, probes), tool_names=(), call_tool=_no_tools,
                                       limits=LIMITS)
        self.isolation[config] = result.stats.isolation
        if probes[0].alone and result.error is not None:  # the probe ended its own worker
            return {probes[0].id: {"ok": False, "exception": "worker-died", "errno": None,
                                   "message": result.error.message}}
        assert result.error is None, result.error
        assert isinstance(result.value, dict)
        return json.loads(json.dumps(result.value))


@pytest.fixture(scope="session")
async def breach(host: Host) -> AsyncIterator[Breach]:
    """The configurations' sandboxes, each requiring every layer it attempts (fails closed)."""
    async with contextlib.AsyncExitStack() as stack:
        sandboxes = {config: await stack.enter_async_context(
                         Sandbox(executor=UNRESTRICTED, warm=1, layers=layers, require="all"))
                     for config, layers in LAYERS.items()}
        yield Breach(host, sandboxes)
