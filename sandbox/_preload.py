"""What a worker can still import once its file system is gone: the template loads it all beforehand.

The template pivots into an empty root before it forks a worker (``mount-ns``), so every module a
worker may ever import must be in memory by then. The sandbox modules and the executor import what they
use at their top level; :data:`PRELOAD` adds what the standard library imports lazily, inside functions
a program can reach (``datetime.strptime`` imports ``_strptime``, ``str.encode`` imports
``encodings.<name>``, a regular expression with ``\\N{...}`` imports ``unicodedata``). An entry is

- ``"name"``: imported by the template (extension modules must be listed so: they are files);
- ``"package.*"``: every pure-Python module of the package is read into memory (its bytecode, ~600 KiB
  for all the text codecs) and imported by the worker that first needs it, from memory: cheaper for
  the template than importing all of them, and the same for a worker.

After the pivot, :class:`AfterPivot` is the first meta-path finder: it serves the modules held in
memory and fails every other import at once with a ``ModuleNotFoundError`` that names this list (the
path finders would only fail to find the files). :func:`warm_lazy_state` runs, once, what initialises
state lazily from files (OpenSSL's hash providers, the local time zone, strptime's locale tables).

Extending: a facade that gains a module (``csv``) adds it here together with what it imports lazily;
the tests run every facade's lazy paths in a real worker and check statically that each function-level
import of an allowed module is preloaded. ``zoneinfo`` would also need its time-zone files: read them
into memory here, and serve ``ZoneInfo`` from those bytes (``ZoneInfo.from_file``).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.abc
import importlib.util
import marshal
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.machinery import ModuleSpec
from types import CodeType, ModuleType
from typing import Final

__all__ = ("PRELOAD", "AfterPivot", "load", "warm_lazy_state")

PRELOAD: Final = (
    "_strptime",  # datetime.strptime, time.strptime
    "unicodedata", "stringprep",  # "\\N{...}" in re and str, the idna codec
    "asyncio", "selectors", "traceback", "linecache",  # the worker and the interpreter
    "encodings.*",  # every text codec: str.encode/bytes.decode import encodings.<name> on first use
    # the extension modules the CJK codecs import
    "_multibytecodec", "_codecs_cn", "_codecs_hk", "_codecs_iso2022", "_codecs_jp", "_codecs_kr",
    "_codecs_tw",
)


@dataclass(frozen=True, slots=True)
class _Stored:
    """One module held in memory: its bytecode (or, without a current cache file, its source)."""

    origin: str
    body: bytes
    compiled: bool

    def code(self) -> CodeType:
        if self.compiled:
            code = marshal.loads(self.body)
            assert isinstance(code, CodeType)
            return code
        return compile(self.body, self.origin, "exec", dont_inherit=True)


_STORED: dict[str, _Stored] = {}


def load(names: Sequence[str]) -> None:
    """Import (``name``) or store (``package.*``) each entry; an entry that cannot be had is skipped
    only if it is a module of another platform (ImportError), never silently otherwise."""
    for name in names:
        if name.endswith(".*"):
            _store_package(importlib.import_module(name[:-2]))
        else:
            importlib.import_module(name)


def _store_package(package: ModuleType) -> None:
    for directory in getattr(package, "__path__", ()):
        for entry in sorted(os.listdir(directory)):
            stem, dot, suffix = entry.rpartition(".")
            name = f"{package.__name__}.{stem}"
            if dot and suffix == "py" and stem != "__init__" and name not in sys.modules:
                _STORED[name] = _read(os.path.join(directory, entry))


def _read(source: str) -> _Stored:
    """The module's current bytecode from its cache file, else its source (compiled when imported)."""
    stat = os.stat(source)
    with contextlib.suppress(OSError, NotImplementedError, ValueError):
        with open(importlib.util.cache_from_source(source), "rb") as handle:
            data = handle.read()
        magic, flags = data[:4], int.from_bytes(data[4:8], "little")
        mtime, size = int.from_bytes(data[8:12], "little"), int.from_bytes(data[12:16], "little")
        if (magic == importlib.util.MAGIC_NUMBER and flags == 0
                and mtime == int(stat.st_mtime) & 0xFFFFFFFF and size == stat.st_size & 0xFFFFFFFF):
            return _Stored(source, data[16:], True)
    with open(source, "rb") as handle:
        return _Stored(source, handle.read(), False)


def warm_lazy_state() -> None:
    """Run, once, what initialises state lazily from files: OpenSSL's hash providers, the local time
    zone, the idna codec, strptime's locale tables (and ``_datetime``'s handle on ``_strptime``) and the
    ``zoneinfo`` facade's time zones."""
    import datetime
    import hashlib
    import time

    for name in sorted(hashlib.algorithms_available):
        with contextlib.suppress(ValueError):
            hashlib.new(name, b"")
    time.localtime()
    "sandbox.example".encode("idna")
    datetime.datetime.strptime("2000-01-02 03:04", "%Y-%m-%d %H:%M")
    from ._stdlib_facades import load_zones  # (the zoneinfo facade's time zones)

    load_zones()


class AfterPivot(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """The first meta-path finder once the file system is gone: modules held in memory, or a clear
    failure (never a search of paths that no longer exist)."""

    def find_spec(self, name: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> ModuleSpec:
        stored = _STORED.get(name)
        if stored is None:
            raise ModuleNotFoundError(
                f"No module named {name!r} in the sandbox worker: only modules loaded before it gave up "
                "the file system can be imported (add it to codemode.sandbox._preload.PRELOAD)", name=name)
        spec = ModuleSpec(name, self, origin=stored.origin)
        spec.has_location = True
        return spec

    def create_module(self, spec: ModuleSpec) -> None:
        return None  # (the default module object)

    def exec_module(self, module: ModuleType) -> None:
        stored = _STORED[module.__name__]
        module.__file__ = stored.origin
        exec(stored.code(), module.__dict__)
