"""What the command line and the MCP server share: the usage error, the version, the toolset loader,
the ``--events`` writer, the check for an optional extra, and the :class:`~codemode.tools.CodeMode` they
are built on.

One invocation (``codemode call``, ``run``, ``prompt``; one ``codemode serve`` connection) is one agent
session; :func:`open_codemode` gives it its :class:`CodeMode` with the chosen tools, and
:func:`events_file` streams that session's event log to ``--events FILE`` as it grows.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import IO, Any

from codemode.runtime import Agent, ToolDefinition, UsageError
from codemode.runtime.events import Event
from codemode.sandbox.lossless import dumps
from codemode.tools import CodeMode
from codemode.tools.toolsets import default_toolset

__all__ = (
    "CliUsageError",
    "MissingExtraError",
    "app_version",
    "events_file",
    "load_toolsets",
    "open_codemode",
    "require_extra",
)


class CliUsageError(Exception):
    """A usage problem: printed as one line on stderr, exit code 2."""


class MissingExtraError(ImportError):
    """An optional part of codemode was used without the extra that installs its dependencies."""


def require_extra(extra: str, modules: Sequence[str], what: str) -> None:
    """Import ``modules``, or raise :class:`MissingExtraError` saying that ``what`` needs
    ``codemode[extra]`` and how to install it."""
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise MissingExtraError(
                f"{what} needs {module!r}, which is not installed: pip install 'codemode[{extra}]'",
                name=module) from exc


def app_version() -> str:
    """The installed distribution's version (``0+unknown`` in a source tree that is not installed)."""
    try:
        return version("codemode")
    except PackageNotFoundError:
        return "0+unknown"


# ---------------------------------------------------------------------------------- toolsets


def load_toolsets(specs: Sequence[str], workspace: str | Path = ".") -> list[ToolDefinition]:
    """The definitions named by ``--toolset`` specs (``module:attr``: a definition list, a definition,
    or a callable returning either), in order; no spec means the built-in toolset rooted at ``workspace``
    (see :func:`codemode.tools.default_toolset`).

    Modules are imported as ``python -m`` would: the current directory comes first on ``sys.path``, so
    ``--toolset mytools:tools`` finds ``./mytools.py`` from the console script too.
    """
    if not specs:
        root = Path(workspace)
        if not root.is_dir():
            raise CliUsageError(f"--workspace {workspace}: not a directory")
        return default_toolset(root)
    return [definition for spec in specs for definition in _load_one(spec)]


def _import_from_cwd(module_name: str) -> Any:
    cwd = os.getcwd()
    if not any(entry in ("", cwd) for entry in sys.path):
        sys.path.insert(0, cwd)  # as `python -m` puts it; kept, since the toolset may import lazily
    return importlib.import_module(module_name)


def _load_one(spec: str) -> list[ToolDefinition]:
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise CliUsageError(
            f"--toolset {spec!r} must look like MODULE:ATTR, e.g. codemode.tools.demo:demo_tools")
    try:
        target: Any = _import_from_cwd(module_name)
    except Exception as exc:
        raise CliUsageError(f"--toolset {spec!r}: cannot import {module_name!r}: {exc}") from None
    for part in attr.split("."):
        if not hasattr(target, part):
            raise CliUsageError(f"--toolset {spec!r}: {module_name!r} has no attribute {attr!r}")
        target = getattr(target, part)
    if callable(target) and not isinstance(target, ToolDefinition):
        try:
            target = target()
        except Exception as exc:
            raise CliUsageError(f"--toolset {spec!r}: calling {attr}() failed: {exc}") from None
    items = [target] if isinstance(target, ToolDefinition) else target
    if not isinstance(items, Iterable) or isinstance(items, str | bytes):
        raise CliUsageError(f"--toolset {spec!r} is not a list of tool definitions")
    found = list(items)
    bad = sorted({type(item).__name__ for item in found if not isinstance(item, ToolDefinition)})
    if bad:
        raise CliUsageError(
            f"--toolset {spec!r} is not a list of tool definitions (it holds {', '.join(bad)})")
    return found


# ---------------------------------------------------------------------------------- --events


class _EventWriter:
    """Writes each event as one flushed JSON line; remembers the first write error instead of raising
    into the code that appended the event."""

    def __init__(self, handle: IO[str]) -> None:
        self.handle = handle
        self.error: OSError | None = None

    def __call__(self, event: Event) -> None:
        if self.error is not None:
            return
        try:
            self.handle.write(dumps(event.to_json()) + "\n")
            self.handle.flush()
        except OSError as exc:
            self.error = exc


@contextlib.contextmanager
def events_file(path: str | None, agent: Agent) -> Iterator[None]:
    """Stream ``agent``'s event log to ``path`` (``--events FILE``) while the block runs: one JSON line
    per event, flushed as it happens, so a watcher (``tail -f``) sees a long program's calls live.

    The file is opened (and truncated) on entry, so a path that cannot be written is a usage error before
    anything runs; a write that fails later stops the stream and is reported when the block ends.
    """
    if path is None:
        yield
        return
    try:
        handle = Path(path).open("w", encoding="utf-8")  # noqa: SIM115 - closed below
    except OSError as exc:
        raise CliUsageError(f"--events {path}: cannot write: {exc.strerror}") from None
    writer = _EventWriter(handle)
    for event in agent.events.events:
        writer(event)
    remove = agent.events.on_append(writer)
    try:
        yield
    finally:
        remove()
        with contextlib.suppress(OSError):
            handle.close()
    if writer.error is not None:
        raise CliUsageError(f"--events {path}: cannot write: {writer.error.strerror}")


@contextlib.asynccontextmanager
async def open_codemode(mode: str, definitions: Sequence[ToolDefinition], *, agent: Agent,
                        **options: Any) -> AsyncIterator[CodeMode]:
    """A :class:`CodeMode` in ``mode`` with ``definitions`` registered, for the session of ``agent``.

    ``options`` are further :class:`CodeMode` keyword arguments (limits, observers); a definition that
    cannot be registered is a :class:`CliUsageError` naming it.
    """
    cm = CodeMode(mode=mode, agent=agent, **options)
    for definition in definitions:
        try:
            cm.register(definition)
        except UsageError as exc:
            raise CliUsageError(f"cannot register tool {definition.name!r}: {exc}") from None
    async with cm:
        yield cm
