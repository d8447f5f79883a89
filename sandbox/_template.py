"""The template: a pre-started process that forks one fresh worker per request.

The host starts it once per :class:`~codemode.sandbox.Sandbox` as ``python -I`` from the host's interpreter,
so it never holds host state: it imports the sandbox modules, the executor and RestrictedPython, freezes the
heap (cheap copy-on-write forks) and then serves a control socket (``SOCK_SEQPACKET``, one JSON object per
message):

- host ``{op: spawn, id, layers}`` with one descriptor attached (the worker's end of a fresh
  socketpair): the template makes an empty working directory and forks; the child becomes the worker
  (:func:`codemode.sandbox.worker.serve`), the template answers ``{op: spawned, id, pid}`` (or
  ``{op: spawned, id, error, errno}`` when the directory, the fork or the channel's descriptor failed);
- host ``{op: kill, pid}``: SIGKILL to the worker's process group. Only the template reaps, so a pid it
  has not reaped yet cannot have been reused: the kill can never hit a stranger;
- template ``{op: exited, pid, status, cpu}`` once a worker is reaped (``os.wait4`` status and CPU
  seconds); its working directory is removed first.

The template is a child subreaper, so anything a worker might manage to leave behind is reparented to
it and reaped. It dies with the host (parent-death signal) and, when the control socket closes, kills
and reaps every worker, removes their directories and exits.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import importlib
import json
import os
import select
import shutil
import signal
import socket
import sys
import tempfile
import warnings
from typing import Any, Final

from . import _isolate, worker

__all__ = ("WORKDIR_PREFIX", "main", "sweep_workdirs")

_PR_SET_PDEATHSIG: Final = 1
_PR_SET_CHILD_SUBREAPER: Final = 36
_MAX_MESSAGE: Final = 1 << 16


class _Template:
    def __init__(self, control: socket.socket, executor: Any) -> None:
        self.control = control
        self.executor = executor
        self.children: dict[int, str] = {}
        self.pid = os.getpid()
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_w, False)
        os.set_blocking(self.wake_r, False)

    def send(self, message: dict[str, Any]) -> None:
        with contextlib.suppress(OSError):
            self.control.send(json.dumps(message).encode())

    def serve(self) -> None:
        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGCHLD, lambda signum, frame: None)
        self.send({"op": "hello", "pid": self.pid})
        while True:
            readable, _, _ = select.select([self.control.fileno(), self.wake_r], [], [])
            if self.wake_r in readable:
                with contextlib.suppress(OSError):
                    os.read(self.wake_r, 4096)
                self.reap()
            if self.control.fileno() in readable and not self.handle_control():
                self.shutdown()
                return

    def handle_control(self) -> bool:
        try:
            data, fds, flags, _ = socket.recv_fds(self.control, _MAX_MESSAGE, 4)
        except InterruptedError:
            return True
        except OSError:
            return False
        if not data:
            for fd in fds:
                os.close(fd)
            return False
        try:
            message = json.loads(data)
        except ValueError:
            message = {}
        op = message.get("op") if isinstance(message, dict) else None
        if op == "spawn" and len(fds) == 1:
            self.spawn(fds[0], message)
            return True
        if op == "spawn" and flags & socket.MSG_CTRUNC:  # (the channel was dropped: out of descriptors)
            self.send({"op": "spawned", "id": message.get("id"), "errno": errno.EMFILE,
                       "error": "the worker's channel did not arrive (too many open files)"})
        for fd in fds:
            os.close(fd)
        if op == "kill" and type(message.get("pid")) is int:
            self.kill(message["pid"])
        return True

    def spawn(self, channel: int, message: dict[str, Any]) -> None:
        layers = frozenset(str(layer) for layer in message.get("layers", ()))
        try:
            workdir = tempfile.mkdtemp(prefix=f"{WORKDIR_PREFIX}{self.pid}-")
            os.chmod(workdir, 0o555)
            pid = os.fork()
        except OSError as exc:
            os.close(channel)
            self.send({"op": "spawned", "id": message.get("id"), "error": str(exc), "errno": exc.errno})
            return
        if pid == 0:  # the worker; never returns
            try:
                signal.set_wakeup_fd(-1)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                os.setsid()
                os.chdir(workdir)
                worker.serve(channel, worker.WorkerConfig(self.executor, layers, self.pid))
            finally:
                os._exit(1)
        os.close(channel)
        self.children[pid] = workdir
        self.send({"op": "spawned", "id": message.get("id"), "pid": pid})

    def kill(self, pid: int) -> None:
        if pid not in self.children:
            return  # already reaped (or never ours): never signal a pid we do not own
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)

    def reap(self, block: bool = False) -> None:
        """Reap every exited child; a worker's process group is killed before its leader is reaped.

        ``WNOWAIT`` peeks at an exited child without reaping it: while the zombie leader exists its
        pid (= its process group id) cannot be reused, so the group kill can only reach what the
        worker left behind (if anything managed to fork), never a stranger.
        """
        flags = os.WEXITED | os.WNOWAIT | (0 if block else os.WNOHANG)
        while True:
            try:
                info = os.waitid(os.P_ALL, 0, flags)
            except ChildProcessError:
                return
            except InterruptedError:
                continue
            if info is None:
                return
            pid = info.si_pid
            if pid in self.children:
                with contextlib.suppress(OSError):
                    os.killpg(pid, signal.SIGKILL)
            try:
                _, status, usage = os.wait4(pid, 0)
            except ChildProcessError:
                continue
            workdir = self.children.pop(pid, None)
            if workdir is not None:
                shutil.rmtree(workdir, ignore_errors=True)
                self.send({"op": "exited", "pid": pid, "status": status,
                           "cpu": usage.ru_utime + usage.ru_stime})

    def shutdown(self) -> None:
        for pid in list(self.children):
            self.kill(pid)
        self.reap(block=True)
        for workdir in self.children.values():
            shutil.rmtree(workdir, ignore_errors=True)


#: Modules the standard library imports lazily. A worker runs under its own uid and usually cannot read
#: the interpreter's files (for example under ``/root``), so whatever it may need is imported here.
_LAZY_STDLIB: Final = (
    "_strptime", "encodings.idna", "encodings.punycode", "encodings.ascii", "encodings.latin_1",
    "encodings.utf_16", "encodings.utf_32", "encodings.unicode_escape", "encodings.raw_unicode_escape",
    "encodings.cp437", "stringprep", "unicodedata", "asyncio", "selectors", "traceback", "linecache",
)


WORKDIR_PREFIX: Final = "codemode-worker-"


def sweep_workdirs(owner: int | None = None) -> None:
    """Remove worker directories left behind by templates that died without cleaning up.

    Directories are named ``codemode-worker-<template pid>-*``. With ``owner`` only that template's
    are removed; otherwise those of every template pid that no longer exists. Only empty directories
    go (``rmdir``), so nothing but a worker's untouched working directory can ever be deleted.
    """
    root = tempfile.gettempdir()
    try:
        names = os.listdir(root)
    except OSError:
        return
    for name in names:
        if not name.startswith(WORKDIR_PREFIX):
            continue
        pid_text = name[len(WORKDIR_PREFIX):].split("-", 1)[0]
        if not pid_text.isdigit():
            continue
        pid = int(pid_text)
        if owner is not None and pid != owner:
            continue
        if owner is None and _process_exists(pid):
            continue
        with contextlib.suppress(OSError):
            os.rmdir(os.path.join(root, name))


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def _prepare(executor_name: str) -> Any:
    """Import everything a worker needs before the first fork, so no worker pays for it."""
    for name in _LAZY_STDLIB:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    executor = importlib.import_module(executor_name)
    for name in ("compile_program", "run_program"):
        if not callable(getattr(executor, name, None)):
            raise ImportError(f"executor module {executor_name!r} has no callable {name!r}")
    _isolate._lib()
    _isolate._seccomp_program()
    # Workers ignore every warning (a program's SyntaxWarning has nowhere to go): the compiler then
    # skips saving and restoring the filter list around each parse and compile.
    warnings.simplefilter("ignore")
    gc.collect()
    gc.freeze()
    return executor


def main(argv: list[str]) -> None:
    """Entry point: ``argv`` is ``[control_fd, executor_module, json_sys_path]``.

    The host passes its own ``sys.path`` so the template imports exactly the modules the host would
    (``-I`` drops the environment and the current directory from the path).
    """
    if len(argv) > 2:  # the bootstrap normally did this already
        sys.path[:] = [str(entry) for entry in json.loads(argv[2])]
    control = socket.socket(fileno=int(argv[0]))
    control.setblocking(True)
    libc = _isolate._lib()
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    try:
        executor = _prepare(argv[1])
    except BaseException as exc:
        with contextlib.suppress(OSError):
            control.send(json.dumps({"op": "hello", "error": f"{type(exc).__name__}: {exc}"}).encode())
        sys.exit(1)
    sweep_workdirs()
    _Template(control, executor).serve()


if __name__ == "__main__":
    main(sys.argv[1:])
