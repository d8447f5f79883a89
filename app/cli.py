"""The ``codemode`` command line.

Each subcommand is one ``_cmd_<name>(args) -> exit code`` function plus a ``_add_<name>(subparsers)``
parser builder, listed in :data:`_COMMANDS`; subcommands living in other modules (``serve``) are listed
in :data:`_LAZY_COMMANDS` and imported only when selected. They share the toolset loader
(``--toolset module:attr``; default: the demo tools, the workspace tools rooted at ``--workspace`` and
``todo_write``) and are built on :class:`~codemode.tools.CodeMode`. Each invocation is one agent session
with its own event log (``--events FILE`` writes it as JSON lines while the session runs).

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
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import anyio

from codemode.runtime import (
    RUN_CODE,
    Agent,
    CodemodeError,
    Prompt,
    ToolCallRequest,
    ToolDefinition,
    ToolResult,
)
from codemode.runtime.modes import MODES
from codemode.sandbox.lossless import LosslessJsonError, loads
from codemode.tools import CodeMode

from ._common import (
    CliUsageError,
    MissingExtraError,
    app_version,
    events_file,
    load_toolsets,
    open_codemode,
    require_extra,
)

__all__ = ("CliUsageError", "main")


# ---------------------------------------------------------------------------------- shared plumbing


def _definitions(args: argparse.Namespace) -> list[ToolDefinition]:
    return load_toolsets([args.toolset] if args.toolset is not None else [], args.workspace)


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
                        help="write this session's event log to FILE as JSON lines, as events happen")
    if json_flag:
        parser.add_argument("--json", action="store_true", help="print one JSON object")


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
    if args.name == RUN_CODE and args.mode == "native":
        raise CliUsageError(f"{RUN_CODE} runs a program, which --mode native does not offer: add --mode code "
                            "(or --mode both), or use `codemode run PROGRAM`")
    definitions = _definitions(args)
    agent = Agent("cli")

    async def run() -> ToolResult:
        async with open_codemode(args.mode, definitions, agent=agent) as cm:
            request = ToolCallRequest("cli-1", args.name, json.dumps(arguments))
            return (await cm.execute_tool_calls([request]))[0]

    with events_file(args.events, agent):
        result = anyio.run(run)
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
    definitions = _definitions(args)

    async def run() -> Prompt:
        async with open_codemode(args.mode, definitions, agent=Agent("cli")) as cm:
            return cm.prompt()

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
    definitions = _definitions(args)
    report = RunReport(progress=default_progress(args.quiet))
    agent = Agent("cli")

    async def run() -> ToolResult:
        async with open_codemode(args.mode, definitions, agent=agent, on_log=report.on_log,
                                 on_run=report.on_run, **options) as cm:
            cm.runtime.around_execute(report.around)
            _report_sandbox_health(cm, report.progress)
            return await report.watching(lambda: cm.run(program, f"run {args.program}"))

    with events_file(args.events, agent):
        result = anyio.run(run)
    payload = run_json(result, report, agent)
    if args.json:
        _print_json(payload)
    else:
        print(result.text, file=sys.stderr if result.is_error else sys.stdout)
        if payload["dispatches"]:
            print("\n" + format_table(payload["dispatches"], report.elapsed_ms),
                  file=sys.stderr if result.is_error else sys.stdout)
    return 1 if result.is_error else 0


def _report_sandbox_health(cm: CodeMode, stream: Any) -> None:
    """Print the sandbox's health events (its template lost or replaced, the restart breaker) on the
    progress stream; the ``--events`` log has those the run saw as ``code/sandbox`` events."""
    if stream is None or cm.code_runtime is None:
        return
    cm.code_runtime.sandbox.on_health(lambda event: print(f"  ! sandbox {event.kind}: {event.message}",
                                                          file=stream, flush=True))


# ---------------------------------------------------------------------------------- codemode sdk / check


def _signatures(args: argparse.Namespace) -> list[Any]:
    from codemode.tools.run_code import signature_of

    return [signature_of(d) for d in _definitions(args)]


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
    try:
        require_extra("check", ("mypy",), "codemode check")
    except MissingExtraError as exc:
        raise CliUsageError(str(exc)) from None
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
    "serve": ("codemode.app.mcp_bridge", "add_serve_arguments", "run_serve",
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
    parser.add_argument("--version", action="version", version=f"codemode {app_version()}")
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
        except MissingExtraError as exc:
            raise CliUsageError(str(exc)) from None
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
