"""The template: a pre-started process that forks one fresh worker per request.

The host starts it once per :class:`~codemode.sandbox.Sandbox` as ``python -I`` from the host's interpreter,
so it never holds host state: it imports the sandbox modules, the executor, RestrictedPython and every
standard module a worker may need later (:mod:`codemode.sandbox._preload`), freezes the heap (cheap
copy-on-write forks), gives up the host's file system for an empty read-only root and enters a PID namespace
(:func:`codemode.sandbox._isolate.isolate_template`), and then serves a control socket (``SOCK_SEQPACKET``,
one JSON object per message):

- host ``{op: spawn, id, layers, warm}`` with one descriptor attached (the worker's end of a fresh
  socketpair; ``warm: false`` skips the worker's warm-up run): the template forks (without the empty
  root, it first makes an empty working directory); the child becomes the worker
  (:func:`codemode.sandbox.worker.serve`), the template answers
  ``{op: spawned, id, pid}`` (or ``{op: spawned, id, error, errno}`` when the directory, the fork or
  the channel's descriptor failed);
- host ``{op: kill, pid}``: SIGKILL to the worker's process group. Only the template reaps, so a pid it
  has not reaped yet cannot have been reused: the kill can never hit a stranger;
- template ``{op: exited, pid, status, cpu}`` once a worker is reaped (``os.wait4`` status and CPU
  seconds); its working directory is removed first.

The template is a child subreaper, so anything a worker might manage to leave behind is reparented to
it (or, in its PID namespace, to the namespace's holder) and reaped. It dies with the host (parent-death
signal) and, when the control socket closes or the PID namespace's holder dies, kills and reaps every
worker, removes their directories and exits.

After the empty root, nothing can be imported that is not loaded yet: a lazy import a worker makes at
run time fails with a ``ModuleNotFoundError`` that names ``codemode.sandbox._preload.PRELOAD``, which is
where a module a new feature needs goes (the tests run every facade's lazy paths in a real worker, and
check statically that each lazy import of the allowed modules is preloaded).
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
from types import ModuleType
from typing import Any, Final

from . import _isolate, _preload, worker

__all__ = ("WORKDIR_PREFIX", "main", "sweep_workdirs")

_PR_SET_PDEATHSIG: Final = 1
_PR_SET_CHILD_SUBREAPER: Final = 36
_MAX_MESSAGE: Final = 1 << 16


class _Template:
    def __init__(self, control: socket.socket, executor: Any,
                 isolation: _isolate.TemplateIsolation) -> None:
        self.control = control
        self.executor = executor
        self.isolation = isolation
        self.children: dict[int, str | None] = {}
        self.holder_gone = False
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
        self.send({"op": "hello", "pid": self.pid, "layers": list(self.isolation.layers)})
        while True:
            readable, _, _ = select.select([self.control.fileno(), self.wake_r], [], [])
            if self.wake_r in readable:
                with contextlib.suppress(OSError):
                    os.read(self.wake_r, 4096)
                self.reap()
                if self.holder_gone:  # every worker died with it, and no fork can succeed
                    self.shutdown()
                    return
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
        isolation = self.isolation
        workdir: str | None = None
        pipe: tuple[int, int] | None = None
        try:
            if not isolation.empty_root:
                workdir = tempfile.mkdtemp(prefix=f"{WORKDIR_PREFIX}{self.pid}-")
                os.chmod(workdir, 0o555)
            if isolation.pid_namespace:
                pipe = os.pipe()
            pid = os.fork()
        except OSError as exc:
            os.close(channel)
            for fd in pipe or ():
                os.close(fd)
            if workdir is not None:
                shutil.rmtree(workdir, ignore_errors=True)
            self.send({"op": "spawned", "id": message.get("id"), "error": str(exc), "errno": exc.errno})
            return
        if pid == 0:  # the worker; never returns
            try:
                signal.set_wakeup_fd(-1)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                if pipe is not None:
                    os.close(pipe[1])
                os.setsid()
                os.chdir(workdir or "/")
                parent = 0 if isolation.pid_namespace else self.pid  # (outside the namespace: 0)
                worker.serve(channel, worker.WorkerConfig(self.executor, layers, parent, isolation,
                                                          pipe[0] if pipe else None,
                                                          message.get("warm") is not False))
            finally:
                os._exit(1)
        os.close(channel)
        if pipe is not None:
            with contextlib.suppress(OSError):
                os.write(pipe[1], pid.to_bytes(8, "little"))
            os.close(pipe[0])
            os.close(pipe[1])
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
            if pid == self.isolation.holder:
                self.holder_gone = True
            if pid in self.children:
                with contextlib.suppress(OSError):
                    os.killpg(pid, signal.SIGKILL)
            try:
                _, status, usage = os.wait4(pid, 0)
            except ChildProcessError:
                continue
            if pid in self.children:
                workdir = self.children.pop(pid)
                if workdir is not None:
                    shutil.rmtree(workdir, ignore_errors=True)
                self.send({"op": "exited", "pid": pid, "status": status,
                           "cpu": usage.ru_utime + usage.ru_stime})

    def shutdown(self) -> None:
        for pid in list(self.children):
            self.kill(pid)
        if self.isolation.holder is not None and not self.holder_gone:
            with contextlib.suppress(OSError):  # (it ends the PID namespace: nothing in it survives)
                os.kill(self.isolation.holder, signal.SIGKILL)
        self.reap(block=True)
        for workdir in self.children.values():
            if workdir is not None:
                shutil.rmtree(workdir, ignore_errors=True)


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


def _prepare(executor_name: str) -> ModuleType:
    """Import everything a worker needs before the first fork, so no worker pays for it (and no worker
    needs a file)."""
    _preload.load(_preload.PRELOAD)
    executor = importlib.import_module(executor_name)
    for name in ("compile_program", "run_program"):
        if not callable(getattr(executor, name, None)):
            raise ImportError(f"executor module {executor_name!r} has no callable {name!r}")
    _preload.load([str(name) for name in getattr(executor, "PRELOAD", ())])
    _preload.warm_lazy_state()
    _isolate._lib()
    _isolate.prepare_worker_filters()
    # Workers ignore every warning (a program's SyntaxWarning has nowhere to go): the compiler then
    # skips saving and restoring the filter list around each parse and compile.
    warnings.simplefilter("ignore")
    worker.warm_template(executor)  # (its lazily made state is then shared by every worker)
    gc.collect()
    gc.freeze()
    return executor


def main(argv: list[str]) -> None:
    """Entry point: ``argv`` is ``[control_fd, executor_module, json_template_layers]``.

    The bootstrap has set ``sys.path`` to the host's, so the template imports exactly the modules the
    host would (``-I`` drops the environment and the current directory from the path). The layers are
    the template-level ones to attempt (all of them when the argument is missing).
    """
    wanted = (frozenset(str(name) for name in json.loads(argv[2])) if len(argv) > 2
              else _isolate.SHARED_LAYERS)
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
    isolation = _isolate.isolate_template(wanted & _isolate.SHARED_LAYERS)
    if isolation.empty_root:
        sys.meta_path.insert(0, _preload.AfterPivot())
    _Template(control, executor, isolation).serve()


if __name__ == "__main__":
    main(sys.argv[1:])
