"""Workspace tools: read, write, list and search text files confined to one root directory.

``workspace_tools(root)`` returns four definitions (``read_text``, ``write_text``, ``list_files``,
``grep``) backed by one :class:`Workspace`. Every path a model passes is relative to the root and is
resolved by :class:`Workspace` itself, one component at a time, through directory file descriptors
opened with ``O_NOFOLLOW``:

* empty paths, NUL bytes, absolute paths and ``..`` that climbs above the root are refused before the
  file system is touched;
* a symbolic link is followed only after its target has been checked to stay inside the root (links
  inside the workspace work; links pointing out, including symlinked parent directories, are refused);
* because each step opens the next component relative to an already-open directory and never follows
  a link implicitly, swapping a directory for a link between the check and the use (a rename race)
  cannot redirect the operation outside the root - the open fails instead;
* writes go to a temporary file in the target directory that is then renamed over the target, so a
  concurrent reader sees the old or the new text, never half of it, and a hard or symbolic link at the
  target is replaced rather than written through.

What is *not* a boundary: hard links that already exist inside the root (they are ordinary files here),
and bind mounts. Special files (FIFOs, devices, sockets) are refused, never opened for blocking reads.

Hostile use is bounded (:class:`WorkspaceLimits`): a path may have at most ``max_path_chars`` characters
and ``max_path_depth`` directories; every walk holds one directory descriptor at a time (the
directory it is in; a step back up reopens the parent from the root), so no path and no tree can
exhaust the host's descriptors; the tools may grow the workspace by at most ``max_workspace_bytes``;
``grep`` uses RE2, a linear-time engine (no pattern can backtrack for ages; backreferences and
lookaround, which need backtracking, are refused with a clear error), searches lines of at most
``max_grep_scan_chars`` characters and stops at its deadline. The bodies run in worker threads that
check for cancellation between directories and lines, so a cancelled call's thread stops at once
instead of running on unobserved; RE2 releases the GIL while it matches, so the event loop never waits
for a search. Names that are not UTF-8 (which a model could not write back) are skipped by the listings.

Reads are concurrency-safe; writes are exclusive. Both declare resource claims (the normalised path read
or written), so a scheduler that honours claims may overlap writes to different files; ``list_files`` and
``grep`` read the whole tree and conflict with every write. Every failure is a
:class:`codemode.runtime.ToolError` with a message that says what was wrong and what to do: confinement
violations are ``DENIED``, malformed arguments ``INVALID_ARGS``, everything else (missing file, too large, not
text) ``TOOL_FAILED``.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import math
import os
import re
import stat
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import re2

from codemode.runtime.definitions import ResourceClaims, ToolDefinition, ToolOutput, define_tool
from codemode.runtime.errors import ToolArgsError, ToolDeniedError, ToolError, ToolExecutionError, UsageError
from codemode.sandbox.lossless import lone_surrogate

__all__ = (
    "DEFAULT_LIMITS",
    "GrepMatch",
    "Workspace",
    "WorkspaceLimits",
    "workspace_tools",
)

_MIB = 1024 * 1024
_SYMLINK_HOPS = 40
_SKIPPED_DIRS = frozenset({".git", ".hg", ".svn"})
_DRIVE = re.compile(r"[A-Za-z]:([/\\]|$)")  # "C:/x", "C:\\x", "C:" are absolute elsewhere; refuse them
_TEMP = re.compile(r"\.codemode-[0-9a-f]{16}\.tmp")  # an in-flight write_text replacement
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
#: What a file or directory costs against the quota at least: one file-system block.
_BLOCK = 4096
#: The largest RE2 program a grep pattern may compile to: the engine's time per character grows with it.
_MAX_PROGRAM = 5000
_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # (a refused pattern is the caller's error, not a line on stderr)

Checkpoint = Callable[[], None]


def _no_checkpoint() -> None:
    pass


@dataclass(frozen=True, kw_only=True)
class WorkspaceLimits:
    """Bounds of the workspace tools; every one is stated in the model-facing descriptions.

    ``max_read_bytes`` caps ``read_text`` (larger files are an error, not truncated),
    ``max_write_bytes`` caps the UTF-8 size of ``write_text``, ``max_list_files`` the entries one
    ``list_files`` returns, ``max_grep_matches`` the matches one ``grep`` returns, ``max_grep_file_bytes``
    the size of a file ``grep`` still searches (larger ones are skipped) and ``max_grep_line_chars`` the
    length of a reported matching line (longer lines are cut and end with ``...``). ``max_grep_seconds``
    is the wall-clock budget of one search, checked between lines: when it runs out the search stops and
    reports ``truncated``. ``max_grep_scan_chars`` is the longest line ``grep`` searches (longer lines
    are counted in ``long_lines``, not searched: they bound the time one line can take) and
    ``max_grep_pattern_chars`` the longest pattern.

    ``max_path_chars`` and ``max_path_depth`` bound every path argument (its length, and its number of
    components) and the depth of the directories the listings descend. ``max_workspace_bytes`` is the
    quota of the workspace: how much the tools may grow it in total, counting each file at its size
    rounded up to 4 KiB (at least 4 KiB) and each directory they create at 4 KiB; replacing or
    shrinking a file gives back what it used. A write that would go over it is refused.
    """

    max_read_bytes: int = _MIB
    max_write_bytes: int = _MIB
    max_list_files: int = 5000
    max_grep_matches: int = 200
    max_grep_file_bytes: int = _MIB
    max_grep_line_chars: int = 400
    max_grep_seconds: float = 10.0
    max_grep_scan_chars: int = 20_000
    max_grep_pattern_chars: int = 1000
    max_path_chars: int = 1024
    max_path_depth: int = 32
    max_workspace_bytes: int = 256 * _MIB

    def __post_init__(self) -> None:
        seconds = self.max_grep_seconds
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not 0 < seconds < math.inf:
            message = f"WorkspaceLimits.max_grep_seconds must be a positive finite number, got {seconds!r}"
            raise UsageError(message)
        for name in (
            "max_read_bytes",
            "max_write_bytes",
            "max_list_files",
            "max_grep_matches",
            "max_grep_file_bytes",
            "max_grep_line_chars",
            "max_grep_scan_chars",
            "max_grep_pattern_chars",
            "max_path_chars",
            "max_path_depth",
            "max_workspace_bytes",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise UsageError(f"WorkspaceLimits.{name} must be a positive integer, got {value!r}")


DEFAULT_LIMITS = WorkspaceLimits()


@dataclass(frozen=True)
class GrepMatch:
    """One matching line: the root-relative ``path``, the 1-based ``line`` number and its ``text``."""

    path: str
    line: int
    text: str


def _denied(message: str) -> ToolError:
    return ToolDeniedError(message)


def _failed(message: str) -> ToolError:
    return ToolExecutionError(message)


def _split(path: object, *, field: str, allow_root: bool,
           limits: WorkspaceLimits = DEFAULT_LIMITS) -> list[str]:
    """Check a model-supplied path lexically and split it into components (``.`` and empties dropped).

    ``..`` components are kept: they are resolved physically by :meth:`Workspace._walk`, which refuses
    climbing above the root. A path naming the root itself (``.``) yields ``[]`` when ``allow_root``.
    A path longer than ``max_path_chars`` or going more than ``max_path_depth`` levels deep is refused
    before anything is touched.
    """
    if not isinstance(path, str):
        raise ToolArgsError([f'"{field}" must be a string'])
    if path == "":
        raise ToolArgsError([f'"{field}" must not be empty; use "." for the workspace root'])
    if len(path) > limits.max_path_chars:
        raise ToolArgsError([f'"{field}" is {len(path)} characters long, over the '
                             f"{limits.max_path_chars} a workspace path may have (max_path_chars)"])
    if "\x00" in path:
        raise _denied(f'"{field}" contains a NUL byte; paths with NUL bytes are refused')
    if path.startswith("/") or _DRIVE.match(path):
        raise _denied(
            f'"{field}" {path!r} is absolute; use a path relative to the workspace root, '
            'for example "docs/notes.md"'
        )
    parts = [part for part in path.split("/") if part not in ("", ".")]
    depth = 0
    for part in parts:
        depth = depth - 1 if part == ".." else depth + 1
        if depth < 0:
            raise _denied(f'"{field}" {path!r} escapes the workspace root through ".."')
        if depth > limits.max_path_depth:
            raise ToolArgsError([f'"{field}" goes more than {limits.max_path_depth} levels deep, the most a '
                                 "workspace path may (max_path_depth); use a flatter layout"])
    if not parts and not allow_root:
        raise ToolArgsError([f'"{field}" {path!r} names the workspace root, not a file'])
    return parts


def _cost(size: int) -> int:
    """What a file of ``size`` bytes costs against the quota: whole blocks, at least one."""
    return max(_BLOCK, -(-size // _BLOCK) * _BLOCK)


def _display(parts: list[str]) -> str:
    """The lexically normalised, root-relative form of a path that is echoed back to the model."""
    out: list[str] = []
    for part in parts:
        if part == "..":
            out.pop()
        else:
            out.append(part)
    return "/".join(out) if out else "."


class _Walk:
    """Where a resolved path leads: the open directory ``fd`` and the final component ``name`` in it.

    ``logical`` is the real root-relative directory of ``fd`` (no links in it). ``name`` is ``None``
    when the path is the root or a directory that was opened completely. Only one directory is ever
    open: stepping into a child closes the parent, and stepping back up (``..``) reopens the parent
    from the root (each component again with ``O_NOFOLLOW``), so a walk costs one descriptor however
    deep it goes.
    """

    def __init__(self, workspace: Workspace, root_fd: int) -> None:
        self._workspace = workspace
        self.fd = root_fd
        self.logical: list[str] = []
        self.name: str | None = None

    @property
    def dir_fd(self) -> int:
        return self.fd

    def push(self, fd: int, name: str) -> None:
        os.close(self.fd)
        self.fd = fd
        self.logical.append(name)

    def pop(self) -> None:
        self.logical.pop()
        self._reopen()

    def reset(self) -> None:
        self.logical.clear()
        self._reopen()

    def _reopen(self) -> None:
        fd = self._workspace._open_logical(self.logical, shown=self.relative())
        os.close(self.fd)
        self.fd = fd

    def close(self) -> None:
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = -1

    def relative(self, name: str | None = None) -> str:
        parts = [*self.logical, name] if name is not None else self.logical
        return "/".join(parts) if parts else "."


class Workspace:
    """File operations confined to ``root``; the engine behind the workspace tools.

    The root is resolved once, at construction, and must be an existing directory (otherwise
    :class:`codemode.runtime.UsageError`). Methods are synchronous and raise
    :class:`codemode.runtime.ToolError`; the tool bodies run them in a worker thread. Concurrent writes are
    safe without a lock: each one is an atomic rename, so the last one wins and no reader sees a mixture.
    """

    def __init__(self, root: str | Path = ".", *, limits: WorkspaceLimits | None = None) -> None:
        try:
            resolved = Path(root).resolve(strict=True)
        except (OSError, RuntimeError) as exc:
            message = f"workspace root {str(root)!r} does not exist or cannot be resolved: {exc}"
            raise UsageError(message) from exc
        if not resolved.is_dir():
            raise UsageError(f"workspace root {str(resolved)!r} is not a directory")
        self.root = resolved
        self.limits = limits or DEFAULT_LIMITS
        #: Bytes the tools have added to the workspace so far (see ``max_workspace_bytes``); writes
        #: account under the lock, so concurrent writers never overshoot the quota together.
        self.grown = 0
        self._write_lock = threading.Lock()
        # Absolute link targets may name the root by its resolved path or by the path it was given as
        # (e.g. through a symlinked parent); either way the rest is resolved from the root's descriptor.
        given = os.path.normpath(os.path.abspath(os.fspath(root)))
        self._root_names = tuple(dict.fromkeys([str(resolved), given]))

    # -- resolution -------------------------------------------------------------------------------

    def _open_root(self) -> int:
        try:
            return os.open(self.root, _DIR_FLAGS)
        except OSError as exc:
            raise _failed(f"workspace root {str(self.root)!r} cannot be opened: {exc.strerror}") from exc

    def _open_logical(self, logical: list[str], *, shown: str) -> int:
        """A descriptor of the real directory ``logical`` (no links in it), opened from the root one
        component at a time with ``O_NOFOLLOW``; at most two descriptors are open meanwhile."""
        fd = self._open_root()
        try:
            for name in logical:
                child = self._open_dir(fd, name, shown)
                os.close(fd)
                fd = child
        except BaseException:
            os.close(fd)
            raise
        return fd

    @contextlib.contextmanager
    def _walk(self, parts: list[str], *, shown: str, create_dirs: bool = False) -> Iterator[_Walk]:
        """Resolve ``parts`` inside the root, following only links whose targets stay inside.

        Every intermediate component is opened as a directory with ``O_NOFOLLOW`` relative to its parent's
        descriptor; a link is read with ``readlink`` and its target spliced into the remaining components
        after the containment check, so no step ever lets the kernel follow a link on its own. The final
        component is left unopened in ``walk.name`` (unless it is a directory reached through ``..`` or a
        link, which the caller sees as ``name`` of its last real component).
        """
        walk = _Walk(self, self._open_root())
        try:
            pending = list(parts)
            hops = 0
            while pending:
                part = pending.pop(0)
                if part in ("", "."):
                    continue
                if part == "..":
                    if not walk.logical:
                        raise _denied(f"{shown!r} resolves outside the workspace root")
                    walk.pop()
                    continue
                try:
                    info = os.stat(part, dir_fd=walk.dir_fd, follow_symlinks=False)
                except FileNotFoundError:
                    if pending and create_dirs:
                        self._charge(_BLOCK, shown, f"creating directory {walk.relative(part)!r}")
                        try:
                            os.mkdir(part, 0o755, dir_fd=walk.dir_fd)
                        except OSError as exc:
                            self.grown -= _BLOCK
                            if not isinstance(exc, FileExistsError):  # (else another write made it)
                                raise
                        info = os.stat(part, dir_fd=walk.dir_fd, follow_symlinks=False)
                    elif pending:
                        missing = walk.relative(part)
                        raise _failed(f"{shown!r}: directory {missing!r} does not exist") from None
                    else:
                        walk.name = part
                        break
                if stat.S_ISLNK(info.st_mode):
                    hops += 1
                    if hops > _SYMLINK_HOPS:
                        raise _failed(f"{shown!r}: too many levels of symbolic links")
                    target = os.readlink(part, dir_fd=walk.dir_fd)
                    pending[:0] = self._link_target(walk, part, target, shown)
                    continue
                if not pending:
                    walk.name = part
                    break
                if not stat.S_ISDIR(info.st_mode):
                    raise _failed(f"{shown!r}: {walk.relative(part)!r} is not a directory")
                if len(walk.logical) >= self.limits.max_path_depth:
                    raise _failed(f"{shown!r} leads deeper than {self.limits.max_path_depth} directories "
                                  "(max_path_depth)")
                walk.push(self._open_dir(walk.dir_fd, part, shown), part)
            yield walk
        except OSError as exc:
            raise _failed(f"{shown!r}: {exc.strerror or exc}") from exc
        finally:
            walk.close()

    def _link_target(self, walk: _Walk, part: str, target: str, shown: str) -> list[str]:
        """Components to resolve in place of the link ``part``; refuses targets outside the root."""
        if "\x00" in target or target == "":
            raise _denied(f"{shown!r}: symbolic link {walk.relative(part)!r} has an unusable target")
        outside = f"{shown!r}: symbolic link {walk.relative(part)!r} points outside the workspace root"
        if target.startswith("/"):
            absolute = os.path.normpath(target)
            for root in self._root_names:
                if absolute == root or absolute.startswith(root.rstrip("/") + "/"):
                    walk.reset()
                    return [p for p in absolute[len(root) :].split("/") if p]
            raise _denied(outside)
        depth = len(walk.logical)
        for piece in target.split("/"):
            if piece == "..":
                depth -= 1
            elif piece not in ("", "."):
                depth += 1
            if depth < 0:
                raise _denied(outside)
        return [p for p in target.split("/") if p]

    @staticmethod
    def _open_dir(dir_fd: int, name: str, shown: str) -> int:
        try:
            return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise _denied(f"{shown!r}: {name!r} changed while it was being resolved; refused") from exc
            raise

    def _open_target_dir(self, walk: _Walk, shown: str) -> int:
        """The descriptor of the directory a resolved walk names (the root, or its final component)."""
        if walk.name is None:
            return os.dup(walk.dir_fd)
        try:
            info = os.stat(walk.name, dir_fd=walk.dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            raise _failed(f"{shown!r} does not exist") from None
        if not stat.S_ISDIR(info.st_mode):
            raise _failed(f"{shown!r} is not a directory")
        return self._open_dir(walk.dir_fd, walk.name, shown)

    # -- reading ----------------------------------------------------------------------------------

    def _read_bytes(self, dir_fd: int, name: str, shown: str, max_bytes: int) -> bytes:
        try:
            fd = os.open(name, _READ_FLAGS, dir_fd=dir_fd)
        except FileNotFoundError:
            raise _failed(f"{shown!r} does not exist; list_files shows the files that do") from None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise _denied(f"{shown!r} changed into a symbolic link while being opened; refused") from exc
            raise
        try:
            info = os.fstat(fd)
            if stat.S_ISDIR(info.st_mode):
                raise _failed(f"{shown!r} is a directory; use list_files to see what it contains")
            if not stat.S_ISREG(info.st_mode):
                raise _failed(f"{shown!r} is not a regular file")
            if info.st_size > max_bytes:
                raise _failed(f"{shown!r} is {info.st_size} bytes, over the {max_bytes}-byte limit; use grep")
            os.set_blocking(fd, True)
        except BaseException:
            os.close(fd)
            raise
        with os.fdopen(fd, "rb", closefd=True) as handle:
            data = handle.read(max_bytes + 1)
        if len(data) > max_bytes:
            raise _failed(f"{shown!r} is over the {max_bytes}-byte limit; use grep to find the part you need")
        return data

    @staticmethod
    def _decode(data: bytes, shown: str) -> str:
        if b"\x00" in data:
            raise _failed(f"{shown!r} is a binary file (it contains NUL bytes), not text")
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _failed(f"{shown!r} is not UTF-8 text (byte {exc.start} cannot be decoded)") from exc

    def read_text(self, path: object) -> tuple[str, str]:
        """Return ``(normalised path, text)`` of a UTF-8 file of at most ``max_read_bytes``."""
        parts = _split(path, field="path", allow_root=False, limits=self.limits)
        shown = _display(parts)
        with self._walk(parts, shown=shown) as walk:
            if walk.name is None:
                raise _failed(f"{shown!r} is a directory; use list_files to see what it contains")
            data = self._read_bytes(walk.dir_fd, walk.name, shown, self.limits.max_read_bytes)
        return shown, self._decode(data, shown)

    # -- writing ----------------------------------------------------------------------------------

    def write_text(self, path: object, text: object) -> tuple[str, int]:
        """Replace (or create) a file with ``text`` as UTF-8; returns ``(normalised path, bytes)``.

        Missing parent directories are created. The write is atomic: a temporary sibling is written and
        renamed over the target. What the write adds to the workspace counts against its quota.
        """
        parts = _split(path, field="path", allow_root=False, limits=self.limits)
        shown = _display(parts)
        if not isinstance(text, str):
            raise ToolArgsError(['"text" must be a string'])
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ToolArgsError([f'"text" cannot be encoded as UTF-8 (character {exc.start})']) from exc
        if len(data) > self.limits.max_write_bytes:
            cap = self.limits.max_write_bytes
            raise _failed(f"text is {len(data)} bytes, over the {cap}-byte write limit")
        with self._write_lock, self._walk(parts, shown=shown, create_dirs=True) as walk:
            if walk.name is None:
                raise _failed(f"{shown!r} is a directory, not a file")
            mode = 0o644
            used = 0
            with contextlib.suppress(FileNotFoundError):
                info = os.stat(walk.name, dir_fd=walk.dir_fd, follow_symlinks=False)
                if stat.S_ISDIR(info.st_mode):
                    raise _failed(f"{shown!r} is a directory, not a file")
                if not stat.S_ISREG(info.st_mode):
                    raise _failed(f"{shown!r} is not a regular file; refusing to replace it")
                mode = stat.S_IMODE(info.st_mode)
                used = _cost(info.st_size)
            added = _cost(len(data)) - used
            self._charge(added, shown, f"writing {len(data)} bytes")
            try:
                self._replace(walk.dir_fd, walk.name, data, mode)
            except BaseException:
                self.grown -= added
                raise
        return shown, len(data)

    def _charge(self, cost: int, shown: str, what: str) -> None:
        """Count ``cost`` bytes against the quota, or refuse (the caller holds the write lock)."""
        quota = self.limits.max_workspace_bytes
        if cost > 0 and self.grown + cost > quota:
            raise _failed(f"{shown!r}: {what} would take the workspace past its quota: the workspace tools "
                          f"may add {quota} bytes in all (max_workspace_bytes) and have added {self.grown}; "
                          "overwrite or shorten existing files instead")
        self.grown += cost

    @staticmethod
    def _replace(dir_fd: int, name: str, data: bytes, mode: int) -> None:
        """Write ``data`` to a fresh temporary sibling (fixed-length name, so long names still fit) with
        the replaced file's permission bits, then rename it over ``name``."""
        temp = f".codemode-{os.urandom(8).hex()}.tmp"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(temp, flags, 0o600, dir_fd=dir_fd)
        try:
            with os.fdopen(fd, "wb", closefd=True) as handle:
                handle.write(data)
                os.fchmod(handle.fileno(), mode)
            os.replace(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp, dir_fd=dir_fd)
            raise

    # -- listing and searching --------------------------------------------------------------------

    def _files(self, top: list[str], checkpoint: Checkpoint) -> Iterator[tuple[str, int]]:
        """Yield ``(root-relative path, parent fd)`` for the regular files under the real directory ``top``,
        depth first and sorted per directory, skipping VCS directories, names that are not UTF-8 and
        directories deeper than ``max_path_depth``. Links are yielded with ``-1`` as parent fd so that
        the caller resolves them through :meth:`_walk`; directory links are never descended (no
        cycles, no escapes). One directory is open at a time: each is reopened from the root when its
        turn comes (``O_NOFOLLOW`` on every component, so a directory swapped for a link meanwhile is
        skipped, never followed). ``checkpoint`` runs before each directory (it raises to stop)."""
        stack: list[list[str]] = [top]
        max_depth = self.limits.max_path_depth
        while stack:
            checkpoint()
            logical = stack.pop()
            try:
                fd = self._open_logical(logical, shown="/".join(logical) or ".")
            except (ToolError, OSError):
                continue  # (it vanished or changed since it was listed)
            try:
                with os.scandir(fd) as scan:
                    entries = sorted(scan, key=lambda entry: entry.name)
                subdirs: list[list[str]] = []
                for entry in entries:
                    if lone_surrogate(entry.name) >= 0:
                        continue  # (a name that is not UTF-8: no path a model sends can name it)
                    path = "/".join([*logical, entry.name])
                    if entry.is_symlink():
                        yield path, -1
                    elif entry.is_dir(follow_symlinks=False):
                        if entry.name not in _SKIPPED_DIRS and len(logical) < max_depth:
                            subdirs.append([*logical, entry.name])
                    elif entry.is_file(follow_symlinks=False) and not _TEMP.fullmatch(entry.name):
                        yield path, fd
            finally:
                os.close(fd)
            stack.extend(reversed(subdirs))

    def _link_is_file(self, path: str) -> bool:
        """Whether a link found while listing resolves, inside the root, to a regular file."""
        try:
            with self._walk(path.split("/"), shown=path) as walk:
                if walk.name is None:
                    return False
                info = os.stat(walk.name, dir_fd=walk.dir_fd, follow_symlinks=False)
                return stat.S_ISREG(info.st_mode)
        except (ToolError, OSError):
            return False

    def _scan(self, dir_path: object, visit: Callable[[str, int, str], bool],
              checkpoint: Checkpoint) -> None:
        """Call ``visit(path, parent_fd, name)`` for every listable file under ``dir_path`` until it returns
        ``False``. ``dir_path`` may also name a single file."""
        if dir_path is None:
            dir_path = "."
        parts = _split(dir_path, field="dir", allow_root=True, limits=self.limits)
        shown = _display(parts)
        with self._walk(parts, shown=shown) as walk:
            if walk.name is not None:
                try:
                    info = os.stat(walk.name, dir_fd=walk.dir_fd, follow_symlinks=False)
                except FileNotFoundError:
                    raise _failed(f"{shown!r} does not exist; list_files shows what does") from None
                if stat.S_ISREG(info.st_mode):
                    visit(walk.relative(walk.name), walk.dir_fd, walk.name)
                    return
                if not stat.S_ISDIR(info.st_mode):
                    raise _failed(f"{shown!r} is not a directory")
            top = [*walk.logical, walk.name] if walk.name is not None else list(walk.logical)
        for path, parent_fd in self._files(top, checkpoint):
            name = path.rsplit("/", 1)[-1]
            if parent_fd == -1:
                if not self._link_is_file(path):
                    continue
                with self._walk(path.split("/"), shown=path) as link_walk:
                    if link_walk.name is None or not visit(path, link_walk.dir_fd, link_walk.name):
                        return
                continue
            if not visit(path, parent_fd, name):
                return

    def list_files(self, dir_path: object = None, *,
                   checkpoint: Checkpoint = _no_checkpoint) -> tuple[list[str], bool]:
        """Root-relative paths of the files under ``dir_path``, sorted, and whether the list was cut.

        ``checkpoint`` is called between directories; whatever it raises stops the listing (the tool
        passes anyio's cancellation check).
        """
        found: list[str] = []
        truncated = False
        cap = self.limits.max_list_files

        def visit(path: str, _fd: int, _name: str) -> bool:
            nonlocal truncated
            if len(found) >= cap:
                truncated = True
                return False
            found.append(path)
            return True

        self._scan(dir_path, visit, checkpoint)
        return sorted(found), truncated

    def compile_pattern(self, pattern: object) -> Any:
        """The RE2 regex for a grep ``pattern``, or :class:`ToolArgsError` saying what to change."""
        if not isinstance(pattern, str):
            raise ToolArgsError(['"pattern" must be a string'])
        if pattern == "":
            raise ToolArgsError(['"pattern" must not be empty'])
        most = self.limits.max_grep_pattern_chars
        if len(pattern) > most:
            raise ToolArgsError([f'"pattern" is {len(pattern)} characters, over the {most} a grep pattern '
                                 "may have (max_grep_pattern_chars)"])
        if lone_surrogate(pattern) >= 0:
            raise ToolArgsError(['"pattern" holds a lone surrogate, which is not Unicode text'])
        try:
            regex = re2.compile(pattern, options=_RE2_OPTIONS)
        except re2.error as exc:
            raise ToolArgsError([_pattern_problem(pattern, exc)]) from None
        if regex.programsize > _MAX_PROGRAM:
            raise ToolArgsError([f'"pattern" is too complex: it compiles to {regex.programsize} steps, over '
                                 f"the {_MAX_PROGRAM} grep accepts (large counted repetitions like "
                                 "{500} multiply it); simplify it"])
        return regex

    def grep(self, pattern: object, dir_path: object = None, *,
             checkpoint: Checkpoint = _no_checkpoint) -> tuple[list[GrepMatch], bool]:
        """:meth:`search` without the count of long lines: ``(matches, truncated)``."""
        matches, truncated, _long = self.search(pattern, dir_path, checkpoint=checkpoint)
        return matches, truncated

    def search(self, pattern: object, dir_path: object = None, *,
               checkpoint: Checkpoint = _no_checkpoint) -> tuple[list[GrepMatch], bool, int]:
        """Lines matching the RE2 regular expression ``pattern`` (searched anywhere in the line) in text
        files under ``dir_path``; binary, non-UTF-8 and over-size files are skipped, and so are lines
        over ``max_grep_scan_chars``. Returns the matches in path and line order, whether the search
        was cut (``max_grep_matches`` or ``max_grep_seconds``) and how many long lines were skipped.

        ``checkpoint`` is called between directories and between lines; whatever it raises stops the
        search. Each line takes time linear in its length (RE2), so a stop is never long in coming.
        """
        regex = self.compile_pattern(pattern)
        limits = self.limits
        matches: list[GrepMatch] = []
        truncated = False
        long_lines = 0
        scan_cap = limits.max_grep_scan_chars
        deadline = time.monotonic() + limits.max_grep_seconds
        search = regex.search

        def visit(path: str, fd: int, name: str) -> bool:
            nonlocal truncated, long_lines
            try:
                text = self._decode(self._read_bytes(fd, name, path, limits.max_grep_file_bytes), path)
            except (ToolError, OSError):
                return True
            for number, line in enumerate(text.splitlines(), start=1):
                checkpoint()
                if time.monotonic() > deadline:
                    truncated = True
                    return False
                if len(line) > scan_cap:
                    long_lines += 1
                    continue
                if search(line) is None:
                    continue
                if len(matches) >= limits.max_grep_matches:
                    truncated = True
                    return False
                if len(line) > limits.max_grep_line_chars:
                    line = line[: limits.max_grep_line_chars] + "..."
                matches.append(GrepMatch(path, number, line))
            return True

        self._scan(dir_path, visit, checkpoint)
        matches.sort(key=lambda match: (match.path, match.line))
        return matches, truncated, long_lines


#: RE2 refuses what needs backtracking; say which feature it was and what to do instead.
_UNSUPPORTED: tuple[tuple[str, str], ...] = (
    ("(?=", "lookahead (?=...)"), ("(?!", "negative lookahead (?!...)"),
    ("(?<=", "lookbehind (?<=...)"), ("(?<!", "negative lookbehind (?<!...)"),
    ("(?P=", "the named backreference (?P=name)"), ("(?>", "the atomic group (?>...)"),
    ("(?x", "verbose mode (?x)"), ("(?#", "comments (?#...)"),
)


def _pattern_problem(pattern: str, exc: Exception) -> str:
    raw = exc.args[0] if exc.args else exc
    reason = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
    engine = ("grep uses RE2, a linear-time engine, so that no pattern can stall a search; it has no "
              "features that need backtracking")
    for marker, feature in _UNSUPPORTED:
        if marker in reason or (marker in pattern and "perl operator" in reason):
            return f'"pattern" uses {feature}, which grep does not support: {engine}. Match the text directly'
    if re.search(r"invalid escape sequence: \\[1-9]", reason):
        return (f'"pattern" uses a backreference (\\1 ...), which grep does not support: {engine}. Match the '
                "repeated text explicitly")
    if "\\Z" in reason:
        return '"pattern" uses \\Z, which RE2 spells \\z (end of text)'
    if "bad repetition operator" in reason and re.search(r"[*+?}]\+", pattern):
        return f'"pattern" uses a possessive quantifier (*+, ++, ?+), which grep does not support: {engine}'
    return f'"pattern" is not a valid RE2 regular expression: {reason}'


# -- the tool layer -------------------------------------------------------------------------------

_ROOT_RULE = (
    "Paths are relative to the workspace root and use '/' (for example \"docs/notes.md\"); absolute paths, "
    "'..' above the root and symbolic links leading outside the root are refused."
)


def _path_rule(limits: WorkspaceLimits) -> str:
    return (f"{_ROOT_RULE} A path may have at most {limits.max_path_chars} characters and "
            f"{limits.max_path_depth} components.")


def _string(description: str, *, required: bool) -> dict[str, Any]:
    spec: dict[str, Any] = {"type": "string", "description": description}
    if required:
        spec["required"] = True
    return spec


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "additionalProperties": False, "properties": properties, "required": required}


_PATH_OUT = {"type": "string", "description": "The normalised root-relative path."}
_TRUNCATED = {"type": "boolean", "description": "True when the result was cut at its limit."}


def _size(limit: int) -> str:
    return f"{limit // _MIB} MiB" if limit % _MIB == 0 else f"{limit} bytes"


def _claim(workspace: Workspace, args: Any, *, write: bool) -> ResourceClaims | None:
    try:
        parts = _split(args.get("path"), field="path", allow_root=False, limits=workspace.limits)
    except ToolError:
        return None
    key = f"file:{workspace.root}/{_display(parts)}"
    return ResourceClaims(writes=frozenset({key})) if write else ResourceClaims(reads=frozenset({key}))


def _always_safe(_args: Any) -> bool:
    return True


def _read_text_tool(ws: Workspace) -> ToolDefinition:
    async def execute(args: Any, _ctx: Any) -> dict[str, Any]:
        shown, text = await anyio.to_thread.run_sync(ws.read_text, args["path"])
        return {"path": shown, "text": text}

    def render(_args: Any, value: Any) -> list[dict[str, Any]]:
        return [{"type": "text", "text": value["text"]}]

    return define_tool(
        name="read_text",
        description=(
            "Read a whole UTF-8 text file from the workspace; returns {path, text} with the text exactly as "
            f"stored (line endings kept). {_path_rule(ws.limits)} Files over "
            f"{_size(ws.limits.max_read_bytes)}, binary files and files that are not UTF-8 are errors; "
            "use grep to find lines in large files."
        ),
        parameters={"path": _string("File to read, relative to the workspace root.", required=True)},
        output=ToolOutput(
            schema=_object({"path": _PATH_OUT, "text": {"type": "string"}}, ["path", "text"]),
            render=render,
        ),
        execute=execute,
        is_concurrency_safe=_always_safe,
        claims=lambda args: _claim(ws, args, write=False),
    )


def _write_text_tool(ws: Workspace) -> ToolDefinition:
    async def execute(args: Any, _ctx: Any) -> dict[str, Any]:
        shown, size = await anyio.to_thread.run_sync(ws.write_text, args["path"], args["text"])
        return {"path": shown, "bytes": size}

    def render(_args: Any, value: Any) -> list[dict[str, Any]]:
        return [{"type": "text", "text": f"Wrote {value['bytes']} bytes to {value['path']}"}]

    return define_tool(
        name="write_text",
        description=(
            "Create or replace a text file in the workspace with the given text (UTF-8); missing parent "
            "directories are created and the replacement is atomic. Returns {path, bytes} with the number "
            f"of bytes written. {_path_rule(ws.limits)} Texts over {_size(ws.limits.max_write_bytes)} "
            "are refused, "
            f"and so is a write that would take what the tools added to the workspace past "
            f"{_size(ws.limits.max_workspace_bytes)} (files count in 4 KiB blocks)."
        ),
        parameters={
            "path": _string("File to write, relative to the workspace root.", required=True),
            "text": _string("The complete new content of the file.", required=True),
        },
        output=ToolOutput(
            schema=_object(
                {"path": _PATH_OUT, "bytes": {"type": "integer", "description": "UTF-8 bytes written."}},
                ["path", "bytes"],
            ),
            render=render,
        ),
        execute=execute,
        claims=lambda args: _claim(ws, args, write=True),
    )


def _list_files_tool(ws: Workspace) -> ToolDefinition:
    async def execute(args: Any, _ctx: Any) -> dict[str, Any]:
        # (not abandoned on cancellation: the thread checks for it between directories and stops)
        files, truncated = await anyio.to_thread.run_sync(
            functools.partial(ws.list_files, args.get("dir"), checkpoint=anyio.from_thread.check_cancelled))
        return {"files": files, "truncated": truncated}

    def render(_args: Any, value: Any) -> list[dict[str, Any]]:
        lines = list(value["files"]) or ["(no files)"]
        if value["truncated"]:
            lines.append(f"(list cut at {ws.limits.max_list_files} files; list a subdirectory)")
        return [{"type": "text", "text": "\n".join(lines)}]

    return define_tool(
        name="list_files",
        description=(
            "List the files under a workspace directory, recursively; returns {files, truncated} where "
            "files are sorted paths relative to the workspace root (ready for read_text). dir defaults to "
            f"the root. {_path_rule(ws.limits)} Links to directories are not descended and .git/.hg/.svn "
            "are skipped. "
            f"At most {ws.limits.max_list_files} files are returned; truncated says the list was cut."
        ),
        parameters={"dir": _string('Directory to list, relative to the root (default ".").', required=False)},
        output=ToolOutput(
            schema=_object(
                {"files": {"type": "array", "items": {"type": "string"}}, "truncated": _TRUNCATED},
                ["files", "truncated"],
            ),
            render=render,
        ),
        execute=execute,
        is_concurrency_safe=_always_safe,
    )


def _grep_tool(ws: Workspace) -> ToolDefinition:
    limits = ws.limits

    async def execute(args: Any, _ctx: Any) -> dict[str, Any]:
        # (not abandoned on cancellation: the thread checks for it between lines and stops)
        ws.compile_pattern(args["pattern"])  # (a bad pattern fails here, before a thread is taken)
        matches, truncated, long_lines = await anyio.to_thread.run_sync(functools.partial(
            ws.search, args["pattern"], args.get("dir"), checkpoint=anyio.from_thread.check_cancelled))
        found = [{"path": m.path, "line": m.line, "text": m.text} for m in matches]
        value: dict[str, Any] = {"matches": found, "truncated": truncated}
        if long_lines:
            value["long_lines"] = long_lines
        return value

    def render(_args: Any, value: Any) -> list[dict[str, Any]]:
        lines = [f"{m['path']}:{m['line']}: {m['text']}" for m in value["matches"]] or ["(no matches)"]
        if value["truncated"]:
            lines.append(f"(search cut at {limits.max_grep_matches} matches or {limits.max_grep_seconds:g} "
                         "seconds; narrow the pattern or dir)")
        if value.get("long_lines"):
            lines.append(f"({value['long_lines']} lines over {limits.max_grep_scan_chars} characters "
                         "were not searched)")
        return [{"type": "text", "text": "\n".join(lines)}]

    match_schema = _object(
        {
            "path": {"type": "string", "description": "Root-relative path of the file."},
            "line": {"type": "integer", "description": "1-based line number."},
            "text": {"type": "string", "description": "The matching line, without its line ending."},
        },
        ["path", "line", "text"],
    )
    return define_tool(
        name="grep",
        description=(
            "Search workspace text files for lines containing a match of a regular expression in RE2 "
            "syntax (Python's re syntax without backreferences or lookaround; \\w, \\d, \\s and \\b are "
            "ASCII; case-sensitive, use (?i) for case-insensitive); returns {matches: [{path, line, "
            "text}], truncated} in path and line order. dir is a directory (searched recursively) or one "
            f"file and defaults to the root. {_path_rule(limits)} Binary, non-UTF-8 and files over "
            f"{_size(limits.max_grep_file_bytes)} are skipped, and lines over "
            f"{limits.max_grep_scan_chars} characters are not searched (long_lines counts them); at most "
            f"{limits.max_grep_matches} matches are returned, a search stops after "
            f"{limits.max_grep_seconds:g} seconds (truncated says the result was cut) and lines are cut "
            f"at {limits.max_grep_line_chars} characters."
        ),
        parameters={
            "pattern": _string("Regular expression (RE2 syntax) searched in each line.", required=True),
            "dir": _string('Directory or file to search, relative to the root (default ".").',
                           required=False),
        },
        output=ToolOutput(
            schema=_object(
                {"matches": {"type": "array", "items": match_schema}, "truncated": _TRUNCATED,
                 "long_lines": {"type": "integer", "description": "Lines too long to search, if any."}},
                ["matches", "truncated"],
            ),
            render=render,
        ),
        execute=execute,
        is_concurrency_safe=_always_safe,
    )


def workspace_tools(root: str | Path = ".", *, limits: WorkspaceLimits | None = None) -> list[ToolDefinition]:
    """The four workspace tools confined to ``root``: ``read_text``, ``write_text``, ``list_files``, ``grep``.

    ``root`` must be an existing directory (else :class:`codemode.runtime.UsageError`); it is resolved once,
    here. ``limits`` bounds sizes and result counts (:data:`DEFAULT_LIMITS`: 1 MiB reads and writes, 5000
    listed files, 200 grep matches, grep skips files over 1 MiB); the descriptions state the limits in force.
    """
    ws = Workspace(root, limits=limits)
    return [_read_text_tool(ws), _write_text_tool(ws), _list_files_tool(ws), _grep_tool(ws)]
