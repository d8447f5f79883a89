"""The operating-system layers a worker puts around itself before it runs a program (Linux).

Each function applies one layer inside the freshly forked worker and returns whether it took effect,
so the worker can report exactly which layers are active (``RunResult.stats.isolation``). The order
matters and is fixed by :func:`apply_layers`: namespaces need root, so they come before the drop to
an unprivileged uid; the parent-death signal must be set after the uid change (which clears it); the
seccomp filter comes last, after the event loop has created its own descriptors.

Layers (names as reported):

- ``process``: a separate process in its own session and process group (the host kills the group).
- ``empty-env``: no environment variables; ``tmpdir``: cwd is an empty directory it cannot write.
- ``closed-fds``: every inherited descriptor closed except the protocol channel (fd 3);
  stdin/stdout/stderr on ``/dev/null``.
- ``rlimits``: no new processes, no file writes, few descriptors, no core dumps (CPU and address space
  are set per run).
- ``netns``: a new, empty network namespace (no interfaces up, not even loopback).
- ``uid``: an unprivileged uid/gid of its own (unique per worker), no supplementary groups.
- ``no-new-privs``: ``PR_SET_NO_NEW_PRIVS``.
- ``seccomp``: a syscall filter refusing (EPERM) process creation, exec, sockets, signals to other
  processes, ptrace, namespace changes and every way to create, write or rename a file.
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import struct
import sys
from collections.abc import Iterable
from typing import Final

__all__ = (
    "CHANNEL_FD",
    "OPTIONAL_LAYERS",
    "apply_layers",
    "close_inherited_fds",
    "install_seccomp",
    "set_run_limits",
)

CHANNEL_FD: Final = 3
OPTIONAL_LAYERS: Final = frozenset({"netns", "uid", "no-new-privs", "seccomp"})
_NOFILE: Final = 16
_UID_BASE: Final = 200_000

_CLONE_NEWNET: Final = 0x40000000
_CLONE_NEWUSER: Final = 0x10000000
_PR_SET_PDEATHSIG: Final = 1
_PR_SET_NO_NEW_PRIVS: Final = 38
_PR_SET_SECCOMP: Final = 22
_SECCOMP_MODE_FILTER: Final = 2

_libc: ctypes.CDLL | None = None


def _lib() -> ctypes.CDLL:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    return _libc


def _prctl(option: int, arg: int = 0) -> bool:
    return int(_lib().prctl(option, arg, 0, 0, 0)) == 0


def close_inherited_fds(channel: int) -> None:
    """Move ``channel`` to fd 3, point 0-2 at /dev/null and close every other descriptor."""
    if channel != CHANNEL_FD:
        os.dup2(channel, CHANNEL_FD)
        os.close(channel)
    os.set_inheritable(CHANNEL_FD, False)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    if null > CHANNEL_FD:
        os.close(null)
    os.closerange(CHANNEL_FD + 1, 1 << 16)


def _netns() -> bool:
    """A new network namespace; without root, inside a new user namespace (where one is allowed)."""
    flags = _CLONE_NEWNET if os.geteuid() == 0 else _CLONE_NEWUSER | _CLONE_NEWNET
    return int(_lib().unshare(flags)) == 0


def _drop_uid() -> bool:
    if os.geteuid() != 0:
        return False
    uid = _UID_BASE + os.getpid()
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    return os.geteuid() == uid and os.getegid() == uid


def _base_rlimits() -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past RLIMIT_FSIZE fails instead of killing
    for which, value in ((resource.RLIMIT_NPROC, 0), (resource.RLIMIT_FSIZE, 0),
                         (resource.RLIMIT_NOFILE, _NOFILE), (resource.RLIMIT_CORE, 0)):
        resource.setrlimit(which, (value, value))


def set_run_limits(cpu_seconds: float, memory_bytes: int, *, keep_hard: bool) -> None:
    """Apply one run's CPU and address-space budgets.

    The CPU budget counts from now (the soft limit is the time used so far plus the budget); past it
    the kernel sends SIGXCPU, which kills. With ``keep_hard`` (persistent sessions, whose later runs
    need the soft limits moved again) the hard limits are left alone; otherwise hard = soft (+1 s CPU).
    """
    usage = resource.getrusage(resource.RUSAGE_SELF)
    used = usage.ru_utime + usage.ru_stime
    soft_cpu = max(1, int(used + cpu_seconds + 0.999))
    _, hard_cpu = resource.getrlimit(resource.RLIMIT_CPU)
    _, hard_as = resource.getrlimit(resource.RLIMIT_AS)
    if keep_hard:
        resource.setrlimit(resource.RLIMIT_CPU, (_capped(soft_cpu, hard_cpu), hard_cpu))
        resource.setrlimit(resource.RLIMIT_AS, (_capped(memory_bytes, hard_as), hard_as))
    else:
        resource.setrlimit(resource.RLIMIT_CPU, (soft_cpu, _capped(soft_cpu + 1, hard_cpu)))
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, _capped(memory_bytes, hard_as)))


def _capped(value: int, hard: int) -> int:
    return value if hard == resource.RLIM_INFINITY else min(value, hard)


# --- seccomp -------------------------------------------------------------------------------------

_AUDIT_ARCH_X86_64: Final = 0xC000003E
_RET_ALLOW: Final = 0x7FFF0000
_RET_EPERM: Final = 0x00050000 | 1
_RET_KILL: Final = 0x80000000
_LD_ABS: Final = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ: Final = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE: Final = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_JSET: Final = 0x45  # BPF_JMP | BPF_JSET | BPF_K
_RET: Final = 0x06  # BPF_RET | BPF_K

#: x86_64 syscalls refused with EPERM (by number; name kept for the reader).
_DENIED: Final = {
    "clone": 56, "fork": 57, "vfork": 58, "execve": 59, "clone3": 435, "execveat": 322,
    "socket": 41, "connect": 42, "accept": 43, "bind": 49, "listen": 50, "socketpair": 53,
    "accept4": 288, "kill": 62, "tkill": 200, "tgkill": 234, "rt_sigqueueinfo": 129,
    "rt_tgsigqueueinfo": 297, "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311,
    "pidfd_open": 434, "pidfd_send_signal": 424, "pidfd_getfd": 438, "creat": 85, "openat2": 437,
    "truncate": 76, "rename": 82, "mkdir": 83, "rmdir": 84, "link": 86, "unlink": 87, "symlink": 88,
    "chmod": 90, "fchmod": 91, "chown": 92, "fchown": 93, "lchown": 94, "mknod": 133, "mkdirat": 258,
    "mknodat": 259, "fchownat": 260, "unlinkat": 263, "renameat": 264, "linkat": 265,
    "symlinkat": 266, "fchmodat": 268, "renameat2": 316, "memfd_create": 319, "chroot": 161,
    "mount": 165, "umount2": 166, "pivot_root": 155, "unshare": 272, "setns": 308, "prctl": 157,
    "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "bpf": 321,
    "perf_event_open": 298, "userfaultfd": 323, "add_key": 248, "request_key": 249, "keyctl": 250,
    "name_to_handle_at": 303, "open_by_handle_at": 304,
}
_OPEN: Final = 2
_OPENAT: Final = 257
#: open flags that write or create: O_WRONLY | O_RDWR | O_CREAT | O_TRUNC | O_APPEND | __O_TMPFILE.
_WRITE_FLAGS: Final = 0o1 | 0o2 | 0o100 | 0o1000 | 0o2000 | 0o20000000


def _seccomp_program() -> bytes:
    """Assemble the classic-BPF filter; jump targets are labels resolved to (forward) offsets."""
    code: list[tuple[int, str | int, str | int, int]] = []

    def emit(op: int, k: int, jt: str | int = 0, jf: str | int = 0) -> None:
        code.append((op, jt, jf, k))

    emit(_LD_ABS, 4)  # seccomp_data.arch
    emit(_JEQ, _AUDIT_ARCH_X86_64, 0, "kill")
    emit(_LD_ABS, 0)  # seccomp_data.nr
    emit(_JGE, 0x40000000, "deny", 0)  # the x32 ABI
    for number in sorted(_DENIED.values()):
        emit(_JEQ, number, "deny", 0)
    emit(_JEQ, _OPEN, "open", 0)
    emit(_JEQ, _OPENAT, "openat", 0)
    emit(_RET, _RET_ALLOW)
    labels = {"deny": len(code)}
    emit(_RET, _RET_EPERM)
    labels["kill"] = len(code)
    emit(_RET, _RET_KILL)
    labels["open"] = len(code)
    emit(_LD_ABS, 16 + 8 * 1)  # args[1] (flags of open), low word
    emit(_JSET, _WRITE_FLAGS, 0, 1)
    emit(_RET, _RET_EPERM)
    emit(_RET, _RET_ALLOW)
    labels["openat"] = len(code)
    emit(_LD_ABS, 16 + 8 * 2)  # args[2] (flags of openat), low word
    emit(_JSET, _WRITE_FLAGS, 0, 1)
    emit(_RET, _RET_EPERM)
    emit(_RET, _RET_ALLOW)

    out = bytearray()
    for index, (op, jt, jf, k) in enumerate(code):
        offsets = [labels[j] - index - 1 if isinstance(j, str) else j for j in (jt, jf)]
        out += struct.pack("HBBI", op, offsets[0], offsets[1], k)
    return bytes(out)


class _SockFprog(ctypes.Structure):
    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_void_p))


def install_seccomp() -> bool:
    """Install the filter (needs no_new_privs); False when the platform cannot."""
    if sys.platform != "linux" or os.uname().machine != "x86_64":
        return False
    program = _seccomp_program()
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.addressof(buffer))
    return int(_lib().prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0)) == 0


def apply_layers(wanted: Iterable[str], parent_pid: int) -> list[str]:
    """Apply the base layers and every wanted optional layer that the platform allows, in order.

    Called in the worker after :func:`close_inherited_fds` and before the event loop exists. Returns
    the names of the layers that took effect (``seccomp`` is installed later by the caller, after the
    event loop, via :func:`install_seccomp`).
    """
    want = set(wanted)
    active = ["process", "empty-env", "tmpdir", "closed-fds"]
    if "netns" in want and _try(_netns):
        active.append("netns")
    if "uid" in want and _try(_drop_uid):
        active.append("uid")
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent_pid:  # the template died before the death signal was armed
        os._exit(70)
    _base_rlimits()
    active.append("rlimits")
    if "no-new-privs" in want and _prctl(_PR_SET_NO_NEW_PRIVS, 1):
        active.append("no-new-privs")
    return active


def _try(layer: object) -> bool:
    try:
        return bool(layer())  # type: ignore[operator]
    except OSError:
        return False
