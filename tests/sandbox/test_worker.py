"""The worker's isolation layers are real: each claimed layer is probed from inside a worker.

The probes run as plain CPython (the test stand-in executor) inside real workers, so what fails here
is stopped by the operating-system layers alone, not by the language policy. Each probe's payload is
first shown to work in the host process (or is trivially real), so a passing test cannot be vacuous.
"""

from __future__ import annotations

import os
import socket
import stat
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from codemode.sandbox import Sandbox
from tests.sandbox._support import FULL_LAYERS, STANDIN, run

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
async def full() -> AsyncIterator[Sandbox]:
    async with Sandbox(executor=STANDIN, warm=1) as sandbox:
        yield sandbox


@pytest.fixture(scope="module")
async def bare() -> AsyncIterator[Sandbox]:
    """No optional layer: only the process, environment, directory, descriptor and rlimit layers."""
    async with Sandbox(executor=STANDIN, warm=1, layers=()) as sandbox:
        yield sandbox


async def _value(sandbox: Sandbox, program: str) -> object:
    with anyio.fail_after(20):
        result = await run(sandbox, program)
    assert result.error is None, result.error
    return result.value


async def test_every_layer_is_reported_active(full: Sandbox, bare: Sandbox) -> None:
    """It reports all layers with everything on, and only the base layers with the options off."""
    with anyio.fail_after(20):
        assert (await run(full, "return 1")).stats.isolation == FULL_LAYERS
        assert (await run(bare, "return 1")).stats.isolation == (
            "process", "empty-env", "tmpdir", "closed-fds", "rlimits")


async def test_the_environment_is_empty(full: Sandbox) -> None:
    """It starts the program with no environment variables at all."""
    assert os.environ  # the host has some
    assert await _value(full, "import os\nreturn dict(os.environ)") == {}


async def test_the_working_directory_is_empty_and_unwritable(full: Sandbox) -> None:
    """It runs in a fresh, empty directory of its own that it cannot write."""
    value = await _value(full, """
import os
here = os.getcwd()
try:
    open('note.txt', 'w').close()
    wrote = True
except OSError:
    wrote = False
return [here, os.listdir('.'), wrote]
""")
    assert isinstance(value, list)
    here, listing, wrote = value
    assert Path(here).name.startswith("codemode-worker-") and listing == [] and wrote is False


async def test_only_the_protocol_channel_is_inherited(full: Sandbox) -> None:
    """It keeps fd 3 (a socket) and /dev/null on 0-2; nothing else from the host or template."""
    with tempfile.NamedTemporaryFile() as secret:
        os.set_inheritable(secret.fileno(), True)
        value = await _value(full, """
import os
links = {}
for name in os.listdir('/proc/self/fd'):
    try:
        links[name] = os.readlink('/proc/self/fd/' + name)
    except OSError:
        pass
return links
""")
        assert isinstance(value, dict)
        assert {value[fd] for fd in ("0", "1", "2")} == {"/dev/null"}
        assert value["3"].startswith("socket:")
        others = {fd: link for fd, link in value.items() if fd not in ("0", "1", "2", "3")}
        # What remains is the worker's own event loop (epoll and its self-pipe socket pair).
        assert all(link.startswith(("socket:", "anon_inode:[eventpoll]")) for link in others.values())
        assert len(others) <= 4 and secret.name not in value.values()


async def test_network_connections_fail_with_and_without_seccomp(full: Sandbox) -> None:
    """It cannot reach a host listener on 127.0.0.1, by netns alone and with seccomp on top."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        probe = f"""
import socket
try:
    probe = socket.socket()
    probe.settimeout(1)
    probe.connect(('127.0.0.1', {port}))
    return 'connected'
except OSError as exc:
    return type(exc).__name__
"""
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            pass  # the payload is real: from the host it connects
        assert await _value(full, probe) == "PermissionError"  # seccomp refuses socket()
        async with Sandbox(executor=STANDIN, warm=0, layers=("netns",)) as netns_only:
            assert await _value(netns_only, probe) != "connected"
            namespace = await _value(netns_only, "import os\nreturn os.readlink('/proc/self/ns/net')")
        assert namespace != os.readlink("/proc/self/ns/net")


async def test_files_cannot_be_created_or_written(full: Sandbox, bare: Sandbox, tmp_path: Path) -> None:
    """It cannot create a file under seccomp, and cannot write data into one by rlimits alone."""
    os.chmod(tmp_path, 0o777)
    target = tmp_path / "created.txt"
    program = f"""
try:
    with open({str(target)!r}, 'w') as handle:
        handle.write('x' * 100)
    return 'wrote'
except OSError as exc:
    return type(exc).__name__
"""
    assert await _value(full, program) == "PermissionError" and not target.exists()
    assert await _value(bare, program) != "wrote"  # RLIMIT_FSIZE=0: EFBIG on the first byte
    assert not target.exists() or target.stat().st_size == 0


async def test_processes_cannot_be_created(full: Sandbox) -> None:
    """It cannot fork or exec (seccomp), and not by RLIMIT_NPROC under its own uid either."""
    program = """
import os
try:
    pid = os.fork()
except OSError as exc:
    return type(exc).__name__
if pid == 0:
    os._exit(0)
return 'forked'
"""
    assert await _value(full, program) == "PermissionError"
    async with Sandbox(executor=STANDIN, warm=0, layers=("uid",)) as uid_only:
        assert await _value(uid_only, program) == "BlockingIOError"  # EAGAIN from RLIMIT_NPROC=0


async def test_privileges_are_dropped_and_locked(full: Sandbox, tmp_path: Path) -> None:
    """It runs as an unprivileged uid of its own with no_new_privs and a seccomp filter."""
    secret = tmp_path / "secret.txt"
    secret.write_text("s3cr3t")
    secret.chmod(stat.S_IRUSR)
    os.chmod(tmp_path, 0o755)
    value = await _value(full, f"""
import os
status = dict(line.split(':', 1) for line in open('/proc/self/status').read().splitlines())
try:
    leaked = open({str(secret)!r}).read()
except OSError as exc:
    leaked = type(exc).__name__
return [os.getuid(), os.getgid(), os.getgroups(), status['NoNewPrivs'].strip(),
        status['Seccomp'].strip(), leaked]
""")
    assert isinstance(value, list)
    uid, gid, groups, no_new_privs, seccomp, leaked = value
    assert uid != 0 and gid != 0 and groups == []
    assert (no_new_privs, seccomp) == ("1", "2")
    assert leaked == "PermissionError" and secret.read_text() == "s3cr3t"


async def test_each_worker_has_its_own_uid(full: Sandbox) -> None:
    """It gives concurrent workers distinct uids, so they cannot signal or trace each other."""
    results = []

    async def one() -> None:
        results.append(await _value(full, "import os\nreturn os.getuid()"))

    with anyio.fail_after(20):
        async with anyio.create_task_group() as group:
            for _ in range(3):
                group.start_soon(one)
    assert len(set(results)) == 3
