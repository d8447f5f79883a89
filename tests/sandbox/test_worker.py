"""The worker's isolation layers: what each reports, how it is seen from outside, and how it fails closed.

The probes run as plain CPython (the unrestricted test-only executor) inside real workers, so what fails
here is stopped by the operating-system layers alone. The attack catalogue is the assume-breach suite
(``tests/sandbox/breach``); this module checks the layers' plumbing: reporting, what the host sees of
a worker in /proc, the per-worker and template-level fallbacks, ``require=`` and the preload list.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from codemode.sandbox import ISOLATION_LAYERS, Sandbox, SandboxUsageError, _preload
from codemode.sandbox._isolate import OPTIONAL_LAYERS, TEMPLATE_LAYERS
from codemode.sandbox.facades import ALLOWED_MODULES
from codemode.sandbox.interpreter import compile_program, run_program
from tests.sandbox._support import FULL_LAYERS, pid_alive, run

pytestmark = pytest.mark.anyio

UNRESTRICTED = "codemode.sandbox.testing.unrestricted"
BASE = ("process", "empty-env", "tmpdir", "closed-fds", "rlimits")


@pytest.fixture(scope="module")
async def full() -> AsyncIterator[Sandbox]:
    async with Sandbox(executor=UNRESTRICTED, warm=1, require="all") as sandbox:
        yield sandbox


@pytest.fixture(scope="module")
async def unfiltered() -> AsyncIterator[Sandbox]:
    """Every layer but seccomp and Landlock, so a program can look at its own process."""
    async with Sandbox(executor=UNRESTRICTED, warm=1, layers=OPTIONAL_LAYERS - {"seccomp", "landlock"},
                       require="all") as sandbox:
        yield sandbox


@pytest.fixture(scope="module")
async def bare() -> AsyncIterator[Sandbox]:
    """No optional layer: only the process, environment, directory, descriptor and rlimit layers."""
    async with Sandbox(executor=UNRESTRICTED, warm=1, layers=()) as sandbox:
        yield sandbox


async def _value(sandbox: Sandbox, program: str, **kwargs: Any) -> Any:
    with anyio.fail_after(20):
        result = await run(sandbox, program, **kwargs)
    assert result.error is None, result.error
    return result.value


# --- reporting --------------------------------------------------------------------------------------


async def test_every_layer_is_reported_active(full: Sandbox, bare: Sandbox) -> None:
    """It reports every layer with everything on, and only the base layers with the options off."""
    assert FULL_LAYERS == ISOLATION_LAYERS
    with anyio.fail_after(20):
        assert (await run(full, "return 1")).stats.isolation == ISOLATION_LAYERS
        assert (await run(bare, "return 1")).stats.isolation == BASE


async def test_the_template_level_layers_can_be_switched_off() -> None:
    """Without the empty root, a worker gets a fresh, empty, unwritable directory of its own instead."""
    layers = OPTIONAL_LAYERS - TEMPLATE_LAYERS - {"seccomp", "landlock"}
    async with Sandbox(executor=UNRESTRICTED, warm=0, layers=layers, require="all") as sandbox:
        with anyio.fail_after(20):
            result = await run(sandbox, """
import os
here = os.getcwd()
try:
    open('note.txt', 'w').close()
    wrote = True
except OSError:
    wrote = False
return [here, os.listdir('.'), wrote, os.path.exists('/etc/passwd')]
""")
    assert result.error is None, result.error
    here, listing, wrote, etc = result.value
    assert Path(here).name.startswith("codemode-worker-") and listing == [] and wrote is False and etc
    assert not {"mount-ns", "pid-ns"} & set(result.stats.isolation)


async def test_the_empty_root_is_the_working_directory_and_leaves_no_directory(unfiltered: Sandbox) -> None:
    """It starts in the empty, read-only root; the template makes no directory on the host for it."""
    value = await _value(unfiltered, """
import errno, os
try:
    open('note.txt', 'w').close()
    wrote = 'wrote'
except OSError as exc:
    wrote = errno.errorcode[exc.errno]
return [os.getcwd(), os.listdir('/'), wrote]
""")
    assert value == ["/", [], "EROFS"]
    prefix = f"codemode-worker-{unfiltered.template_pid}-"
    assert not [name for name in os.listdir(tempfile.gettempdir()) if name.startswith(prefix)]


async def test_the_environment_is_empty(full: Sandbox) -> None:
    """It starts the program with no environment variables at all."""
    assert os.environ  # the host has some
    assert await _value(full, "import os\nreturn dict(os.environ)") == {}


async def test_only_the_protocol_channel_is_inherited(unfiltered: Sandbox) -> None:
    """It keeps fd 3 (a socket) and /dev/null on 0-2; nothing else from the host or the template."""
    secret = os.open("/etc/hostname", os.O_RDONLY)
    os.set_inheritable(secret, True)
    try:
        value = await _value(unfiltered, """
import fcntl, os, stat
found = {}
for fd in range(256):
    try:
        fcntl.fcntl(fd, fcntl.F_GETFD)
    except OSError:
        continue
    mode = os.fstat(fd).st_mode
    found[str(fd)] = ['char' if stat.S_ISCHR(mode) else 'socket' if stat.S_ISSOCK(mode)
                      else 'other', os.fstat(fd).st_rdev]
return found
""")
    finally:
        os.close(secret)
    null = os.stat("/dev/null").st_rdev
    assert {value[fd][0] for fd in ("0", "1", "2")} == {"char"}
    assert {value[fd][1] for fd in ("0", "1", "2")} == {null}
    assert value["3"][0] == "socket"
    others = {fd: kind for fd, kind in value.items() if fd not in ("0", "1", "2", "3")}
    # What remains is the worker's own event loop: its epoll descriptor and its wake-up socket pair.
    assert len(others) <= 3 and all(kind[0] in ("socket", "other") for kind in others.values())


async def test_the_host_sees_every_layer_in_proc(full: Sandbox) -> None:
    """From outside, /proc shows a worker with its own uid, no capabilities, no_new_privs, a seccomp
    filter, and namespaces (mount, PID, IPC, UTS, network) none of which is the host's."""
    seen: dict[str, Any] = {}

    async def inspect_worker(name: str, args: Any) -> Any:
        pid = int(args["pid"])
        with open(f"/proc/{pid}/status", encoding="ascii") as handle:  # noqa: ASYNC230 (procfs: instant)
            status = dict(line.split(":", 1) for line in handle.read().splitlines())
        seen["status"] = {key: value.split() for key, value in status.items()}
        seen["ns"] = {name: os.readlink(f"/proc/{pid}/ns/{name}") != os.readlink(f"/proc/self/ns/{name}")
                      for name in ("mnt", "pid", "ipc", "uts", "net")}
        seen["pid"] = pid
        return None

    program = "from codemode.sandbox.worker import host_pid\nawait tools.inspect(pid=host_pid())\nreturn 1"
    with anyio.fail_after(20):
        result = await full.run(program, tool_names=("inspect",), call_tool=inspect_worker)
    assert result.error is None and result.stats.worker_pid == seen["pid"]
    status = seen["status"]
    uid = str(200_000 + seen["pid"])
    assert status["Uid"] == [uid] * 4 and status["Gid"] == [uid] * 4 and status["Groups"] == []
    assert status["CapEff"] == status["CapPrm"] == ["0000000000000000"]
    assert status["NoNewPrivs"] == ["1"] and status["Seccomp"] == ["2"]
    assert seen["ns"] == {"mnt": True, "pid": True, "ipc": True, "uts": True, "net": True}


async def test_each_worker_has_its_own_uid(unfiltered: Sandbox) -> None:
    """It gives concurrent workers distinct uids, so they cannot signal or trace each other."""
    results = []

    async def one() -> None:
        results.append(await _value(unfiltered, "import os\nreturn os.getuid()"))

    with anyio.fail_after(20):
        async with anyio.create_task_group() as group:
            for _ in range(3):
                group.start_soon(one)
    assert len(set(results)) == 3 and 0 not in results


async def test_a_worker_left_as_root_drops_every_capability(bare: Sandbox) -> None:
    """Without the uid layer the worker stays uid 0 but holds no capability, so its limits stay put."""
    value = await _value(bare, """
import os, resource
status = dict(line.split(':', 1) for line in open('/proc/self/status').read().splitlines())
try:
    resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))
    raised = True
except ValueError:
    raised = False
return [os.getuid(), status['CapEff'].strip(), status['CapBnd'].strip(), raised]
""")
    assert value == [0, "0000000000000000", "0000000000000000", False]


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
        async with Sandbox(executor=UNRESTRICTED, warm=0, layers=("netns",)) as netns_only:
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
    async with Sandbox(executor=UNRESTRICTED, warm=0, layers=("uid",)) as uid_only:
        assert await _value(uid_only, program) == "BlockingIOError"  # EAGAIN from RLIMIT_NPROC=0


# --- failing closed ---------------------------------------------------------------------------------


def test_require_names_only_layers_the_sandbox_attempts() -> None:
    """It refuses unknown layer names, a layer switched off by ``layers=``, and a malformed value."""
    with pytest.raises(SandboxUsageError, match="unknown isolation layers"):
        Sandbox(require=["seccomp", "selinux"])
    with pytest.raises(SandboxUsageError, match="switches off"):
        Sandbox(layers=OPTIONAL_LAYERS - {"seccomp"}, require=["seccomp"])
    with pytest.raises(SandboxUsageError, match="require must be"):
        Sandbox(require="seccomp")
    Sandbox(layers=(), require="all")  # the base layers only: fine


_WITHOUT_ROOT = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
assert libc.unshare(0x10000000) == 0, os.strerror(ctypes.get_errno())  # CLONE_NEWUSER
for name, text in (("setgroups", "deny"), ("uid_map", "0 0 1"), ("gid_map", "0 0 1")):
    with open(f"/proc/self/{name}", "w") as handle:
        handle.write(text)
import anyio, json
from codemode.sandbox import Sandbox, SandboxIsolationError
async def tool(name, args):
    return args
async def main():
    async with Sandbox(warm=0) as sandbox:
        result = await sandbox.run('return 1', tool_names=(), call_tool=tool)
    try:
        async with Sandbox(require=["uid", "seccomp"]):
            raised = None
    except SandboxIsolationError as exc:
        raised = [exc.code, list(exc.missing), exc.message]
    print(json.dumps([result.value, list(result.stats.isolation), raised]))
anyio.run(main)
"""


def test_a_missing_layer_is_reported_and_a_required_one_fails_the_start() -> None:
    """In a user namespace that maps only root (where no worker can get a uid of its own), a run
    reports the uid layer missing, and a sandbox requiring it refuses to start, naming it."""
    found = subprocess.run([sys.executable, "-c", _WITHOUT_ROOT],
                           capture_output=True, text=True, timeout=60, cwd=str(Path(__file__).parents[2]))
    assert found.returncode == 0, found.stderr
    value, isolation, raised = json.loads(found.stdout.strip().splitlines()[-1])
    assert value == 1 and "uid" not in isolation and "seccomp" in isolation and "rlimits" in isolation
    code, missing, message = raised
    assert code == "SANDBOX_ISOLATION_MISSING" and missing == ["uid"]
    assert "uid needs root" in message


# --- the preload list: nothing is imported after the file system is gone ----------------------------


async def test_an_import_after_the_pivot_fails_loudly(full: Sandbox) -> None:
    """It fails a lazy import of a module the template did not load with an error naming PRELOAD."""
    value = await _value(full, """
try:
    import tomllib
    return 'imported'
except ModuleNotFoundError as exc:
    return str(exc)
""")
    assert "PRELOAD" in value and "'tomllib'" in value


#: Programs exercising lazily-initialised paths of the standard library (codecs, unicode names, hash
#: providers, strptime, ...): each must give the same outcome in a real worker, after the pivot, as in
#: this process with every file at hand: under the sandbox's interpreter, and as plain CPython.
LAZY_PATHS = {
    "strptime": "import datetime\n"
                "return str(datetime.datetime.strptime('2024-02-29 13:05', '%Y-%m-%d %H:%M'))",
    "strftime": "import datetime\nreturn datetime.date(2024, 2, 29).strftime('%A %d %B %Y %j')",
    "codecs": "pairs = [('idna', 'b\u00fccher.example'), ('cp1252', 'caf\u00e9'), "
              "('utf-16-le', 'caf\u00e9'), ('mac-roman', 'caf\u00e9'), ('cp437', 'caf\u00e9'), "
              "('shift_jis', '\u65e5\u672c'), "
              "('utf-8-sig', 'x'), ('koi8-r', '\u0416'), ('big5', '\u65e5'), ('punycode', 'b\u00fccher')]\n"
              "return [[name, text.encode(name).hex()] for name, text in pairs]",
    "decode": "return [bytes([0xe9, 0x41]).decode(name) for name in ('cp1252', 'iso8859-15', 'cp850')]",
    "unicode-names": "import re\nreturn [bool(re.match('\\\\N{GREEK SMALL LETTER ALPHA}', '\u03b1')), "
                     "'\\N{BLACK STAR}']",
    "hashes": "import hashlib\nreturn [[name, hashlib.new(name, b'x').hexdigest()] "
              "for name in sorted(hashlib.algorithms_guaranteed) if not name.startswith('shake')]",
    "decimal": "import decimal\n"
               "return [str(decimal.Decimal('1.10') * 3), format(decimal.Decimal('1234.5'), ',.2f')]",
    "fractions-statistics": "import fractions, statistics\nreturn [str(fractions.Fraction('3/7') ** 2), "
                            "statistics.median([3, 1, 2]), round(statistics.stdev([1.0, 2.0, 4.0]), 9)]",
    "json-re-textwrap": "import json, re, textwrap, string\nreturn [json.dumps({'a': [1, 2.5]}, indent=1), "
                        "re.sub(r'(?i)B', '-', 'abcB'), textwrap.fill('word ' * 20, 30), "
                        "string.Template('$x!').substitute(x='hi')]",
    "dataclasses-enum-typing": "import dataclasses, enum, typing\n@dataclasses.dataclass\nclass P:\n"
                               "    x: int = 1\nclass C(enum.Enum):\n    A = 1\nreturn [repr(P()), C.A.name, "
                               "str(typing.Optional[int])]",
    "asyncio": "import asyncio\nasync def f(i):\n    await asyncio.sleep(0.001)\n    return i\n"
               "return await asyncio.gather(*(f(i) for i in range(3)))",
    "uuid-random": "import uuid, random\nreturn [len(str(uuid.uuid4())), random.Random(7).random()]",
}


async def _no_call(name: str, args: Any) -> Any:
    raise AssertionError(name)


def _outcome(value: Any, error: str | None) -> Any:
    """A run's value, or the last line of its error (the exception, without traceback lines)."""
    return value if error is None else ["error", error.strip().splitlines()[-1]]


async def _interpreted_in_process(program: str) -> Any:
    _preload.warm_lazy_state()  # (this process then holds what the template holds: strptime's module)
    compiled = compile_program(program, module_scope=False)  # (as a one-shot worker compiles it)
    outcome = await run_program(compiled, tool_names=(), call_tool=_no_call, log=lambda text: None)
    return _outcome(outcome.value, outcome.error_message)


async def _plain_in_process(program: str) -> Any:
    namespace: dict[str, Any] = {}
    source = "async def __unrestricted_program__():\n" + textwrap.indent(program, "    ")
    exec(compile(source, "<plain>", "exec"), namespace)
    try:
        return json.loads(json.dumps(await namespace["__unrestricted_program__"]()))
    except Exception as exc:
        return ["error", f"{type(exc).__name__}: {exc}"]


@pytest.fixture(scope="module")
async def interpreter() -> AsyncIterator[Sandbox]:
    async with Sandbox(warm=1, require="all") as sandbox:
        yield sandbox


@pytest.mark.parametrize("name", sorted(LAZY_PATHS))
async def test_lazy_paths_work_after_the_pivot_as_before_it(interpreter: Sandbox, full: Sandbox,
                                                            name: str) -> None:
    """It gives the same outcome in a worker without a file system as in this process, both under the
    sandbox's interpreter and as plain CPython (where everything these programs touch must work)."""
    program = LAZY_PATHS[name]
    with anyio.fail_after(20):
        interpreted = await interpreter.run(program, tool_names=(), call_tool=_no_call)
        plain = await full.run(program, tool_names=(), call_tool=_no_call)
    assert _outcome(interpreted.value, interpreted.error and interpreted.error.message) == \
        await _interpreted_in_process(program)
    assert plain.error is None, plain.error
    assert plain.value == await _plain_in_process(program)


#: Function-level imports of the allowed modules that no program can reach (with the reason).
UNREACHABLE_LAZY_IMPORTS = {
    "getopt": "base64.main, the command line",
    "argparse": "calendar.main, the command line",
    "doctest": "difflib._test, its self-test",
    "grp": "pathlib.Path.group (concrete paths are not exposed)",
    "pwd": "pathlib.Path.owner and os.path.expanduser (neither is exposed)",
    "_md5": "hashlib's fallback when OpenSSL lacks md5 (it has it: the template hashes with every one)",
    "_sha1": "hashlib's fallback when OpenSSL lacks sha1",
    "_sha256": "hashlib's fallback when OpenSSL lacks sha224/sha256",
    "_sha512": "hashlib's fallback when OpenSSL lacks sha384/sha512",
    "_sha3": "hashlib's fallback when OpenSSL lacks sha3",
    "_blake2": "hashlib's fallback when OpenSSL lacks blake2",
}


def _lazy_imports(module_name: str) -> set[str]:
    """Absolute names of the modules ``module_name`` imports inside functions (not at its top level)."""
    module = importlib.import_module(module_name)
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(module)))
    except (OSError, TypeError):
        return set()  # (a C module)
    package = module_name if hasattr(module, "__path__") else module_name.rpartition(".")[0]
    found: set[str] = set()
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(function):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = package
                for _ in range(node.level - 1):
                    base = base.rpartition(".")[0]
                target = (f"{base}.{node.module}" if node.module else base) if node.level else node.module
                if target:
                    found.add(target)
                    found.update(f"{target}.{alias.name}" for alias in node.names
                                 if importlib.util.find_spec(target) is not None
                                 and _is_module(f"{target}.{alias.name}"))
    return found


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


async def test_every_lazy_import_of_the_allowed_modules_is_preloaded(full: Sandbox) -> None:
    """It has every module that an allowed module (or a submodule a worker holds) or the sandbox's own
    code imports inside a function in the worker already, or names why no program can reach it.

    A module a facade gains later (csv, zoneinfo, ...) fails here until it and its lazy imports are
    in the template's PRELOAD."""
    loaded = set(await _value(full, "import sys\nstored = sys.modules['codemode.sandbox._preload']._STORED\n"
                                    "return sorted(sys.modules) + sorted(stored)"))
    roots = sorted(ALLOWED_MODULES) + [name for name in loaded if name.startswith("codemode.sandbox.")
                                       and "testing" not in name]
    scanned = {name for name in loaded for root in ALLOWED_MODULES if name.startswith(root + ".")}
    missing = {}
    for name in sorted(set(roots) | scanned):
        for target in _lazy_imports(name):
            if target not in loaded and target not in UNREACHABLE_LAZY_IMPORTS and _is_module(target):
                missing[target] = name
    assert missing == {}, f"lazily imported by these modules but not preloaded: {missing}"


# --- the worker's own failures ----------------------------------------------------------------------


async def test_a_refused_call_in_the_program_says_what_refused_it(full: Sandbox) -> None:
    """It adds to an EPERM failure that the seccomp allowlist refused a call, and where the list is."""
    with anyio.fail_after(20):
        result = await run(full, "import os\nos.listdir('/')")
    assert result.error is not None and result.error.kind == "exception"
    assert "PermissionError: [Errno 1]" in result.error.message
    assert "seccomp" in result.error.message and "codemode.sandbox._seccomp" in result.error.message


async def test_a_refused_call_in_the_workers_own_code_is_a_clear_worker_exit(full: Sandbox) -> None:
    """It reports the worker's own refused call (exit status EXIT_REFUSED) as the allowlist's fault."""
    program = """
import gc, socket, sys
worker = sys.modules['codemode.sandbox.worker']
channel = [o for o in gc.get_objects() if type(o) is worker._Channel][0]
# A socket object on fd 0 (made without a system call): the worker's own send of the done frame then
# uses a descriptor the allowlist does not list.
channel.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM, 0, fileno=0)
return 1
"""
    with anyio.fail_after(20):
        result = await run(full, program)
    assert result.error is not None and result.error.kind == "worker-exit", result.error
    assert "seccomp" in result.error.message and "allowlist" in result.error.message


async def test_the_template_exits_when_its_pid_namespace_holder_dies() -> None:
    """It ends the template (and with the namespace every worker) once the namespace's init is gone,
    instead of failing forks one by one; the sandbox then replaces the template, so a later run succeeds
    in a new template's namespace."""
    async with Sandbox(warm=1, require="all") as sandbox:
        with anyio.fail_after(20):
            await sandbox.wait_warm()
        template = sandbox.template_pid
        assert template is not None
        holders = _namespace_inits(template)
        assert len(holders) == 1 and holders[0] not in sandbox.live_worker_pids
        workers = sandbox.live_worker_pids
        os.kill(holders[0], signal.SIGKILL)
        for _ in range(200):  # (the kernel kills the namespace, the template reaps and exits)
            if not pid_alive(template) and not any(pid_alive(pid) for pid in workers):
                break
            await anyio.sleep(0.05)
        assert not pid_alive(template) and not any(pid_alive(pid) for pid in workers)
        with anyio.fail_after(10):
            result = await run(sandbox, "return 1")
        assert result.ok and result.value == 1, result.error
        assert sandbox.template_pid not in (None, template)
        assert sandbox.health().template_restarts >= 1


def _namespace_inits(template: int) -> list[int]:
    """The template's children that are pid 1 in their own (innermost) PID namespace."""
    found = []
    for child in Path(f"/proc/{template}/task/{template}/children").read_text().split():
        for line in Path(f"/proc/{child}/status").read_text().splitlines():
            if line.startswith("NSpid:") and line.split()[-1] == "1":
                found.append(int(child))
    return found


async def test_only_workers_under_seccomp_share_the_templates_network_namespace() -> None:
    """Under seccomp a worker keeps the template's namespace (no interface, and it can make no socket);
    without seccomp each worker unshares one of its own. Neither is ever the host's."""
    host = os.readlink("/proc/self/ns/net")
    async with Sandbox(warm=2) as filtered, Sandbox(warm=2, layers=OPTIONAL_LAYERS - {"seccomp"}) as bare_:
        with anyio.fail_after(20):
            await filtered.wait_warm()
            await bare_.wait_warm()
        namespaces = {}
        for name, sandbox in (("filtered", filtered), ("bare", bare_)):
            assert sandbox.template_pid is not None and len(sandbox.live_worker_pids) == 2
            namespaces[name] = (os.readlink(f"/proc/{sandbox.template_pid}/ns/net"),
                                {os.readlink(f"/proc/{pid}/ns/net") for pid in sandbox.live_worker_pids})
    template, workers = namespaces["filtered"]
    assert workers == {template} and template != host
    template, workers = namespaces["bare"]
    assert len(workers) == 2 and template not in workers and host not in workers
