"""Nothing a run leaves behind is seen by a later run, of the same sandbox or of another one.

Each leftover is planted by one run and looked for by a later run of the same sandbox (a fresh
worker), by a run of another sandbox and, where it can, by the host. With every layer on, seccomp
refuses the planting; without it, the planting may succeed inside the worker, and then the layer that
keeps it from the later run is named (its IPC or network namespace died with it, the next worker has
another uid, there was nowhere writable to put it).
"""

from __future__ import annotations

import ctypes
import errno
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import anyio
import pytest

from codemode.sandbox import Sandbox
from tests.sandbox.breach._probes import Stop
from tests.sandbox.breach.conftest import LAYERS, LIMITS, PRELUDE, UNRESTRICTED, Breach

pytestmark = pytest.mark.anyio

TOKEN = uuid.uuid4().hex[:12]
KEY = 0x0C0D0000 + int(TOKEN[:4], 16)  # a SysV IPC key no one else uses
CONFIGS = ("all", "no-seccomp")


@dataclass(frozen=True)
class Leftover:
    """``plant`` tries to leave something; ``look`` tries to find it from a later run.

    ``stops`` maps a configuration to where the named layer stops it (``"plant"``: the planting fails
    with the evidence; ``"look"``: it is planted, and every later look fails with the evidence).
    """

    id: str
    plant: str
    look: str
    stops: dict[str, tuple[str, Stop]]


_SEC = ("plant", Stop("seccomp", errno.EPERM))

LEFTOVERS = (
    Leftover("sysv-shared-memory", f"return sc(29, {KEY}, 4096, 0o1600)", f"return sc(29, {KEY}, 0, 0)",
             {"all": _SEC, "no-seccomp": ("look", Stop("ipc-ns", errno.ENOENT))}),
    Leftover("sysv-message-queue", f"return sc(68, {KEY + 1}, 0o1600)", f"return sc(68, {KEY + 1}, 0)",
             {"all": _SEC, "no-seccomp": ("look", Stop("ipc-ns", errno.ENOENT))}),
    Leftover("sysv-semaphore", f"return sc(64, {KEY + 2}, 1, 0o1600)", f"return sc(64, {KEY + 2}, 0, 0)",
             {"all": _SEC, "no-seccomp": ("look", Stop("ipc-ns", errno.ENOENT))}),
    Leftover("posix-message-queue", f"return sc(240, b'codemode-{TOKEN}', 0o102, 0o600, None)",
             f"return sc(240, b'codemode-{TOKEN}', 0, 0, None)",  # (RLIMIT_MSGQUEUE is 0: no room)
             {"all": _SEC, "no-seccomp": ("plant", Stop("rlimits", errno.EMFILE))}),
    Leftover("user-keyring", f"return sc(248, b'user', b'planted-{TOKEN}', b'secret', 6, -4)",
             f"return sc(250, 10, -4, b'user', b'planted-{TOKEN}', 0)",
             {"all": _SEC, "no-seccomp": ("look", Stop("uid", errno.ENOKEY))}),
    Leftover("abstract-socket", f"s = socket.socket(socket.AF_UNIX)\ns.bind('\\0codemode-{TOKEN}')\n"
                                "s.listen()\nreturn 'bound'",
             f"s = socket.socket(socket.AF_UNIX)\ns.connect('\\0codemode-{TOKEN}')\nreturn 'connected'",
             {"all": _SEC, "no-seccomp": ("look", Stop("netns", errno.ECONNREFUSED))}),
    Leftover("file-in-dev-shm", f"open('/dev/shm/codemode-{TOKEN}', 'w').close()\nreturn 'made'",
             f"return open('/dev/shm/codemode-{TOKEN}').read()",
             {"all": _SEC, "no-seccomp": ("plant", Stop("mount-ns", errno.ENOENT))}),
    Leftover("file-in-tmp", f"open('/tmp/codemode-{TOKEN}', 'w').close()\nreturn 'made'",
             f"return open('/tmp/codemode-{TOKEN}').read()",
             {"all": _SEC, "no-seccomp": ("plant", Stop("mount-ns", errno.ENOENT))}),
    Leftover("file-in-working-directory", f"open('codemode-{TOKEN}', 'w').close()\nreturn 'made'",
             f"return open('codemode-{TOKEN}').read()",
             {"all": _SEC, "no-seccomp": ("plant", Stop("mount-ns", errno.EROFS))}),
    Leftover("hostname", "return sc(170, b'planted', 7)", "return os.uname().nodename == 'planted' or 1 / 0",
             {"all": _SEC, "no-seccomp": ("plant", Stop("uid", errno.EPERM))}),
)

CASES = [(leftover, config) for leftover in LEFTOVERS for config in CONFIGS]


@pytest.fixture(scope="module")
async def others() -> AsyncIterator[dict[str, Sandbox]]:
    """A second sandbox per configuration: "another Sandbox" for the later runs."""
    async with Sandbox(executor=UNRESTRICTED, warm=1, layers=LAYERS["all"], require="all") as every, \
            Sandbox(executor=UNRESTRICTED, warm=1, layers=LAYERS["no-seccomp"], require="all") as open_:
        yield {"all": every, "no-seccomp": open_}


async def _attempt(sandbox: Sandbox, body: str) -> dict[str, Any]:
    """Run ``body`` (one attempt) in a fresh worker of ``sandbox``; what it got, as the probes report."""
    indented = "\n".join("    " + line for line in body.splitlines())
    program = PRELUDE.format(ctx="{}") + f"""
async def _leftover():
{indented}
try:
    return {{"ok": True, "value": _plain(await _leftover())}}
except BaseException as exc:
    return {{"ok": False, "exception": type(exc).__name__, "errno": getattr(exc, "errno", None),
            "message": str(exc)[:300]}}
"""
    with anyio.fail_after(30):
        result = await sandbox.run(program, tool_names=(), call_tool=_echo, limits=LIMITS)
    assert result.error is None, result.error
    assert isinstance(result.value, dict)
    return dict(result.value)


def _matches(outcome: dict[str, Any], stop: Stop) -> bool:
    return not outcome["ok"] and outcome["errno"] == stop.errno


def _host_sees_sysv(number: int, key: int) -> bool:
    """Whether the host's own IPC namespace has the key (``*get`` without IPC_CREAT)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    args = {29: (key, 0, 0), 68: (key, 0), 64: (key, 0, 0)}[number]
    return int(libc.syscall(number, *args)) != -1


@pytest.mark.parametrize(("leftover", "config"), CASES, ids=[f"{left.id}[{c}]" for left, c in CASES])
async def test_a_later_run_sees_nothing_left(breach: Breach, others: dict[str, Sandbox], leftover: Leftover,
                                             config: str) -> None:
    """It stops the planting, or keeps what was planted from every later run; the layer is named."""
    where, stop = leftover.stops[config]
    planted = await _attempt(breach.sandboxes[config], leftover.plant)
    later_same = await _attempt(breach.sandboxes[config], leftover.look)
    later_other = await _attempt(others[config], leftover.look)
    if where == "plant":
        assert _matches(planted, stop), f"{leftover.id} under {config}: {stop.layer} should refuse {planted}"
        assert not later_same["ok"] and not later_other["ok"]
    else:
        assert planted["ok"], f"{leftover.id} under {config}: the planting itself failed: {planted}"
        for later in (later_same, later_other):
            assert _matches(later, stop), f"{leftover.id} under {config}: {stop.layer} should hide {later}"
    check = await breach.sandboxes[config].run("return 1", tool_names=(), call_tool=_echo)
    assert stop.layer in check.stats.isolation


async def _echo(name: str, args: object) -> object:
    return args


def test_the_host_sees_no_ipc_object_either() -> None:
    """The SysV objects planted without seccomp died with the worker's IPC namespace."""
    assert not any(_host_sees_sysv(number, key) for number, key in ((29, KEY), (68, KEY + 1), (64, KEY + 2)))
