"""Harness of the escape suite: every attack is proven real under plain CPython, then blocked.

An :class:`Attack` is a program (the body of an async function) whose goal is to read a secret (a file,
mirrored in an environment variable for the format-string family) or to create a file. ``SECRET_PATH``
and ``TARGET_PATH`` in its source are replaced by the paths of this test. The harness

1. runs the *plain* variant (``plain`` or the same source) without any restriction: compiled with
   ``compile()``, real builtins, and either real modules (``mode="plain"``), the sandbox's own facades
   and proxy objects (``mode="facades"``: proves the object itself would leak without the language
   policy) or real modules in a fresh interpreter process (``mode="subprocess"``: for payloads that
   spawn processes), and asserts that the secret came out or the file appeared;
2. runs the attack under the sandbox, both with the in-process executor and through the real isolated
   worker (``Sandbox.run``), and asserts each time that it was rejected at compile time or failed while
   running, that the secret is nowhere in the outcome or the logs, and that the file does not exist.
"""

from __future__ import annotations

import builtins
import dataclasses
import gc
import os
import sys
import textwrap
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import anyio
import anyio.lowlevel
import pytest

from codemode.sandbox import Sandbox
from codemode.sandbox._proxy import ToolCallError, ToolsProxy
from codemode.sandbox.errors import ToolCallFailure
from codemode.sandbox.facades import CURRENT_TASKS, TaskRegistry, guarded_import
from codemode.sandbox.interpreter import ProgramCompileError, compile_program, run_program

Mode = Literal["plain", "facades", "subprocess"]
TOOL_NAMES = ("search", "fail")
SECRET_ENV = "CODEMODE_ESCAPE_SECRET"


@dataclass(frozen=True)
class Attack:
    """One attack program; ``plain`` is its unrestricted variant when the payload must differ."""

    id: str
    source: str
    plain: str | None = None
    mode: Mode = "plain"


def same_attack(attacks: list[Attack], found: str, row: str) -> Attack:
    """The attack another suite keeps under ``found``, entered again as ``row``: one payload, two suites
    (the audit table names an attack per row; the themed suites keep the payloads)."""
    return dataclasses.replace(next(attack for attack in attacks if attack.id == found), id=row)


async def fake_call_tool(name: str, args: Any) -> Any:
    """The host's handler used by the suite: ``fail`` fails, everything else echoes."""
    await anyio.lowlevel.checkpoint()
    if name == "fail":
        raise ToolCallFailure("the tool failed", "TOOL_FAILED")
    return {"tool": name, "args": args}


_SUBPROCESS_RUNNER = """
import asyncio, sys
source = sys.stdin.read()
namespace = {}
exec(compile("async def attack():\\n" + source, "<plain-attack>", "exec"), namespace)
try:
    value = asyncio.run(namespace["attack"]())
except BaseException as exc:
    value = f"{type(exc).__name__}: {exc}"
print(repr(value))
"""


@dataclass
class EscapeHarness:
    """Paths of one test and the two runners."""

    secret: str
    secret_path: Path
    target_path: Path
    worker: Sandbox

    def materialise(self, source: str) -> str:
        text = textwrap.dedent(source).strip("\n")
        return text.replace("SECRET_PATH", repr(str(self.secret_path))).replace(
            "TARGET_PATH", repr(str(self.target_path)))

    async def run_plain(self, attack: Attack) -> str:
        source = self.materialise(attack.plain if attack.plain is not None else attack.source)
        body = textwrap.indent(source, "    ") + "\n"
        if attack.mode == "subprocess":
            with anyio.fail_after(60):
                done = await anyio.run_process([sys.executable, "-c", _SUBPROCESS_RUNNER],
                                               input=body.encode(), check=False)
            return (done.stdout + done.stderr).decode(errors="replace")
        namespace: dict[str, Any] = {"tools": ToolsProxy(TOOL_NAMES, fake_call_tool),
                                     "ToolCallError": ToolCallError}
        if attack.mode == "facades":
            namespace["__builtins__"] = {**vars(builtins), "__import__": guarded_import}
        exec(compile("async def attack():\n" + body, "<plain-attack>", "exec"), namespace)
        registry = TaskRegistry()
        token = CURRENT_TASKS.set(registry)
        try:
            with anyio.fail_after(20):
                value = await namespace["attack"]()
        except BaseException as exc:  # the payload's own failure is data here
            value = f"{type(exc).__name__}: {exc}"
        finally:
            await registry.aclose()
            CURRENT_TASKS.reset(token)
        return repr(value)

    async def run_sandboxed(self, attack: Attack) -> tuple[bool, str]:
        """``(blocked, everything the program produced)``."""
        source = self.materialise(attack.source)
        try:
            compiled = compile_program(source)
        except ProgramCompileError as exc:
            return True, f"rejected: {exc}"
        logs: list[str] = []
        with anyio.fail_after(20):
            outcome = await run_program(compiled, tool_names=TOOL_NAMES, call_tool=fake_call_tool,
                                        log=logs.append)
        return outcome.error_kind is not None, "\n".join([repr(outcome), *logs])

    async def run_in_worker(self, attack: Attack) -> tuple[bool, str]:
        """The same through the real isolated worker (``Sandbox.run``)."""
        with anyio.fail_after(30):
            result = await self.worker.run(self.materialise(attack.source), tool_names=TOOL_NAMES,
                                           call_tool=fake_call_tool)
        return result.error is not None, "\n".join([repr(result), *result.logs])

    def goal_reached(self, output: str) -> bool:
        return self.secret in output or self.target_path.exists()

    async def check(self, attack: Attack) -> None:
        plain_output = await self.run_plain(attack)
        gc.collect()  # payloads leak files in reference cycles: close them while our filters apply
        assert self.goal_reached(plain_output), f"payload is not real under plain CPython: {plain_output}"
        if self.target_path.exists():
            self.target_path.unlink()
        for runner in (self.run_sandboxed, self.run_in_worker):
            blocked, output = await runner(attack)
            assert self.secret not in output, output
            assert not self.target_path.exists(), "the attack created a file"
            assert blocked, f"the attack ran to completion: {output}"


@pytest.fixture(scope="session")
async def worker_sandbox() -> AsyncIterator[Sandbox]:
    """One warm worker supply for the whole suite (every run still gets a fresh worker process)."""
    async with Sandbox() as sandbox:
        yield sandbox


@pytest.fixture
def escape(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
           worker_sandbox: Sandbox) -> Iterator[EscapeHarness]:
    secret = f"S3CRET-{uuid.uuid4().hex}"
    secret_path = tmp_path / "secret.txt"
    secret_path.write_text(secret + "\n")
    monkeypatch.setenv(SECRET_ENV, secret)
    harness = EscapeHarness(secret=secret, secret_path=secret_path, target_path=tmp_path / "created.txt",
                            worker=worker_sandbox)
    yield harness
    os.environ.pop(SECRET_ENV, None)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Plain-CPython payloads leak file handles and coroutines on purpose: do not turn that into errors."""
    here = Path(__file__).parent
    for item in items:
        if Path(str(item.fspath)).parent == here:
            item.add_marker(pytest.mark.filterwarnings("ignore::ResourceWarning"))
            item.add_marker(pytest.mark.filterwarnings("ignore::RuntimeWarning"))
            item.add_marker(pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"))


#: Driving a coroutine by hand through its class hands out the event loop's futures, and the loop, whose
#: subprocess API reads the secret (the payload of two suites: the helper names and the audit table).
LOOP_THROUGH_COROUTINE_SEND = """
        import asyncio
        async def tick():
            await asyncio.sleep(0.01)
        c = tick()
        try:
            future = type(c).send(c, None)
        finally:
            c.close()
        loop = type(future).get_loop(future)
        chunks = []
        class Reader:
            def connection_made(self, transport):
                pass
            def pipe_data_received(self, fd, data):
                chunks.append(data)
            def pipe_connection_lost(self, fd, exc):
                pass
            def process_exited(self):
                pass
            def connection_lost(self, exc):
                pass
        transport, protocol = await loop.subprocess_exec(Reader, "cat", SECRET_PATH)
        for attempt in range(250):
            if chunks:
                break
            await asyncio.sleep(0.02)
        transport.close()
        return b"".join(chunks).decode()
"""
