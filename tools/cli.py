"""The ``codemode`` command line.

Each subcommand is one ``_cmd_<name>(args) -> exit code`` function plus a ``_add_<name>(subparsers)``
parser builder, listed in :data:`_COMMANDS`; subcommands living in other modules (``serve``) are listed
in :data:`_LAZY_COMMANDS` and imported only when selected. They share the toolset loader
(:func:`load_toolset`, ``--toolset module:attr``, default the demo tools) and the runtime factory
(:func:`open_runtime`).

Exit codes: 0 success, 1 the call/program failed (an error result), 2 usage errors (bad flags, bad JSON,
an unloadable toolset, a mode that cannot work here). Usage errors are one line on stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import anyio

from runtime import CodemodeError, ToolDefinition, ToolRuntime, UsageError
from sandbox.lossless import LosslessJsonError, loads

from .demo import demo_tools

__all__ = ("CliUsageError", "load_toolset", "main", "open_runtime")

MODES = ("native", "code", "both")
CODE_RUNTIME = "tools.run_code:PythonCodeRuntime"


class CliUsageError(Exception):
    """A usage problem: printed as one line on stderr, exit code 2."""


def _version() -> str:
    try:
        return version("codemode")
    except PackageNotFoundError:  # running from a source tree
        return "0+unknown"


# ---------------------------------------------------------------------------------- shared plumbing


def load_toolset(spec: str | None) -> list[ToolDefinition]:
    """Load tool definitions from ``module:attr`` (a list of definitions or a callable returning one).

    ``None`` means the built-in demo tools.
    """
    if spec is None:
        return demo_tools()
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise CliUsageError(f"--toolset must look like module:attr, got {spec!r}")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise CliUsageError(f"--toolset {spec}: cannot import {module_name!r}: {exc}") from None
    try:
        found = getattr(module, attr)
    except AttributeError:
        raise CliUsageError(f"--toolset {spec}: module {module_name!r} has no attribute {attr!r}") from None
    if callable(found) and not isinstance(found, ToolDefinition):
        try:
            found = found()
        except Exception as exc:
            raise CliUsageError(f"--toolset {spec}: calling {attr}() failed: {exc}") from None
    definitions = [found] if isinstance(found, ToolDefinition) else found
    valid = isinstance(definitions, list | tuple) and all(isinstance(d, ToolDefinition) for d in definitions)
    if not valid:
        raise CliUsageError(f"--toolset {spec}: expected a list of ToolDefinition (or a callable returning "
                            "one)")
    return list(definitions)


def _code_runtime(mode: str) -> Any:
    module_name, _, attr = CODE_RUNTIME.partition(":")
    try:
        module = importlib.import_module(module_name)
        factory = getattr(module, attr)
    except (ImportError, AttributeError):
        raise CliUsageError(f"--mode {mode} needs a code runtime ({CODE_RUNTIME}), which is not available "
                            "in this installation; use --mode native") from None
    return factory()


@contextlib.asynccontextmanager
async def open_runtime(mode: str = "native", toolset: str | None = None) -> AsyncIterator[ToolRuntime]:
    """A :class:`~runtime.ToolRuntime` in ``mode`` with ``toolset`` registered (code runtime if needed)."""
    definitions = load_toolset(toolset)
    async with contextlib.AsyncExitStack() as stack:
        code_runtime = None
        if mode != "native":
            code_runtime = _code_runtime(mode)
            if hasattr(code_runtime, "__aenter__"):
                code_runtime = await stack.enter_async_context(code_runtime)
        runtime = await stack.enter_async_context(ToolRuntime(mode, code_runtime=code_runtime))
        for definition in definitions:
            try:
                runtime.register(definition)
            except UsageError as exc:
                raise CliUsageError(f"cannot register tool {definition.name!r}: {exc}") from None
        yield runtime


def _print_json(value: Any) -> None:
    print(json.dumps(value, ensure_ascii=False, indent=2))


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--mode", choices=MODES, default="native", help="presentation mode (default native)")
    parser.add_argument("--toolset", metavar="MODULE:ATTR", default=None,
                        help="tool definitions to load instead of the demo tools")
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

    async def run() -> Any:
        async with open_runtime(args.mode, args.toolset) as runtime:
            return await runtime.execute(args.name, arguments, call_id="cli-1")

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
    async def run() -> Any:
        async with open_runtime(args.mode, args.toolset) as runtime:
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


# ---------------------------------------------------------------------------------- entry point

_COMMANDS: dict[str, tuple[Callable[[Any], None], Callable[[argparse.Namespace], int]]] = {
    "call": (_add_call, _cmd_call),
    "prompt": (_add_prompt, _cmd_prompt),
}

#: Subcommands implemented elsewhere, imported only when selected (their imports can be heavy):
#: name -> (module, "add_arguments(parser)" function, "async run(args) -> exit code" function, help).
_LAZY_COMMANDS: dict[str, tuple[str, str, str, str]] = {
    "serve": ("tools.mcp_bridge", "add_serve_arguments", "run_serve",
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
    except CliUsageError as exc:
        print(f"codemode {args.command}: {exc}", file=sys.stderr)
        return 2
    except CodemodeError as exc:
        print(f"codemode {args.command}: {exc} [{exc.code}]", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
