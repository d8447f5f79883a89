"""The probes of the assume-breach suite: what an attacker who owns the worker's Python tries first.

Each probe is the body of an ``async def`` run as plain CPython inside a real worker (the test-only
executor ``codemode.sandbox.testing.unrestricted``): it performs one attempt and returns what it got, or
raises what the kernel answered. ``CTX`` (a dict the harness fills in: host paths, pids, ports) and
``sc(number, *args)`` (a raw system call through ``ctypes`` that raises ``OSError`` on failure) are in
scope.

Each probe says, per layer configuration, which layer must stop it and by what evidence
(:class:`Stop`): the errno (or exception) the attempt fails with, or, for an attempt that succeeds
without reaching anything (listing an empty root), the value it sees. Configurations:

- ``all``: every layer (production); nearly everything is refused by the seccomp allowlist first, so
  for ``seccomp`` the probe also names the refused system call, which the test checks is not allowed;
- ``no-seccomp``: every layer but seccomp: proves the layers under it hold on their own;
- ``no-seccomp-no-mount``: neither seccomp nor the empty root: Landlock is the file-system layer;
- ``no-seccomp-no-landlock``: neither seccomp nor Landlock: namespaces, uid and rlimits alone.

The kernel checks in a fixed order (a path is looked up before anyone is asked about it; Landlock's
hooks for creating, renaming and truncating run before the owner and mode checks; signals are checked
against the uid before any security module), so in each configuration exactly one layer answers
first, and that is the one named.

A probe with no expectation for a configuration is not run there (no layer but seccomp stops it: for
example ``io_uring_setup``, which the kernel grants any process).
"""

from __future__ import annotations

import errno
from dataclasses import dataclass, field
from typing import Final

CONFIGS: Final = ("all", "no-seccomp", "no-seccomp-no-mount", "no-seccomp-no-landlock")


@dataclass(frozen=True)
class Stop:
    """How a layer shows that it stopped an attempt.

    ``errno``: the attempt raised ``OSError`` with this errno; ``exception``: it raised this exception
    type (``MemoryError``, ``ValueError``, ``RuntimeError``); ``value``: it succeeded and saw exactly
    this (nothing).
    """

    layer: str
    errno: int | None = None
    exception: str | None = None
    value: object = None


@dataclass(frozen=True)
class Probe:
    """One attempt: ``id`` (the test id), ``syscall`` (what seccomp refuses), ``body`` and ``stops``."""

    id: str
    syscall: str
    body: str
    stops: dict[str, Stop] = field(default_factory=dict)
    #: Probes that may end or change their worker run alone.
    alone: bool = False


_SEC: Final = Stop("seccomp", errno.EPERM)
_LANDLOCK: Final = Stop("landlock", errno.EACCES)
_GONE: Final = Stop("mount-ns", errno.ENOENT)  # the path does not exist in the empty root
_READ_ONLY: Final = Stop("mount-ns", errno.EROFS)  # the empty root is mounted read-only
_UID: Final = Stop("uid", errno.EPERM)
_PID_NS: Final = Stop("pid-ns", errno.ESRCH)  # the target has no pid in the worker's namespace


def _fs(no_seccomp: Stop, no_mount: Stop | None, no_landlock: Stop) -> dict[str, Stop]:
    """A file-system attempt: seccomp first, then the given layer in each configuration."""
    stops = {"all": _SEC, "no-seccomp": no_seccomp, "no-seccomp-no-landlock": no_landlock}
    if no_mount is not None:
        stops["no-seccomp-no-mount"] = no_mount
    return stops


def _under(stop: Stop | None = None, no_mount: Stop | None = None) -> dict[str, Stop]:
    """Seccomp first; without it, ``stop`` (with or without Landlock, and without the empty root
    unless ``no_mount`` says otherwise)."""
    stops = {"all": _SEC}
    if stop is not None:
        stops.update({"no-seccomp": stop, "no-seccomp-no-landlock": stop,
                      "no-seccomp-no-mount": no_mount or stop})
    return stops


def _always(stop: Stop) -> dict[str, Stop]:
    return dict.fromkeys(CONFIGS, stop)


def _read(path_expr: str) -> str:
    return f"with open({path_expr}, 'rb') as handle:\n    return handle.read(64).hex()"


PROBES: Final = (
    # --- the file system: reading -------------------------------------------------------------------
    Probe("read-etc-passwd", "openat", _read("'/etc/passwd'"), _fs(_GONE, _LANDLOCK, _GONE)),
    Probe("read-etc-hostname", "openat", _read("'/etc/hostname'"), _fs(_GONE, _LANDLOCK, _GONE)),
    Probe("read-project-source", "openat", _read("CTX['source']"), _fs(_GONE, _LANDLOCK, _GONE)),
    Probe("read-host-workspace", "openat", _read("CTX['workspace_file']"), _fs(_GONE, _LANDLOCK, _GONE)),
    Probe("list-host-workspace", "openat", "return os.listdir(CTX['workspace'])",
          _fs(_GONE, _LANDLOCK, _GONE)),
    Probe("read-other-run-directory", "openat", _read("CTX['other_run'] + '/left.txt'"),
          _fs(_GONE, _LANDLOCK, _GONE)),
    Probe("list-worker-directories", "openat",
          "return [n for n in os.listdir(CTX['tmp']) if n.startswith('codemode-worker-')]",
          _fs(_GONE, _LANDLOCK, _GONE)),
    Probe("read-proc-1-cmdline", "openat", _read("'/proc/1/cmdline'"), _fs(_GONE, _LANDLOCK, _GONE)),
    Probe("read-proc-host-environ", "openat", _read("f\"/proc/{CTX['host_pid']}/environ\""),
          _fs(_GONE, Stop("uid", errno.EACCES), _GONE)),  # (mode 0400: the owner check answers first)
    Probe("read-proc-host-mem", "openat", _read("f\"/proc/{CTX['host_pid']}/mem\""),
          _fs(_GONE, Stop("uid", errno.EACCES), _GONE)),
    Probe("read-sys", "openat", _read("'/sys/devices/system/cpu/online'"), _fs(_GONE, _LANDLOCK, _GONE)),
    Probe("list-root", "openat", "return sorted(os.listdir('/'))",
          _fs(_LANDLOCK, _LANDLOCK, Stop("mount-ns", value=[]))),
    Probe("list-above-root", "openat", "return sorted(os.listdir('/../../..'))",
          _fs(_LANDLOCK, _LANDLOCK, Stop("mount-ns", value=[]))),
    Probe("stat-etc", "newfstatat", "return os.stat('/etc').st_mode", _fs(_GONE, None, _GONE)),
    Probe("open-by-handle", "open_by_handle_at",
          "handle = ctypes.create_string_buffer(b'\\x08\\x00\\x00\\x00\\x01\\x00\\x00\\x00' + b'\\x02' * 8)\n"
          "return sc(304, -100, handle, 0)", _under(_UID)),
    # --- the file system: writing -------------------------------------------------------------------
    Probe("create-file", "openat", "open('/planted', 'w').close()\nreturn 'created'",
          _fs(_READ_ONLY, _LANDLOCK, _READ_ONLY)),
    Probe("create-file-in-workspace", "openat",
          "open(CTX['workspace'] + '/planted', 'w').close()\nreturn 'created'", _fs(_GONE, _LANDLOCK, _GONE)),
    Probe("write-workspace-file", "openat",
          "with open(CTX['workspace_file'], 'a') as handle:\n    handle.write('x')\nreturn 'written'",
          _fs(_GONE, _LANDLOCK, _GONE)),
    Probe("mkdir", "mkdir", "os.mkdir(CTX['workspace'] + '/planted')\nreturn 'made'",
          _fs(_GONE, _LANDLOCK, _GONE)),
    Probe("mkdir-in-root", "mkdir", "os.mkdir('/planted')\nreturn 'made'",
          _fs(_READ_ONLY, _LANDLOCK, _READ_ONLY)),
    Probe("mkfifo", "mknod", "os.mkfifo(CTX['workspace'] + '/planted-fifo')\nreturn 'made'",
          _fs(_GONE, _LANDLOCK, _GONE)),
    Probe("symlink", "symlink", "os.symlink('/', CTX['workspace'] + '/planted-link')\nreturn 'made'",
          _fs(_GONE, _LANDLOCK, _GONE)),
    Probe("rename", "rename", "os.rename(CTX['workspace_file'], CTX['workspace'] + '/moved')\nreturn 'moved'",
          _fs(_GONE, _LANDLOCK, _GONE)),
    Probe("unlink", "unlink", "os.unlink(CTX['workspace_file'])\nreturn 'removed'",
          _fs(_GONE, _LANDLOCK, _GONE)),
    Probe("chmod", "chmod", "os.chmod(CTX['workspace_file'], 0o600)\nreturn 'changed'",
          _fs(_GONE, Stop("uid", errno.EPERM), _GONE)),  # (Landlock has no right for modes: the owner)
    Probe("utime", "utimensat", "os.utime(CTX['workspace_file'], (0, 0))\nreturn 'touched'",
          _fs(_GONE, Stop("uid", errno.EPERM), _GONE)),
    Probe("truncate", "truncate", "os.truncate(CTX['workspace_file'], 0)\nreturn 'cut'",
          _fs(_GONE, _LANDLOCK, _GONE)),
    # --- processes ----------------------------------------------------------------------------------
    Probe("fork", "fork", "pid = sc(57)\nif pid == 0:\n    os._exit(0)\nreturn 'forked'",
          _under(Stop("rlimits", errno.EAGAIN)), alone=True),
    Probe("vfork", "vfork", "pid = sc(58)\nif pid == 0:\n    os._exit(0)\nreturn 'forked'",
          _under(Stop("rlimits", errno.EAGAIN)), alone=True),
    Probe("clone", "clone", "pid = sc(56, 17, 0, 0, 0, 0)\nif pid == 0:\n    os._exit(0)\nreturn 'cloned'",
          _under(Stop("rlimits", errno.EAGAIN)), alone=True),
    Probe("thread", "clone",
          "import threading\nthreading.Thread(target=lambda: None).start()\nreturn 'started'",
          {"all": Stop("seccomp", exception="RuntimeError"),
           **{config: Stop("rlimits", exception="RuntimeError") for config in CONFIGS[1:]}}, alone=True),
    Probe("exec", "execve", "os.execv('/bin/sh', ['sh', '-c', 'exit 0'])", _fs(_GONE, _LANDLOCK, _GONE),
          alone=True),
    # --- signals and other processes ----------------------------------------------------------------
    Probe("signal-host", "kill", "os.kill(CTX['host_pid'], 0)\nreturn 'reached'", _under(_PID_NS)),
    Probe("signal-template", "kill", "os.kill(CTX['template_pid'], 0)\nreturn 'reached'", _under(_PID_NS)),
    Probe("signal-host-process-group", "kill", "os.killpg(CTX['host_pgid'], 0)\nreturn 'reached'",
          _under(_PID_NS)),
    Probe("signal-namespace-init", "kill", "os.kill(1, 15)\nreturn 'reached'", _under(_UID)),
    Probe("ptrace-host", "ptrace", "return sc(101, 16, CTX['host_pid'], 0, 0)", _under(_PID_NS)),
    Probe("process-vm-readv-host", "process_vm_readv",
          "buffer = ctypes.create_string_buffer(64)\n"
          "local = (ctypes.c_void_p * 2)(ctypes.addressof(buffer), 64)\n"
          "remote = (ctypes.c_void_p * 2)(0x400000, 64)\n"
          "return sc(310, CTX['host_pid'], local, 1, remote, 1, 0)", _under(_PID_NS)),
    Probe("pidfd-open-host", "pidfd_open", "return sc(434, CTX['host_pid'], 0)", _under(_PID_NS)),
    Probe("fcntl-setown-host", "fcntl",
          "import fcntl\nreturn fcntl.fcntl(3, fcntl.F_SETOWN, CTX['host_pid'])",
          _under(_PID_NS)),
    # --- the network --------------------------------------------------------------------------------
    Probe("tcp-to-host-listener", "socket",
          "s = socket.socket()\ns.settimeout(1)\n"
          "s.connect(('127.0.0.1', CTX['tcp_port']))\nreturn 'connected'",
          {"all": _SEC, "no-seccomp": Stop("landlock", errno.EACCES),
           "no-seccomp-no-mount": Stop("landlock", errno.EACCES),
           "no-seccomp-no-landlock": Stop("netns", errno.ENETUNREACH)}),
    Probe("udp-to-host-listener", "socket",
          "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
          "s.sendto(b'breach', ('127.0.0.1', CTX['udp_port']))\nreturn 'sent'",
          _under(Stop("netns", errno.ENETUNREACH))),
    Probe("tcp-listen", "socket",
          "s = socket.socket()\ns.bind(('0.0.0.0', 0))\ns.listen()\nreturn 'listening'",
          {"all": _SEC, "no-seccomp": Stop("landlock", errno.EACCES),
           "no-seccomp-no-mount": Stop("landlock", errno.EACCES)}),
    Probe("host-abstract-unix-socket", "socket",
          "s = socket.socket(socket.AF_UNIX)\ns.connect(CTX['abstract'])\nreturn 'connected'",
          _under(Stop("netns", errno.ECONNREFUSED))),  # (abstract names live in the network namespace)
    Probe("host-path-unix-socket", "socket",
          "s = socket.socket(socket.AF_UNIX)\ns.connect(CTX['unix_path'])\nreturn 'connected'",
          {"all": _SEC, "no-seccomp": _GONE, "no-seccomp-no-landlock": _GONE}),
    Probe("packet-socket", "socket", "socket.socket(socket.AF_PACKET, socket.SOCK_RAW)\nreturn 'raw'",
          _under(_UID)),
    Probe("socketpair", "socketpair", "socket.socketpair()\nreturn 'paired'", _under()),
    Probe("channel-sendmsg", "sendmsg", "return sc(46, 3, None, 0)", _under()),
    Probe("duplicate-channel", "dup", "return os.dup(3)", _under()),
    # --- privileges, resources and kernel surface ---------------------------------------------------
    Probe("setuid-root", "setuid", "os.setuid(0)\nreturn 'root'", _under(_UID)),
    Probe("raise-rlimit-as", "prlimit64",
          "resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))\n"
          "return 'raised'", _always(Stop("rlimits", exception="ValueError"))),
    Probe("raise-rlimit-cpu", "prlimit64",
          "soft, hard = resource.getrlimit(resource.RLIMIT_CPU)\n"
          "resource.setrlimit(resource.RLIMIT_CPU, (hard + 60, hard + 60))\nreturn 'raised'",
          _always(Stop("rlimits", exception="ValueError"))),
    Probe("raise-any-rlimit", "prlimit64",
          "raised = []\n"
          "for name in dir(resource):\n"
          "    if not name.startswith('RLIMIT_'):\n"
          "        continue\n"
          "    which = getattr(resource, name)\n"
          "    soft, hard = resource.getrlimit(which)\n"
          "    wanted = [hard + 1] if hard != resource.RLIM_INFINITY else []\n"
          "    for wanted in wanted + ([hard] if soft != hard else []):\n"
          "        try:\n"
          "            resource.setrlimit(which, (wanted, max(wanted, hard)))\n"
          "            raised.append(name)\n"
          "        except (ValueError, OSError):\n"
          "            pass\n"
          "return raised", _always(Stop("rlimits", value=[]))),
    Probe("allocate-past-memory-budget", "mmap", "return len(bytearray(CTX['memory_bytes'] + 1))",
          _always(Stop("rlimits", exception="MemoryError"))),
    Probe("mmap-past-memory-budget", "mmap", "return len(mmap.mmap(-1, CTX['memory_bytes'] * 2))",
          _always(Stop("rlimits", errno.ENOMEM))),
    Probe("many-descriptors", "epoll_create1",
          "import select\nreturn len([select.epoll() for _ in range(64)])",
          _under(Stop("rlimits", errno.EMFILE))),
    Probe("io-uring-setup", "io_uring_setup",
          "params = ctypes.create_string_buffer(120)\nreturn sc(425, 8, params)",
          _under()),
    Probe("userfaultfd", "userfaultfd", "return sc(323, 0)", _under(_UID)),
    Probe("keyctl", "keyctl", "return sc(250, 0, -3, 1)", _under()),  # KEYCTL_GET_KEYRING_ID, session
    Probe("bpf", "bpf", "attr = ctypes.create_string_buffer(128)\nreturn sc(321, 5, attr, 128)",  # PROG_LOAD
          _under(_UID)),
    Probe("perf-event-open", "perf_event_open",
          "attr = ctypes.create_string_buffer(128)\nreturn sc(298, attr, 0, -1, -1, 0)", _under()),
    Probe("mount-tmpfs", "mount", "return sc(165, b'none', b'/', b'tmpfs', 0, None)", _under(_UID)),
    Probe("umount-root", "umount2", "return sc(166, b'/', 2)", _under(_UID)),
    Probe("pivot-root", "pivot_root", "return sc(155, b'/', b'/')", _under(_UID)),
    Probe("chroot", "chroot", "os.chroot('/')\nreturn 'rooted'", _under(_UID)),
    Probe("unshare-mount", "unshare", "return sc(272, 0x00020000)", _under(_UID), alone=True),
    Probe("unshare-user", "unshare", "return sc(272, 0x10000000)", _under(), alone=True),
    Probe("setns", "setns", "return sc(308, 3, 0)", _under()),
    Probe("hostname", "uname", "return os.uname().nodename", _under(Stop("uts-ns", value="sandbox"))),
    Probe("set-hostname", "sethostname", "return sc(170, b'planted', 7)", _under(_UID)),
    Probe("ioctl-tiocsti", "ioctl", "return sc(16, 0, 0x5412, ctypes.c_char_p(b'x'))", _under()),
)
