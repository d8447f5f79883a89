"""The worker's seccomp filter: an allowlist of exactly the system calls a started worker makes (x86_64).

Everything not listed fails with ``EPERM``; a call from another architecture's table (the x32 ABI, or
``int 0x80``) kills the process. The list was found by tracing workers (``strace -f`` over the whole
test suite and the escape suite) from the moment the filter is installed, and by reading the code
paths a worker runs: its event loop (``epoll``, ``pselect6`` while it waits between runs), the
protocol channel, memory management, the per-run rlimits and CPU accounting, and a few calls the C
library makes on its own (time, randomness for ``uuid4``). A few calls are allowed only with
particular arguments:

- the socket calls (``sendto``, ``recvfrom``, and ``write``/``read`` on the same descriptors) only on the
  protocol channel and on the event loop's own socket pair, whose descriptor numbers are built into the
  filter when it is installed;
- ``prlimit64`` only on the calling process itself (pid 0), so a worker can lower its limits, never
  touch another process's.

Refused in any case (not in the list): process creation and exec, every other socket call, signals,
``ioctl`` and ``fcntl`` (the descriptors' modes are set before the filter goes on),
``ptrace`` and ``process_vm_*``, SysV and POSIX IPC, ``keyctl``, ``bpf``, ``perf_event_open``,
``userfaultfd``, ``io_uring_*``, namespace changes, mounts, ``chroot``/``pivot_root``, and every call
that opens, creates, changes or removes a file. A worker whose own code needs a call that is not
listed sees ``PermissionError``; it exits with :data:`codemode.sandbox.worker.EXIT_REFUSED` and the run
says so, so a list that is too tight shows up as a clear error, not as an odd failure.

The filter is classic BPF assembled here (no libseccomp). Allowed-without-conditions calls are
cached by the kernel per syscall number, so they cost nothing after the first; the conditional ones
come first in the program, so they take only a handful of instructions.
"""

from __future__ import annotations

import ctypes
import functools
import os
import struct
import sys
from collections.abc import Iterable, Mapping
from typing import Final

__all__ = (
    "ALLOWED",
    "CONDITIONAL",
    "available",
    "install",
    "program",
)

#: System calls allowed whatever their arguments (x86_64 numbers; the names are for the reader).
ALLOWED: Final[Mapping[str, int]] = {
    # the event loop and the wait for the next run
    "epoll_wait": 232, "epoll_ctl": 233, "pselect6": 270,
    # memory (the allocator; RLIMIT_AS bounds it)
    "brk": 12, "mmap": 9, "munmap": 11, "mremap": 25, "madvise": 28,
    # CPU accounting of each run
    "getrusage": 98,
    # identity the runtime asks for (asyncio checks its loop's pid on every call)
    "getpid": 39,
    # time, sleeping and randomness (the vDSO usually answers the clocks without a system call)
    "clock_gettime": 228, "gettimeofday": 96, "clock_nanosleep": 230, "nanosleep": 35, "getrandom": 318,
    # ending the process; returning from a signal handler; restarting a call a signal interrupted
    "exit_group": 231, "rt_sigreturn": 15, "restart_syscall": 219,
}

#: System calls allowed only when one argument takes one of a few values: name -> (number, argument
#: index, allowed values). ``None`` as the values means "the worker's socket descriptors" (filled in
#: by :func:`program`).
CONDITIONAL: Final[Mapping[str, tuple[int, int, tuple[int, ...] | None]]] = {
    "sendto": (44, 0, None),
    "recvfrom": (45, 0, None),
    "write": (1, 0, None),  # (the same sockets by another name: no new reach)
    "read": (0, 0, None),
    "prlimit64": (302, 0, (0,)),
}

_AUDIT_ARCH_X86_64: Final = 0xC000003E
_X32_SYSCALL_BIT: Final = 0x40000000
_RET_ALLOW: Final = 0x7FFF0000
_RET_EPERM: Final = 0x00050000 | 1  # SECCOMP_RET_ERRNO | EPERM
_RET_KILL_PROCESS: Final = 0x80000000
_LD_ABS: Final = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ: Final = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE: Final = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_RET: Final = 0x06  # BPF_RET | BPF_K
_ARCH_OFFSET: Final = 4
_NR_OFFSET: Final = 0
_ARGS_OFFSET: Final = 16  # seccomp_data.args[0]; each argument is 8 bytes, its low word first
_PR_SET_SECCOMP: Final = 22
_SECCOMP_MODE_FILTER: Final = 2


def available() -> bool:
    """True where this filter applies (Linux on x86_64); elsewhere the layer is reported missing."""
    return sys.platform == "linux" and os.uname().machine == "x86_64"


@functools.lru_cache(maxsize=4)
def program(socket_fds: tuple[int, ...]) -> bytes:
    """The filter, as ``struct sock_filter`` records, for a worker whose sockets are ``socket_fds``.

    Cached: the template builds it once for the descriptor numbers every worker gets, so a worker
    only looks it up.
    """
    code: list[tuple[int, int | str, int | str, int]] = []

    def emit(op: int, k: int, jt: int | str = 0, jf: int | str = 0) -> None:
        code.append((op, jt, jf, k))

    emit(_LD_ABS, _ARCH_OFFSET)
    emit(_JEQ, _AUDIT_ARCH_X86_64, 0, "kill")
    emit(_LD_ABS, _NR_OFFSET)
    emit(_JGE, _X32_SYSCALL_BIT, "deny", 0)
    for name, (number, _, _) in CONDITIONAL.items():
        emit(_JEQ, number, name, 0)
    for number in ALLOWED.values():
        emit(_JEQ, number, "allow", 0)
    labels = {"deny": len(code)}
    emit(_RET, _RET_EPERM)
    labels["allow"] = len(code)
    emit(_RET, _RET_ALLOW)
    labels["kill"] = len(code)
    emit(_RET, _RET_KILL_PROCESS)
    for name, (_, index, values) in CONDITIONAL.items():  # (jumps go forward only: each has its own)
        labels[name] = len(code)
        emit(_LD_ABS, _ARGS_OFFSET + 8 * index)  # the low word: what the kernel reads of an int
        for value in (socket_fds if values is None else values):
            emit(_JEQ, value, f"{name}:allow", 0)
        emit(_RET, _RET_EPERM)
        labels[f"{name}:allow"] = len(code)
        emit(_RET, _RET_ALLOW)
    return _assemble(code, labels)


def _assemble(code: Iterable[tuple[int, int | str, int | str, int]], labels: Mapping[str, int]) -> bytes:
    out = bytearray()
    for index, (op, jt, jf, k) in enumerate(code):
        offsets = [labels[j] - index - 1 if isinstance(j, str) else j for j in (jt, jf)]
        if not all(0 <= offset <= 255 for offset in offsets):
            raise ValueError("seccomp filter jump out of range")  # a list far longer than this one
        out += struct.pack("HBBI", op, offsets[0], offsets[1], k)
    return bytes(out)


class _SockFprog(ctypes.Structure):
    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_void_p))


def install(libc: ctypes.CDLL, socket_fds: tuple[int, ...]) -> bool:
    """Install the filter on the calling process (needs ``no_new_privs``); False where it cannot."""
    if not available():
        return False
    code = program(socket_fds)
    buffer = ctypes.create_string_buffer(code, len(code))
    fprog = _SockFprog(len(code) // 8, ctypes.addressof(buffer))
    return int(libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0)) == 0
