"""The ``codemode`` command line.

Each subcommand is one ``_cmd_<name>(args) -> exit code`` function plus a ``_add_<name>(subparsers)``
parser builder, listed in :data:`_COMMANDS`; subcommands living in other modules (``serve``) are listed
in :data:`_LAZY_COMMANDS` and imported only when selected. They share the toolset loader
(:func:`load_toolset`, ``--toolset module:attr``; default: the demo tools, the workspace tools rooted at
``--workspace`` and ``todo_write``) and the runtime factory (:func:`open_runtime`). Each invocation is one
agent session with its own event log (``--events FILE`` writes it as JSON lines).

Exit codes: 0 success, 1 the call/program failed (an error result), 2 usage errors (bad flags, bad JSON,
an unloadable toolset, a mode that cannot work here). Usage errors are one line on stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import anyio

from codemode.runtime import Agent, CodemodeError, ToolCallRequest, ToolDefinition, ToolRuntime, UsageError
from codemode.sandbox.lossless import LosslessJsonError, loads

from .timeout_policy import install_timeout_policy

__all__ = ("CliUsageError", "load_toolset", "main", "open_runtime")

MODES = ("native", "code", "both")
CODE_RUNTIME = "codemode.tools.run_code:PythonCodeRuntime"


class CliUsageError(Exception):
    """A usage problem: printed as one line on stderr, exit code 2."""


def _version() -> str:
    try:
        return version("codemode")
    except PackageNotFoundError:  # running from a source tree
        return "0+unknown"


# ---------------------------------------------------------------------------------- shared plumbing


def load_toolset(spec: str | None, workspace: str | Path = ".") -> list[ToolDefinition]:
    """Load tool definitions from ``module:attr`` (a list of definitions or a callable returning one).

    ``None`` means the built-in toolset: the demo tools, the workspace tools rooted at ``workspace`` and
    ``todo_write``.
    """
    from .toolsets import default_toolset
    from .toolsets import load_toolset as load_named

    if spec is not None:
        try:
            return load_named(spec)
        except UsageError as exc:
            raise CliUsageError(exc.message) from None
    root = Path(workspace)
    if not root.is_dir():
        raise CliUsageError(f"--workspace {workspace}: not a directory")
    return default_toolset(root)


def _code_runtime(mode: str, **options: Any) -> Any:
    module_name, _, attr = CODE_RUNTIME.partition(":")
    try:
        module = importlib.import_module(module_name)
        factory = getattr(module, attr)
    except (ImportError, AttributeError):
        raise CliUsageError(f"--mode {mode} needs a code runtime ({CODE_RUNTIME}), which is not available "
                            "in this installation; use --mode native") from None
    return factory(**options)


@contextlib.asynccontextmanager
async def open_runtime(mode: str = "native", toolset: str | None = None, *, workspace: str | Path = ".",
                       code_options: dict[str, Any] | None = None) -> AsyncIterator[ToolRuntime]:
    """A :class:`~codemode.runtime.ToolRuntime` in ``mode`` with ``toolset`` registered (code runtime if
    needed).

    ``code_options`` are keyword arguments for the code runtime (limits, observers).
    """
    definitions = load_toolset(toolset, workspace)
    async with contextlib.AsyncExitStack() as stack:
        code_runtime = None
        if mode != "native":
            code_runtime = _code_runtime(mode, **(code_options or {}))
            if hasattr(code_runtime, "__aenter__"):
                code_runtime = await stack.enter_async_context(code_runtime)
        runtime = await stack.enter_async_context(ToolRuntime(mode, code_runtime=code_runtime))
        install_timeout_policy(runtime)  # every tool's timeout_ms holds
        for definition in definitions:
            try:
                runtime.register(definition)
            except UsageError as exc:
                raise CliUsageError(f"cannot register tool {definition.name!r}: {exc}") from None
        yield runtime


def _print_json(value: Any) -> None:
    print(json.dumps(value, ensure_ascii=False, indent=2))


def _add_common(parser: argparse.ArgumentParser, *, modes: Sequence[str] = MODES,
                default_mode: str = "native", json_flag: bool = True) -> None:
    parser.add_argument("--mode", choices=modes, default=default_mode,
                        help=f"presentation mode (default {default_mode})")
    parser.add_argument("--toolset", metavar="MODULE:ATTR", default=None,
                        help="tool definitions to load instead of the built-in toolset")
    parser.add_argument("--workspace", metavar="DIR", default=".",
                        help="root of the built-in workspace tools (default: current directory)")
    parser.add_argument("--events", metavar="FILE", default=None,
                        help="write this session's event log to FILE as JSON lines")
    if json_flag:
        parser.add_argument("--json", action="store_true", help="print one JSON object")


def _write_events(args: argparse.Namespace, agent: Agent) -> None:
    if getattr(args, "events", None):
        try:
            Path(args.events).write_text(agent.events.to_jsonl(), encoding="utf-8")
        except OSError as exc:
            raise CliUsageError(f"--events {args.events}: cannot write: {exc.strerror}") from None


# ---------------------------------------------------------------------------------- codemode call


def _add_call(subparsers: Any) -> None:
    parser = subparsers.add_parser("call", help="run one model-level tool call through the full pipeline")
    parser.add_argument("name", help="tool name")
    parser.add_argument("--args", dest="arguments", metavar="JSON", default="{}",
                        help="the call's arguments as a JSON object (default {})")
    _add_common(parser)


def _cmd_call(args: argparse.Namespace) -> int:
    try:
        arguments = loads(args.arguments)
    except LosslessJsonError as exc:
        raise CliUsageError(f"--args is not valid JSON: {exc.reason}") from None

    agent = Agent("cli")

    async def run() -> Any:
        async with open_runtime(args.mode, args.toolset, workspace=args.workspace) as runtime:
            request = ToolCallRequest("cli-1", args.name, json.dumps(arguments))
            results = await runtime.execute_tool_calls([request], agent=agent)
            return results[0]

    result = anyio.run(run)
    _write_events(args, agent)
    if args.json:
        _print_json(result.to_json())
    else:
        text = result.text
        print(text, file=sys.stdout if not result.is_error else sys.stderr)
    return 1 if result.is_error else 0


# ---------------------------------------------------------------------------------- codemode prompt


def _add_prompt(subparsers: Any) -> None:
    parser = subparsers.add_parser("prompt", help="show the tools and prompt sections the model is offered")
    _add_common(parser)


def _cmd_prompt(args: argparse.Namespace) -> int:
    async def run() -> Any:
        async with open_runtime(args.mode, args.toolset, workspace=args.workspace) as runtime:
            return runtime.prompt()

    prompt = anyio.run(run)
    if args.json:
        _print_json(prompt.to_json())
        return 0
    print("Tools offered to the model:")
    for tool in prompt.tools:
        print(f"  {tool['name']}: {tool['description']}")
    for section in prompt.sections:
        print(f"\n## {section.name} (order {section.order})")
        print(section.text or "(empty)")
    return 0


# ---------------------------------------------------------------------------------- codemode run


def _read_program(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CliUsageError(f"program file not found: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CliUsageError(f"cannot read program {path}: {exc}") from None


def _add_run(subparsers: Any) -> None:
    parser = subparsers.add_parser("run", help="run a program through run_code and print its output")
    parser.add_argument("program", help="the program file (the body of an async function), or - for stdin")
    parser.add_argument("--timeout", metavar="S", type=float, default=None,
                        help="wall-clock budget of the program in seconds (default 30)")
    parser.add_argument("--quiet", action="store_true", help="do not stream logs and child calls to stderr")
    _add_common(parser, modes=("code", "both"), default_mode="code")


def _cmd_run(args: argparse.Namespace) -> int:
    from codemode.sandbox import SandboxLimits

    from ._cli_run import RunReport, default_progress, format_table, run_json

    program = _read_program(args.program)
    options: dict[str, Any] = {}
    if args.timeout is not None:
        try:
            options["limits"] = SandboxLimits(wall_seconds=args.timeout)
        except ValueError:
            raise CliUsageError(f"--timeout must be a positive number of seconds, not {args.timeout}") \
                from None
    report = RunReport(progress=default_progress(args.quiet))
    options.update(on_log=report.on_log, on_run=report.on_run)
    agent = Agent("cli")

    async def run() -> Any:
        async with open_runtime(args.mode, args.toolset, workspace=args.workspace,
                                code_options=options) as runtime:
            runtime.around_execute(report.around)
            _report_sandbox_health(runtime, report.progress)
            request = ToolCallRequest("run-1", "run_code",
                                      json.dumps({"code": program, "description": f"run {args.program}"}))
            return (await runtime.execute_tool_calls([request], agent=agent))[0]

    result = anyio.run(run)
    _write_events(args, agent)
    payload = run_json(result, report, agent)
    if args.json:
        _print_json(payload)
    else:
        print(result.text, file=sys.stderr if result.is_error else sys.stdout)
        if payload["dispatches"]:
            print("\n" + format_table(payload["dispatches"], report.elapsed_ms),
                  file=sys.stderr if result.is_error else sys.stdout)
    return 1 if result.is_error else 0


def _report_sandbox_health(runtime: ToolRuntime, stream: Any) -> None:
    """Print the sandbox's health events (its template lost or replaced, the restart breaker) on the
    progress stream; the ``--events`` log has those the run saw as ``code/sandbox`` events."""
    sandbox = getattr(runtime.code_runtime, "sandbox", None)
    if stream is None or sandbox is None:
        return
    sandbox.on_health(lambda event: print(f"  ! sandbox {event.kind}: {event.message}", file=stream,
                                          flush=True))


# ---------------------------------------------------------------------------------- codemode sdk / check


def _signatures(args: argparse.Namespace) -> list[Any]:
    from .run_code import signature_of

    return [signature_of(d) for d in load_toolset(args.toolset, args.workspace)]


def _add_sdk(subparsers: Any) -> None:
    parser = subparsers.add_parser("sdk", help="print the tools:sdk section, or write stubs with --out")
    parser.add_argument("--out", metavar="DIR", default=None,
                        help="write tools.pyi and a PEP 561 stub package into DIR")
    _add_common(parser, modes=("code", "both"), default_mode="code", json_flag=False)


def _cmd_sdk(args: argparse.Namespace) -> int:
    from codemode.sdk import render_python_sdk, write_stub_package

    signatures = _signatures(args)
    if args.out is None:
        print(render_python_sdk(signatures))
        return 0
    try:
        written = write_stub_package(signatures, args.out)
    except OSError as exc:
        raise CliUsageError(f"--out {args.out}: cannot write: {exc}") from None
    for path in written:
        print(path)
    return 0


def _add_check(subparsers: Any) -> None:
    parser = subparsers.add_parser("check", help="type-check a program against the SDK stubs (mypy)")
    parser.add_argument("program", help="the program file, or - for stdin")
    _add_common(parser, modes=("code", "both"), default_mode="code")


def _cmd_check(args: argparse.Namespace) -> int:
    from codemode.sdk import check_program

    program = _read_program(args.program)
    diagnostics = check_program(program, _signatures(args))
    errors = [d for d in diagnostics if d.severity == "error"]
    if args.json:
        _print_json({"ok": not errors, "diagnostics": [
            {"line": d.line, "column": d.column, "severity": d.severity, "message": d.message}
            for d in diagnostics]})
    else:
        for d in diagnostics:
            print(f"{args.program}:{d.line}:{d.column}: {d.severity}: {d.message}")
        if not errors:
            print(f"{args.program}: no type errors")
    return 1 if errors else 0


# ---------------------------------------------------------------------------------- entry point

_COMMANDS: dict[str, tuple[Callable[[Any], None], Callable[[argparse.Namespace], int]]] = {
    "run": (_add_run, _cmd_run),
    "call": (_add_call, _cmd_call),
    "prompt": (_add_prompt, _cmd_prompt),
    "sdk": (_add_sdk, _cmd_sdk),
    "check": (_add_check, _cmd_check),
}

#: Subcommands implemented elsewhere, imported only when selected (their imports can be heavy):
#: name -> (module, "add_arguments(parser)" function, "async run(args) -> exit code" function, help).
_LAZY_COMMANDS: dict[str, tuple[str, str, str, str]] = {
    "serve": ("codemode.tools.mcp_bridge", "add_serve_arguments", "run_serve",
              "offer the tools (or run_code) as an MCP server on stdio"),
}


def _lazy_handler(module: Any, run_name: str) -> Callable[[argparse.Namespace], int]:
    def handler(args: argparse.Namespace) -> int:
        code: int = anyio.run(getattr(module, run_name), args)
        return code

    return handler


def _parser(selected: str | None = None) -> tuple[argparse.ArgumentParser,
                                                  dict[str, Callable[[argparse.Namespace], int]]]:
    parser = argparse.ArgumentParser(prog="codemode", description="Code Mode runner for agent tools.")
    parser.add_argument("--version", action="version", version=f"codemode {_version()}")
    subparsers = parser.add_subparsers(dest="command")
    handlers: dict[str, Callable[[argparse.Namespace], int]] = {}
    for name, (add, handler) in _COMMANDS.items():
        add(subparsers)
        handlers[name] = handler
    for name, (module_name, add_name, run_name, help_text) in _LAZY_COMMANDS.items():
        sub = subparsers.add_parser(name, help=help_text, description=help_text)
        if name != selected:
            continue
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise CliUsageError(f"{name} is not available in this installation: {exc}") from None
        getattr(module, add_name)(sub)
        handlers[name] = _lazy_handler(module, run_name)
    return parser, handlers


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the process exit code."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    selected = next((item for item in arguments if not item.startswith("-")), None)
    try:
        parser, handlers = _parser(selected)
    except CliUsageError as exc:
        print(f"codemode {selected}: {exc}", file=sys.stderr)
        return 2
    try:
        args = parser.parse_args(arguments)
    except SystemExit as exc:  # argparse already printed the usage message (or --help/--version)
        return exc.code if isinstance(exc.code, int) else 2
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    command = handlers[args.command]
    try:
        return command(args)
    except BrokenPipeError:  # e.g. `codemode sdk | head`: the reader left, which is not an error
        with contextlib.suppress(OSError):
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - keep interpreter shutdown quiet
        return 0
    except CliUsageError as exc:
        print(f"codemode {args.command}: {exc}", file=sys.stderr)
        return 2
    except CodemodeError as exc:
        print(f"codemode {args.command}: {exc} [{exc.code}]", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
