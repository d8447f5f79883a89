"""The seccomp allowlist is exactly what it says: the assembled filter, run by a small BPF interpreter.

The filter is classic BPF; these tests execute it instruction by instruction for every x86_64 system
call number (and for the conditional ones, with allowed and refused arguments), so what the kernel
will do with it is checked here in milliseconds, independently of the worker that installs it.
"""

from __future__ import annotations

import struct

import pytest

from codemode.sandbox import _seccomp

SOCKETS = (3, 5, 6)
ALLOW, EPERM, KILL = 0x7FFF0000, 0x00050001, 0x80000000
X86_64, I386 = 0xC000003E, 0x40000003

#: What the worker must never be allowed, whatever else changes in the list (x86_64 numbers).
MUST_REFUSE = {
    "shmget": 29, "shmat": 30, "msgget": 68, "semget": 64, "mq_open": 240, "keyctl": 250, "add_key": 248,
    "request_key": 249, "bpf": 321, "perf_event_open": 298, "userfaultfd": 323, "io_uring_setup": 425,
    "io_uring_enter": 426, "io_uring_register": 427, "process_vm_readv": 310, "process_vm_writev": 311,
    "ptrace": 101, "setns": 308, "unshare": 272, "mount": 165, "umount2": 166, "pivot_root": 155,
    "chroot": 161, "socket": 41, "connect": 42, "accept": 43, "bind": 49, "listen": 50, "socketpair": 53,
    "accept4": 288, "sendmsg": 46, "recvmsg": 47, "sendmmsg": 307, "recvmmsg": 299, "getsockopt": 55,
    "setsockopt": 54, "execve": 59, "execveat": 322, "fork": 57, "vfork": 58, "clone": 56, "clone3": 435,
    "kill": 62, "tkill": 200, "tgkill": 234, "pidfd_open": 434, "pidfd_send_signal": 424,
    "pidfd_getfd": 438, "open": 2, "openat": 257, "openat2": 437, "creat": 85, "unlink": 87, "rename": 82,
    "mkdir": 83, "chmod": 90, "chown": 92, "truncate": 76, "memfd_create": 319, "prctl": 157,
    "seccomp": 317, "landlock_create_ruleset": 444, "setuid": 105, "setresuid": 117, "capset": 126,
    "name_to_handle_at": 303, "open_by_handle_at": 304, "dup": 32, "dup2": 33, "dup3": 292,
    "sethostname": 170, "reboot": 169, "init_module": 175, "kexec_load": 246, "fanotify_init": 300,
    "inotify_init1": 294, "mknod": 133, "uname": 63, "getcwd": 79, "ioctl": 16, "fcntl": 72,
}


def run_filter(program: bytes, nr: int, args: tuple[int, ...] = (), arch: int = X86_64) -> int:
    """Execute the filter on one ``seccomp_data`` (nr, arch, instruction pointer 0, six arguments)."""
    data = struct.pack("<iIQ6Q", nr, arch, 0, *(list(args) + [0] * (6 - len(args))))
    code = [struct.unpack("HBBI", program[i:i + 8]) for i in range(0, len(program), 8)]
    pc, accumulator = 0, 0
    for _ in range(len(code) + 1):  # (forward jumps only: every path ends within len(code) steps)
        op, jt, jf, k = code[pc]
        if op == 0x20:
            accumulator = struct.unpack_from("<I", data, k)[0]
            pc += 1
        elif op in (0x15, 0x35):
            taken = accumulator == k if op == 0x15 else accumulator >= k
            pc += 1 + (jt if taken else jf)
        elif op == 0x06:
            return int(k)
        else:
            raise AssertionError(f"unexpected BPF opcode {op:#x}")
    raise AssertionError("the filter did not return")


@pytest.fixture(scope="module")
def program() -> bytes:
    return _seccomp.program(SOCKETS)


def test_every_listed_call_is_allowed_whatever_its_arguments(program: bytes) -> None:
    """It allows each unconditional call, with any arguments."""
    for name, nr in _seccomp.ALLOWED.items():
        for args in ((), (1, 2, 3), (2**64 - 1,) * 6):
            assert run_filter(program, nr, args) == ALLOW, name


def test_every_other_call_is_refused_with_eperm(program: bytes) -> None:
    """It refuses, with EPERM, every system call number that is not listed (0-511)."""
    listed = set(_seccomp.ALLOWED.values()) | {nr for nr, _, _ in _seccomp.CONDITIONAL.values()}
    for nr in range(512):
        if nr not in listed:
            assert run_filter(program, nr, (3, 0, 0)) == EPERM, nr


def test_the_dangerous_calls_are_refused(program: bytes) -> None:
    """It refuses what the worker must never do: IPC, keys, bpf, perf, userfaultfd, io_uring,
    process_vm, ptrace, namespaces, mounts, sockets, exec, process creation, signals, files."""
    listed = set(_seccomp.ALLOWED) | set(_seccomp.CONDITIONAL)
    assert not listed & set(MUST_REFUSE)
    for name, nr in MUST_REFUSE.items():
        assert run_filter(program, nr, (3, 0, 0, 0, 0, 0)) == EPERM, name


@pytest.mark.parametrize("name", ["sendto", "recvfrom", "write", "read"])
def test_socket_calls_are_allowed_only_on_the_workers_own_sockets(program: bytes, name: str) -> None:
    """It lets the worker use its channel and its event loop's socket pair, and no other descriptor."""
    nr = _seccomp.CONDITIONAL[name][0]
    for fd in SOCKETS:
        assert run_filter(program, nr, (fd, 0, 16)) == ALLOW
    for fd in (0, 1, 2, 4, 7, 1023):
        assert run_filter(program, nr, (fd, 0, 16)) == EPERM, fd


def test_prlimit_is_allowed_on_the_worker_itself_only(program: bytes) -> None:
    """It allows prlimit64 on the calling process (pid 0), never on another one."""
    prlimit = _seccomp.CONDITIONAL["prlimit64"][0]
    assert run_filter(program, prlimit, (0, 9, 1, 0)) == ALLOW
    for pid in (1, 1234, 2**31 - 1):
        assert run_filter(program, prlimit, (pid, 9, 1, 0)) == EPERM


def test_other_system_call_tables_are_refused_or_killed(program: bytes) -> None:
    """It refuses the x32 table and kills a call made through another architecture's table."""
    assert run_filter(program, 0x40000000 | 39) == EPERM  # getpid through x32
    assert run_filter(program, 20, arch=I386) == KILL  # getpid through int 0x80


def test_the_allowlist_is_small() -> None:
    """It lists few calls (the worker's whole need), each named once."""
    names = [*_seccomp.ALLOWED, *_seccomp.CONDITIONAL]
    assert len(names) == len(set(names)) <= 32
