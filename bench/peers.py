"""Peer adapters: every executor the benchmark compares, behind one small async interface.

A peer is an async context manager with ``name``, ``note`` (what it isolates, in a few words),
``unsupported(workload) -> str | None`` (the reason it cannot run a workload, for an "n/a" cell) and
``async run(workload) -> value`` (run the program once, return its value, raise on failure). The
runner times ``run`` from the outside, so every peer is measured the same way: program text in, value
out, compile included, on a warm peer (pools and templates are started by ``__aenter__``).

Peers: plain CPython ``exec`` (the physical limit, no isolation), RestrictedPython in-process,
smolagents' ``LocalPythonExecutor`` (a tree-walking interpreter), pydantic-monty (a Rust interpreter in
worker processes, sync and async APIs), and codemode twice: the bare sandbox (``Sandbox.run`` with a
plain host handler) and ``run_code`` end to end (every tool call a child dispatch through the runtime's
pipeline and sub-lane).
"""

from __future__ import annotations

import asyncio
import contextlib
import cProfile
import io
import operator
import pstats
import textwrap
import types
import warnings
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, ClassVar, Self

import anyio

from bench.workloads import ASYNC_TOOLS, SYNC_TOOLS, TOOL_NAMES, Workload
from codemode.sandbox import interpreter as _interpreter

__all__ = (
    "CPythonPeer",
    "CodemodeRunCodePeer",
    "CodemodeSandboxPeer",
    "MontyAsyncPeer",
    "MontySyncPeer",
    "Peer",
    "PeerFailure",
    "RestrictedPythonPeer",
    "SmolagentsPeer",
    "all_peers",
)

_SETTLE_SECONDS = 0.01
_NO_ASYNC = "no async/await (the workload needs asyncio.gather)"


class PeerFailure(Exception):
    """A peer ran the program but reported an error (the message says which and why)."""


class Peer:
    """Base: a warm executor that runs one workload program per ``run`` call."""

    name: ClassVar[str] = "peer"
    note: ClassVar[str] = ""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        return None

    def unsupported(self, workload: Workload) -> str | None:
        """Why this peer cannot run ``workload`` (None when it can)."""
        return None

    async def quiesce(self) -> None:
        """Finish background work before another peer is timed (default: there is none)."""
        return None

    async def run(self, workload: Workload) -> Any:
        """Run the program once and return its value."""
        raise NotImplementedError


def _discard(*args: Any, **kwargs: Any) -> None:
    return None


def _wrap(header: str, body: str) -> str:
    return header + "\n" + textwrap.indent(body, "    ")


# --- plain CPython --------------------------------------------------------------------------------

class CPythonPeer(Peer):
    """``compile`` + ``exec`` of the program as an ``async def`` in this process: no isolation at all."""

    name = "cpython-exec"
    note = "in-process exec, no isolation (the physical limit)"

    async def run(self, workload: Workload) -> Any:
        code = compile(_wrap("async def program(tools):", workload.body), "<program>", "exec")
        namespace: dict[str, Any] = {"print": _discard}
        exec(code, namespace)
        return await namespace["program"](types.SimpleNamespace(**ASYNC_TOOLS))


# --- RestrictedPython -----------------------------------------------------------------------------

_INPLACE: Mapping[str, Callable[[Any, Any], Any]] = {
    "+=": operator.iadd, "-=": operator.isub, "*=": operator.imul, "/=": operator.itruediv,
    "//=": operator.ifloordiv, "%=": operator.imod,
}


class RestrictedPythonPeer(Peer):
    """``compile_restricted`` with the standard guards, run in this process (no process isolation)."""

    name = "restrictedpython"
    note = "in-process, AST-rewriting guards, no isolation"

    def __init__(self) -> None:
        from RestrictedPython import compile_restricted, limited_builtins, safe_builtins, utility_builtins
        from RestrictedPython.Eval import default_guarded_getitem, default_guarded_getiter
        from RestrictedPython.Guards import full_write_guard, guarded_iter_unpack_sequence, safer_getattr
        from RestrictedPython.PrintCollector import PrintCollector

        self._compile = compile_restricted
        builtins = {**safe_builtins, **limited_builtins, **utility_builtins,
                    "dict": dict, "sum": sum, "enumerate": enumerate, "max": max, "min": min, "set": set,
                    "sorted": sorted, "range": range}  # the limited range() caps at 1,000 elements
        self._globals: dict[str, Any] = {
            "__builtins__": builtins, "_getattr_": safer_getattr, "_getitem_": default_guarded_getitem,
            "_getiter_": default_guarded_getiter, "_iter_unpack_sequence_": guarded_iter_unpack_sequence,
            "_write_": full_write_guard, "_inplacevar_": lambda op, x, y: _INPLACE[op](x, y),
            "_print_": PrintCollector,
        }

    def unsupported(self, workload: Workload) -> str | None:
        return None if workload.sync_body is not None else "refuses async def/await: " + _NO_ASYNC

    async def run(self, workload: Workload) -> Any:
        assert workload.sync_body is not None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)  # "prints, but never reads 'printed'"
            code = self._compile(_wrap("def program(tools):", workload.sync_body), "<program>", "exec")
        namespace = dict(self._globals)
        exec(code, namespace)
        return namespace["program"](types.SimpleNamespace(**SYNC_TOOLS))


# --- smolagents -----------------------------------------------------------------------------------

class SmolagentsPeer(Peer):
    """smolagents' ``LocalPythonExecutor`` as shipped (its own thread-based timeout), one warm instance."""

    name = "smolagents"
    note = "in-process tree-walking interpreter, not a security boundary"

    async def __aenter__(self) -> Self:
        from smolagents.local_python_executor import LocalPythonExecutor

        self._executor = LocalPythonExecutor(additional_authorized_imports=[])
        self._executor.send_tools({})
        self._executor.send_variables({"tools": types.SimpleNamespace(**SYNC_TOOLS)})
        return self

    def unsupported(self, workload: Workload) -> str | None:
        return None if workload.sync_body is not None else _NO_ASYNC

    async def run(self, workload: Workload) -> Any:
        assert workload.sync_body is not None
        source = _wrap("def program():", workload.sync_body) + "\nprogram()\n"
        return self._executor(source).output


# --- pydantic-monty -------------------------------------------------------------------------------

_MONTY_LIMITS: Mapping[str, Any] = {"max_suspensions": 1_000_000}


class MontySyncPeer(Peer):
    """pydantic-monty's sync API: ``feed_run`` on a checked-out session of a warm worker pool."""

    name = "monty-sync"
    note = "Rust interpreter in a worker subprocess (sync API, warm session feed)"

    async def __aenter__(self) -> Self:
        import pydantic_monty

        self._stack = contextlib.ExitStack()
        pool = self._stack.enter_context(pydantic_monty.Monty())
        module = pydantic_monty.ExternalModule(dict(SYNC_TOOLS))
        self._session = self._stack.enter_context(
            pool.checkout(limits=dict(_MONTY_LIMITS), external_modules={"tools": module}))  # type: ignore[arg-type]
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        self._stack.close()

    def unsupported(self, workload: Workload) -> str | None:
        return None if workload.sync_body is not None else "the sync API has no awaitable host calls"

    async def run(self, workload: Workload) -> Any:
        assert workload.sync_body is not None
        source = "import tools\n" + _wrap("def program():", workload.sync_body) + "\nprogram()\n"
        return self._session.feed_run(source, print_callback=lambda stream, text: None)


class MontyAsyncPeer(Peer):
    """pydantic-monty's async API (``AsyncMonty``): coroutine host functions, ``asyncio.gather`` works."""

    name = "monty-async"
    note = "Rust interpreter in a worker subprocess (async API, warm session feed)"

    async def __aenter__(self) -> Self:
        import pydantic_monty

        self._stack = contextlib.AsyncExitStack()
        pool = await self._stack.enter_async_context(pydantic_monty.AsyncMonty())
        module = pydantic_monty.ExternalModule(dict(ASYNC_TOOLS))
        self._session = await self._stack.enter_async_context(
            pool.checkout(limits=dict(_MONTY_LIMITS), external_modules={"tools": module}))  # type: ignore[arg-type]
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self._stack.aclose()

    async def run(self, workload: Workload) -> Any:
        source = ("import tools\n" + _wrap("async def program():", workload.body)
                  + "\nawait program()\n")
        return await self._session.feed_run(source, print_callback=lambda stream, text: None)


# --- codemode -------------------------------------------------------------------------------------

async def _host_call(name: str, args: Any) -> Any:
    return await ASYNC_TOOLS[name](**args)


class CodemodeSandboxPeer(Peer):
    """codemode's sandbox alone: a fresh isolated worker per run from the warm supply."""

    name = "codemode-sandbox"
    note = ("fresh forked worker per run: empty root, PID/IPC/UTS/network namespaces, uid, rlimits, "
            "Landlock, seccomp allowlist + RestrictedPython")

    def __init__(self, *, wait_warm: bool = True) -> None:
        self.wait_warm = wait_warm
        self.last_stats: Any = None

    async def __aenter__(self) -> Self:
        from codemode.sandbox import Sandbox

        self.sandbox = Sandbox()
        await self.sandbox.__aenter__()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.sandbox.aclose()

    async def prepare(self) -> None:
        """Called untimed before each run: let the warm supply refill and the last worker be reaped.

        That is the state the issue's latency targets name ("on a warm worker supply"); without the
        short settle, the previous run's reaping and the refill's fork compete with the timed run for
        the machine's two cores.
        """
        if self.wait_warm:
            await self.sandbox.wait_warm()
            await anyio.sleep(_SETTLE_SECONDS)

    async def quiesce(self) -> None:
        """Wait for the warm supply's refill, so that it does not run during another peer's timing."""
        await self.sandbox.wait_warm()

    async def run(self, workload: Workload) -> Any:
        result = await self.sandbox.run(workload.body, tool_names=TOOL_NAMES, call_tool=_host_call)
        self.last_stats = result.stats
        if result.error is not None:
            raise PeerFailure(f"{result.error.kind}: {result.error.message}")
        return result.value


def bench_tool_definitions() -> list[Any]:
    """Runtime definitions of the workload tools (concurrency-safe, permissive schemas)."""
    from codemode.runtime import ToolOutput, define_tool, text_block

    definitions = []
    for name in TOOL_NAMES:
        function = ASYNC_TOOLS[name]

        async def execute(args: Any, ctx: Any, function: Any = function) -> Any:
            return await function(**args)

        definitions.append(define_tool(
            name=name, description=f"benchmark tool {name}", parameters={},
            output=ToolOutput(schema={"type": "object"}, render=lambda a, v: [text_block("ok")]),
            execute=execute, is_concurrency_safe=lambda args: True))
    return definitions


class CodemodeRunCodePeer(CodemodeSandboxPeer):
    """codemode end to end: ``rt.execute("run_code", ...)``, each tool call a child dispatch."""

    name = "codemode-run_code"
    note = "run_code end to end: pipeline + sub-lane + sandbox worker"

    async def __aenter__(self) -> Self:
        from codemode.runtime import Agent, ToolRuntime
        from codemode.tools.run_code import PythonCodeRuntime

        self._stack = contextlib.AsyncExitStack()
        code_runtime = await self._stack.enter_async_context(PythonCodeRuntime())
        self.sandbox = code_runtime.sandbox
        self.rt = await self._stack.enter_async_context(ToolRuntime("code", code_runtime=code_runtime))
        for definition in bench_tool_definitions():
            self.rt.register(definition)
        self._agent_type = Agent
        self._runs = 0
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self._stack.aclose()

    async def run(self, workload: Workload) -> Any:
        self._runs += 1
        result = await self.rt.execute("run_code", {"code": workload.body, "description": workload.name},
                                       agent=self._agent_type(f"bench-{self._runs}"),
                                       call_id=f"run-{self._runs}")
        if result.is_error:
            raise PeerFailure(result.error.message if result.error else "run_code failed")
        return result.value.get("result")


def all_peers() -> list[Peer]:
    """One fresh instance of every peer, in table order."""
    return [CPythonPeer(), RestrictedPythonPeer(), SmolagentsPeer(), MontySyncPeer(), MontyAsyncPeer(),
            CodemodeSandboxPeer(), CodemodeRunCodePeer()]


async def _smoke() -> None:  # pragma: no cover - a manual check: python -m bench.peers
    from bench.workloads import WORKLOADS

    for peer in all_peers():
        async with peer:
            for workload in WORKLOADS:
                reason = peer.unsupported(workload)
                if reason:
                    print(f"{peer.name:18} {workload.name:16} n/a: {reason}")
                    continue
                try:
                    with anyio.fail_after(60):
                        value = await peer.run(workload)
                    verdict = "ok" if value == workload.expected else f"WRONG {value!r}"
                except Exception as exc:
                    verdict = f"FAILED {type(exc).__name__}: {exc}"
                print(f"{peer.name:18} {workload.name:16} {verdict}")


if __name__ == "__main__":
    asyncio.run(_smoke())


# --- a profiling executor for the worker side (``Sandbox(executor="bench.peers")``) ---------------

def compile_program(source: str) -> Any:
    """Executor protocol: compile with the sandbox's own compiler (see :func:`run_program`)."""
    return _interpreter.compile_program(source)


async def run_program(compiled: Any, *, tool_names: Any, call_tool: Any, log: Any,
                      globals_: dict[str, Any] | None = None) -> Any:
    """Executor protocol: the sandbox's own ``run_program`` under cProfile, the profile as log lines.

    Only the benchmark's profiler uses this (``Sandbox(executor="bench.peers")``). A worker can
    neither import lazily nor write files, so everything is imported at module level (the template
    imports it before forking) and its profile of the run (the program, the guards, the worker's
    frame codec and socket calls) comes back as the run's printed output.
    """
    profile = cProfile.Profile()
    profile.enable()
    try:
        outcome = await _interpreter.run_program(compiled, tool_names=tool_names, call_tool=call_tool,
                                                 log=log, globals_=globals_)
    finally:
        profile.disable()
    stream = io.StringIO()
    pstats.Stats(profile, stream=stream).sort_stats("tottime").print_stats(25)
    for line in stream.getvalue().splitlines():
        log(line)
    return outcome
