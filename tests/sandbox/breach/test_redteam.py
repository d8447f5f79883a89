"""Red-team attempts on the calls the worker's seccomp allowlist does let through (all of them held).

The probes of ``_probes.py`` try what the allowlist refuses; these try the *allowed* calls with
arguments an attacker chooses, as plain CPython in a production worker (every layer required):

- ``mmap`` takes any descriptor: mapping each inherited one would read a file the worker still holds
  (none is a file: every one is a socket, the epoll instance or ``/dev/null``, which cannot be mapped);
- ``madvise`` takes any advice: ``MADV_HWPOISON``/``MADV_SOFT_OFFLINE`` would take a physical page
  out of the machine (they need ``CAP_SYS_ADMIN``, which the worker does not have; a kernel without
  memory-failure injection refuses them as invalid first);
- ``clock_gettime`` takes a process CPU clock id built from any pid: the host's and the template's CPU
  time would be a timing side channel (they have no pid in the worker's namespace);
- ``prlimit64`` and the socket calls are allowed on fixed arguments only (pid 0, the channel's
  descriptors): another pid or descriptor is refused.
"""

from __future__ import annotations

import errno
import os
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from codemode.sandbox import Sandbox, SandboxLimits

pytestmark = pytest.mark.anyio

UNRESTRICTED = "codemode.sandbox.testing.unrestricted"
LIMITS = SandboxLimits(wall_seconds=20.0, cpu_seconds=10.0)

_PROGRAM = """
import ctypes, mmap
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def sc(number, *args):
    result = libc.syscall(number, *args)
    return result if result != -1 else -ctypes.get_errno()
class Spec(ctypes.Structure):
    _fields_ = [("s", ctypes.c_long), ("ns", ctypes.c_long)]
out = {}
mapped = {}
for fd in range(64):
    got = sc(9, 0, 4096, mmap.PROT_READ, mmap.MAP_PRIVATE, fd, 0)
    if got >= 0 or got != -9:  # (EBADF: no such descriptor)
        mapped[str(fd)] = got if got < 0 else "mapped"
out["mmap"] = mapped
page = mmap.mmap(-1, 4096)
address = ctypes.addressof(ctypes.c_char.from_buffer(page))
out["madvise-hwpoison"] = sc(28, address, 4096, 100)
out["madvise-soft-offline"] = sc(28, address, 4096, 101)
for name, pid in (("host", HOST_PID), ("template", TEMPLATE_PID)):
    spec = Spec()
    out[f"cpu-clock-{name}"] = sc(228, ctypes.c_int(((~pid) << 3) | 2), ctypes.byref(spec))
out["prlimit-other"] = sc(302, 1, 7, None, ctypes.byref(Spec()))
out["sendto-devnull"] = sc(44, 0, b"x", 1, 0, None, 0)
out["write-stdout"] = sc(1, 1, b"x", 1)
return out
"""


async def _no_tools(name: str, args: object) -> object:
    raise AssertionError("no tool is declared")


@pytest.fixture(scope="module")
async def outcome() -> AsyncIterator[dict[str, Any]]:
    async with Sandbox(executor=UNRESTRICTED, warm=1, require="all") as sandbox:
        assert sandbox.template_pid is not None
        program = _PROGRAM.replace("HOST_PID", str(os.getpid())).replace(
            "TEMPLATE_PID", str(sandbox.template_pid))
        with anyio.fail_after(60):
            result = await sandbox.run(program, tool_names=(), call_tool=_no_tools, limits=LIMITS)
        assert result.error is None, result.error
        assert isinstance(result.value, dict)
        yield dict(result.value)


async def test_no_inherited_descriptor_can_be_mapped(outcome: dict[str, Any]) -> None:
    assert outcome["mmap"], "the worker holds its channel at least"
    assert set(outcome["mmap"].values()) == {-errno.ENODEV}, outcome["mmap"]


@pytest.mark.parametrize("advice", ["madvise-hwpoison", "madvise-soft-offline"])
async def test_no_page_can_be_taken_out_of_the_machine(outcome: dict[str, Any], advice: str) -> None:
    # EPERM: no CAP_SYS_ADMIN; EINVAL: a kernel without memory-failure injection (checked first)
    assert outcome[advice] in (-errno.EPERM, -errno.EINVAL)


@pytest.mark.parametrize("whose", ["host", "template"])
async def test_no_other_process_cpu_clock_can_be_read(outcome: dict[str, Any], whose: str) -> None:
    assert outcome[f"cpu-clock-{whose}"] == -errno.EINVAL


@pytest.mark.parametrize("attempt", ["prlimit-other", "sendto-devnull", "write-stdout"])
async def test_allowed_calls_refuse_other_targets(outcome: dict[str, Any], attempt: str) -> None:
    assert outcome[attempt] == -errno.EPERM
