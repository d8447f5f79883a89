"""The operating-system layers around a worker (Linux): what each stops, and the order they go on in.

Two kinds of layers. The template sets up the *shared* ones once, before it forks anything, because
every worker inherits them for free and sharing them is safe (:func:`isolate_template`). Each worker
sets up its *own* right after the fork (:func:`apply_layers`), because they hold state a later run
must never see. Each function returns which layers took effect, and a worker reports exactly those in
its ``ready`` frame (``RunResult.stats.isolation``); where one cannot be had (not root, an old kernel,
another OS) it is simply missing from that list, and a caller can require it (``Sandbox(require=...)``).

Layers, as reported, in the order they are listed:

- ``process``: a separate process in its own session and process group (the host kills the group).
- ``empty-env``: no environment variables.
- ``tmpdir``: the working directory is empty and unwritable (with ``mount-ns``, the empty root itself;
  without it, a fresh directory of the worker's own).
- ``closed-fds``: every inherited descriptor closed except the protocol channel (fd 3); stdin, stdout
  and stderr on ``/dev/null`` (a descriptor the template opened before it gave up its file system).
- ``mount-ns`` (template): a private mount namespace whose root is an empty, read-only tmpfs; the host's
  file system is detached, so there is no ``/etc``, ``/proc``, ``/sys``, ``/dev``, home, project tree
  or workspace to reach, and nothing can be imported that the template did not load before.
- ``pid-ns`` (template): workers live in a PID namespace of the template's making (its first child,
  a do-nothing holder, is that namespace's init); the host and the template have no pid in it.
- ``ipc-ns``: a private IPC namespace: SysV shared memory, message queues, semaphores and POSIX message
  queues the worker makes die with it, and it sees none of anybody else's.
- ``uts-ns``: a private host name (``sandbox``), so the machine's name does not leak.
- ``netns``: a network namespace with no interface up (not even loopback), never the host's. A worker
  under the seccomp allowlist (which refuses every call that makes a socket) stays in one the template
  made once for all its workers: unsharing a namespace per worker costs about a millisecond (and its
  teardown more), and with no way to make a socket a worker can reach nothing through it, not even a
  sibling (abstract Unix names live in the namespace, and binding or connecting one needs a socket).
  The template makes it only where a probe child could install the filter; a worker without seccomp
  unshares a namespace of its own, and a worker in the shared one whose filter did not go on exits
  before ``ready`` (its start fails: it never runs a program with sockets in a shared namespace).
- ``uid``: an unprivileged uid/gid of its own (unique per worker: it follows the worker's pid as the
  host sees it), no supplementary groups, no capabilities.
- ``rlimits``: no new processes, no file writes, 16 descriptors, no core dumps, no locked memory or
  message-queue bytes; per run, CPU seconds and address space. Every hard limit equals its soft limit,
  and a worker without ``CAP_SYS_RESOURCE`` can lower a limit, never raise one. A worker left as root
  (no ``uid`` layer) first drops every capability; the layer is reported once the worker holds none.
  Persistent sessions: see :mod:`codemode.sandbox.session` (the host grants each run's room where it
  may; where it may not, a session's CPU hard limit stays open and its runs do not claim this layer).
- ``no-new-privs``: ``PR_SET_NO_NEW_PRIVS`` (no setuid binary or file capability can ever add rights).
- ``landlock``: the kernel's Landlock ruleset granting no path access at all, and, where the kernel has
  them, no TCP bind/connect, no abstract Unix sockets or signals outside the worker (:mod:`._landlock`).
- ``seccomp``: a system-call allowlist, default deny (:mod:`._seccomp`; x86_64 only).

The order is fixed: namespaces and the root's work come first (they need root), then the drop to an
unprivileged uid, the parent-death signal (the uid change clears it), rlimits, ``no_new_privs``,
Landlock, and last, once the event loop has made its descriptors, seccomp.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import math
import os
import resource
import signal
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final, NoReturn

from . import _landlock, _seccomp
from .errors import SandboxIsolationError
from .results import ISOLATION_LAYERS

__all__ = (
    "ALL_LAYERS",
    "BASE_LAYERS",
    "CHANNEL_FD",
    "LAYER_NEEDS",
    "OPTIONAL_LAYERS",
    "SHARED_LAYERS",
    "TEMPLATE_LAYERS",
    "TemplateIsolation",
    "apply_layers",
    "can_grant_limits",
    "check_required",
    "close_inherited_fds",
    "grant_run_limits",
    "install_seccomp",
    "isolate_template",
    "keeps_shared_netns",
    "prepare_worker_filters",
    "set_run_limits",
)

CHANNEL_FD: Final = 3
#: Every layer name in reporting order.
ALL_LAYERS: Final = ISOLATION_LAYERS
#: Layers every worker has on any POSIX system (``rlimits`` only when the worker is unprivileged).
BASE_LAYERS: Final = frozenset({"process", "empty-env", "tmpdir", "closed-fds", "rlimits"})
#: Layers a caller may switch off (``Sandbox(layers=...)``); all are attempted by default.
OPTIONAL_LAYERS: Final = frozenset(ALL_LAYERS) - BASE_LAYERS
#: Optional layers the template sets up once for all its workers.
TEMPLATE_LAYERS: Final = frozenset({"mount-ns", "pid-ns"})
#: The optional layers the template is told about: its own, and ``netns`` (it makes the shared network
#: namespace that workers under seccomp stay in).
SHARED_LAYERS: Final = TEMPLATE_LAYERS | {"netns"}

#: What each optional layer needs, for the error that names a required layer a worker came up without.
LAYER_NEEDS: Final = {
    "mount-ns": "root (CAP_SYS_ADMIN, in a user namespace too) and mount namespaces",
    "pid-ns": "root (CAP_SYS_ADMIN, in a user namespace too) and PID namespaces",
    "ipc-ns": "IPC namespaces (as root, or unprivileged user namespaces)",
    "uts-ns": "UTS namespaces (as root, or unprivileged user namespaces)",
    "netns": "network namespaces (as root, or unprivileged user namespaces)",
    "uid": "root, to switch each worker to a uid of its own",
    "rlimits": "a worker without CAP_SYS_RESOURCE (the uid layer, or a root worker that dropped it)",
    "no-new-privs": "Linux 3.5 or later",
    "landlock": "Linux 5.13 or later with Landlock enabled (lsm=...,landlock) and no-new-privs",
    "seccomp": "Linux on x86_64, and no-new-privs",
}

_LINUX: Final = sys.platform == "linux"
_NOFILE: Final = 16
_UID_BASE: Final = 200_000
_HOLDER_UID: Final = _UID_BASE - 1
_HOSTNAME: Final = b"sandbox"

_CLONE_NEWNS: Final = 0x00020000
_CLONE_NEWUTS: Final = 0x04000000
_CLONE_NEWIPC: Final = 0x08000000
_CLONE_NEWUSER: Final = 0x10000000
_CLONE_NEWPID: Final = 0x20000000
_CLONE_NEWNET: Final = 0x40000000
_NAMESPACE_FLAGS: Final = {"ipc-ns": _CLONE_NEWIPC, "uts-ns": _CLONE_NEWUTS, "netns": _CLONE_NEWNET}
_MS_RDONLY: Final = 0x1
_MS_NOSUID: Final = 0x2
_MS_NODEV: Final = 0x4
_MS_NOEXEC: Final = 0x8
_MS_REC: Final = 0x4000
_MS_PRIVATE: Final = 0x40000
_MNT_DETACH: Final = 0x2
_SYS_PIVOT_ROOT: Final = 155
_PR_SET_PDEATHSIG: Final = 1
_PR_CAPBSET_DROP: Final = 24
_PR_SET_NO_NEW_PRIVS: Final = 38
_CAPABILITY_VERSION_3: Final = 0x20080522

#: Limits fixed for the worker's whole life (hard = soft = this value); every other limit keeps its
#: current soft value as its hard limit, except CPU time and address space, which each run sets.
_FIXED_LIMITS: Final = {
    "RLIMIT_NPROC": 0, "RLIMIT_FSIZE": 0, "RLIMIT_NOFILE": _NOFILE, "RLIMIT_CORE": 0,
    "RLIMIT_MEMLOCK": 0, "RLIMIT_MSGQUEUE": 0, "RLIMIT_NICE": 0, "RLIMIT_RTPRIO": 0, "RLIMIT_LOCKS": 0,
}
_PER_RUN_LIMITS: Final = ("RLIMIT_CPU", "RLIMIT_AS")

_libc: ctypes.CDLL | None = None


def _lib() -> ctypes.CDLL:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    return _libc


def _check(result: int, what: str) -> None:
    if result != 0:
        number = ctypes.get_errno()
        raise OSError(number, f"{what}: {os.strerror(number)}")


def _prctl(option: int, arg: int = 0) -> bool:
    return int(_lib().prctl(option, arg, 0, 0, 0)) == 0


def check_required(required: Iterable[str], layers: Iterable[str]) -> None:
    """Raise :class:`SandboxIsolationError` naming every required layer missing from ``layers``."""
    have = set(layers)
    missing = tuple(layer for layer in ALL_LAYERS if layer in set(required) and layer not in have)
    if missing:
        needs = "; ".join(f"{layer} needs {LAYER_NEEDS[layer]}" if layer in LAYER_NEEDS else layer
                          for layer in missing)
        raise SandboxIsolationError(
            f"a worker came up without the required isolation layer(s) {', '.join(missing)} ({needs}); "
            "run where they are available, or leave them out of Sandbox(require=...)", missing)


# --- the template's shared layers -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TemplateIsolation:
    """What the template set up for all its workers.

    ``layers`` are the template-level layers that took effect; ``devnull`` is a descriptor on
    ``/dev/null`` opened before the file system went away (the workers' stdio); ``holder`` is the pid
    of the PID namespace's init, if there is one (its death ends every worker: the template then exits).
    """

    layers: tuple[str, ...]
    devnull: int
    holder: int | None = None
    #: Whether the host may raise a worker's hard limits (it holds ``CAP_SYS_RESOURCE``, as the
    #: template does: same credentials); asked before the file system (and /proc) went away.
    host_grants: bool = False
    #: Whether the template is in a network namespace of its own with no interface up, which a worker
    #: under seccomp keeps instead of unsharing one (see ``netns`` in the module docstring).
    shared_netns: bool = False

    @property
    def empty_root(self) -> bool:
        """True when workers start in the empty root (no per-worker directory is needed)."""
        return "mount-ns" in self.layers

    @property
    def pid_namespace(self) -> bool:
        """True when workers are forked into the template's PID namespace."""
        return "pid-ns" in self.layers


def isolate_template(wanted: Iterable[str]) -> TemplateIsolation:
    """Enter the shared layers: an empty read-only root, a network namespace with no interface up,
    then a PID namespace with its holder.

    Called once by the template after it imported everything a worker will ever need (nothing can be
    imported afterwards) and before its first fork. Each layer needs root (``CAP_SYS_ADMIN``);
    without it, or if the kernel refuses, the layer is skipped and reported missing.
    """
    want = set(wanted)
    devnull = os.open(os.devnull, os.O_RDWR)
    grants = can_grant_limits()
    layers: list[str] = []
    privileged = _LINUX and os.geteuid() == 0
    if "mount-ns" in want and privileged and _try(_empty_root):
        layers.append("mount-ns")
    shared_netns = ("netns" in want and privileged and _seccomp_works()
                    and int(_lib().unshare(_CLONE_NEWNET)) == 0)
    holder = _pid_namespace() if "pid-ns" in want and privileged else None
    if holder is not None:
        layers.append("pid-ns")
    return TemplateIsolation(tuple(layers), devnull, holder, grants, shared_netns)


def _seccomp_works() -> bool:
    """Whether a worker here can install the seccomp allowlist: a child process tries (and exits).

    The shared network namespace is made only then, so that where the filter cannot go on (another
    architecture, a kernel without it) every worker unshares a namespace of its own as before.
    """
    if not _seccomp.available():
        return False
    pid = os.fork()
    if pid == 0:
        try:
            ok = _prctl(_PR_SET_NO_NEW_PRIVS, 1) and install_seccomp(_USUAL_SOCKETS)
            os._exit(0 if ok else 1)
        finally:
            os._exit(1)
    try:
        _, status = os.waitpid(pid, 0)
    except OSError:
        return False
    return os.waitstatus_to_exitcode(status) == 0


def _empty_root() -> bool:
    """Pivot into an empty, read-only tmpfs in a private mount namespace; drop the old root.

    The tmpfs is mounted over an existing directory (the temp directory) inside the new namespace
    only, so nothing is created on the host's file system and nothing outlives the template.
    """
    lib = _lib()
    _check(lib.unshare(_CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    _check(lib.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None), "making / private")
    base = os.fsencode(tempfile.gettempdir())
    flags = _MS_RDONLY | _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
    _check(lib.mount(b"codemode", base, b"tmpfs", flags, b"size=4k,nr_inodes=2,mode=0555"),
           "mounting the empty root")
    try:
        os.chdir(base)
        _check(lib.syscall(_SYS_PIVOT_ROOT, b".", b"."), "pivot_root")
    except OSError:
        os.chdir("/")
        lib.umount2(base, _MNT_DETACH)  # (the fallback's per-worker directories go there)
        raise
    _check(lib.umount2(b".", _MNT_DETACH), "detaching the old root")
    os.chdir("/")
    return os.listdir("/") == []


def _pid_namespace() -> int | None:
    """Make the template's children live in a new PID namespace; fork its init (the holder)."""
    if int(_lib().unshare(_CLONE_NEWPID)) != 0:
        return None
    pid = os.fork()  # the first child is the namespace's init
    if pid == 0:
        _hold()
    return pid


def _hold() -> NoReturn:
    """The PID namespace's init: owns nothing, reaps what is reparented to it, dies with the template.

    When it dies the kernel kills every process in the namespace, so it holds no descriptor, runs
    as an unprivileged uid of its own and only waits for signals.
    """
    try:
        os.closerange(3, 1 << 16)
        signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # orphans are reaped by the kernel
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        with contextlib.suppress(OSError):  # (in a user namespace that maps only root, it stays root)
            os.setgroups([])
            os.setresgid(_HOLDER_UID, _HOLDER_UID, _HOLDER_UID)
            os.setresuid(_HOLDER_UID, _HOLDER_UID, _HOLDER_UID)
        _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        _prctl(_PR_SET_NO_NEW_PRIVS, 1)
        if os.getppid() != 0:  # (the template lives outside: its pid is 0 in here) it already died
            os._exit(0)
        while True:
            signal.pause()
    finally:
        os._exit(0)


# --- the worker's own layers ------------------------------------------------------------------------


def close_inherited_fds(channel: int, devnull: int) -> None:
    """Point 0-2 at ``devnull``, move ``channel`` to fd 3 and close every other descriptor."""
    for fd in (0, 1, 2):
        if fd != devnull:
            os.dup2(devnull, fd)
    if channel != CHANNEL_FD:
        os.dup2(channel, CHANNEL_FD)
        os.close(channel)
    os.set_inheritable(CHANNEL_FD, False)
    os.closerange(CHANNEL_FD + 1, 1 << 16)


def apply_layers(wanted: Iterable[str], *, parent_pid: int, template: Iterable[str],
                 host_pid: int, shared_netns: bool = False) -> list[str]:
    """Apply every base layer and every wanted optional layer the platform allows, in order.

    Called in the worker after :func:`close_inherited_fds` and before the event loop exists.
    ``parent_pid`` is what ``getppid()`` must answer while the template lives (0 inside its PID
    namespace); ``template`` the layers the template set up; ``host_pid`` the worker's pid as the
    host sees it (its uid follows it). Returns the layers that took effect, in reporting order;
    ``seccomp`` is installed later by the caller (:func:`install_seccomp`), after the event loop.
    With ``shared_netns`` (the template's namespace, see :func:`keeps_shared_netns`) the worker keeps
    it and ``netns`` is in the list; should seccomp then not go on, the caller exits.
    """
    want = set(wanted)
    active = {"process", "empty-env", "tmpdir", "closed-fds", *template}
    keep = shared_netns and keeps_shared_netns(want)
    if keep:
        active.add("netns")
    active |= _namespaces([name for name in _NAMESPACE_FLAGS
                           if name in want and not (keep and name == "netns")])
    if "uts-ns" in active and int(_lib().sethostname(_HOSTNAME, len(_HOSTNAME))) != 0:
        active.discard("uts-ns")
    if "uid" in want and _try(lambda: _drop_uid(host_pid)):
        active.add("uid")
    if _LINUX:
        _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent_pid:  # the template died before the death signal was armed
        os._exit(70)
    _fixed_rlimits()
    if os.geteuid() != 0 or (_LINUX and _drop_capabilities()):  # (CAP_SYS_RESOURCE could raise them)
        active.add("rlimits")
    if "no-new-privs" in want and _LINUX and _prctl(_PR_SET_NO_NEW_PRIVS, 1):
        active.add("no-new-privs")
        if "landlock" in want and _landlock.restrict(_lib()):
            active.add("landlock")
    return [layer for layer in ALL_LAYERS if layer in active]


def keeps_shared_netns(wanted: Iterable[str]) -> bool:
    """Whether a worker attempting ``wanted`` stays in the template's network namespace: only when it
    wants ``netns`` and will run under the seccomp allowlist (which needs ``no-new-privs``)."""
    want = set(wanted)
    return {"netns", "seccomp", "no-new-privs"} <= want and _seccomp.available()


def _namespaces(names: list[str]) -> set[str]:
    """Unshare the wanted per-worker namespaces (in one call); without root, inside a user namespace."""
    if not names or not _LINUX:
        return set()
    flags = 0
    for name in names:
        flags |= _NAMESPACE_FLAGS[name]
    if os.geteuid() != 0:
        return set(names) if int(_lib().unshare(flags | _CLONE_NEWUSER)) == 0 else set()
    if int(_lib().unshare(flags)) == 0:
        return set(names)
    return {name for name in names if int(_lib().unshare(_NAMESPACE_FLAGS[name])) == 0}


def _drop_uid(host_pid: int) -> bool:
    if os.geteuid() != 0:
        return False
    uid = _UID_BASE + host_pid
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    return os.geteuid() == uid and os.getegid() == uid


class _CapHeader(ctypes.Structure):
    _fields_ = (("version", ctypes.c_uint32), ("pid", ctypes.c_int))


class _CapData(ctypes.Structure):
    _fields_ = (("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32))


def _drop_capabilities() -> bool:
    """A worker left as root (no ``uid`` layer, or a user namespace mapping only root) gives up every
    capability, bounding set included, so root's uid alone can change nothing the layers set."""
    lib = _lib()
    for capability in range(64):  # (past the kernel's last capability the call fails: harmless)
        lib.prctl(_PR_CAPBSET_DROP, capability, 0, 0, 0)
    header = _CapHeader(_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    return int(lib.capset(ctypes.byref(header), data)) == 0


#: Every limit but the per-run ones, as (name, resource number): listed once, in the template.
_LIFE_LIMITS: Final = tuple((name, getattr(resource, name)) for name in dir(resource)
                            if name.startswith("RLIMIT_") and name not in _PER_RUN_LIMITS)


def _fixed_rlimits() -> None:
    """Hard = soft for every limit; the fixed ones at their values (CPU and memory wait for the run)."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past RLIMIT_FSIZE fails instead of killing
    for name, which in _LIFE_LIMITS:
        soft, _ = resource.getrlimit(which)
        value = _FIXED_LIMITS.get(name, soft)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(which, (value, value))


def set_run_limits(cpu_seconds: float, memory_bytes: int, *, session: bool = False,
                   granted: bool = False) -> str | None:
    """Apply one run's CPU and address-space budgets as hard limits; a reason if the run cannot have them.

    The CPU budget counts from now (the limit is the time used so far plus the budget, in whole
    seconds); past it the kernel kills the worker. A limit can only go down here. A one-shot worker
    (and a ``session`` worker whose host ``granted`` the run its room first, :func:`grant_run_limits`)
    sets hard = soft for both. A session worker nobody can raise (the host lacks ``CAP_SYS_RESOURCE``)
    keeps its CPU hard limit open (the host's CPU watch still ends each run at its budget, from
    outside) and its memory hard limit at the first run's budget: a later run that asks for more is
    refused with the reason, before it starts.
    """
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu = max(1, math.ceil(usage.ru_utime + usage.ru_stime + cpu_seconds))
    _, hard_as = resource.getrlimit(resource.RLIMIT_AS)
    if session and not granted and hard_as != resource.RLIM_INFINITY and memory_bytes > hard_as:
        return (f"this session's worker cannot be given a memory budget of {memory_bytes} bytes: its hard "
                f"limit is {hard_as} bytes (an earlier run's budget), and raising a hard limit needs "
                "CAP_SYS_RESOURCE, which the host lacks; run it in a new session or without one")
    _, hard_cpu = resource.getrlimit(resource.RLIMIT_CPU)
    cpu = _capped(cpu, hard_cpu)
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, hard_cpu if session and not granted else cpu))
    memory = _capped(memory_bytes, hard_as)
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    return None


_CAP_SYS_RESOURCE: Final = 24


@functools.cache
def can_grant_limits() -> bool:
    """Whether this process holds ``CAP_SYS_RESOURCE`` (may raise another process's hard limits).

    Root normally does; some hosts (containers, micro-VMs) drop it, and then nobody can give a
    persistent session's worker more room than it had.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("CapEff:"):
                    return bool(int(line.split()[1], 16) >> _CAP_SYS_RESOURCE & 1)
    except (OSError, ValueError):
        pass
    return False


def grant_run_limits(pid: int, cpu_used: float, cpu_seconds: float, memory_bytes: int) -> bool:
    """(Host side) give a session worker hard limits for its next run; False without the privilege.

    The worker then lowers them to the run's exact budgets (:func:`set_run_limits`). What is granted
    here is the most the run can ever get, even if the program had tampered with the worker's own code
    in an earlier run: one second of CPU over its budget, and its memory budget.
    """
    cpu = max(1, math.ceil(cpu_used + cpu_seconds)) + 1
    try:
        resource.prlimit(pid, resource.RLIMIT_CPU, (cpu, cpu))
        resource.prlimit(pid, resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    except (OSError, ValueError):
        return False
    return True


def _capped(value: int, hard: int) -> int:
    return value if hard == resource.RLIM_INFINITY else min(value, hard)


#: The descriptors a worker's sockets get: the channel, then (after the event loop's epoll descriptor)
#: the loop's wake-up socket pair.
_USUAL_SOCKETS: Final = (CHANNEL_FD, CHANNEL_FD + 2, CHANNEL_FD + 3)


def prepare_worker_filters() -> None:
    """(Template) build what every worker applies, once: the seccomp program for the usual descriptor
    numbers and the kernel's Landlock ABI version."""
    if _seccomp.available():
        _seccomp.program(_USUAL_SOCKETS)
    _landlock.abi_version(_lib())


def install_seccomp(socket_fds: tuple[int, ...]) -> bool:
    """Install the allowlist (:mod:`._seccomp`); the worker's own sockets are ``socket_fds``."""
    return _seccomp.install(_lib(), socket_fds)


def _try(layer: object) -> bool:
    try:
        return bool(layer())  # type: ignore[operator]
    except OSError:
        return False
