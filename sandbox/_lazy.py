"""PEP 562 lazy re-exports: a package names what it offers and where each name lives, and a submodule
is imported only when one of its names is first used.

One helper for every package of ``codemode`` (``codemode``, ``codemode.sandbox``, ``codemode.tools``). It
lives in the sandbox because the sandbox imports nothing outside itself; the others may import it.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ("lazy_exports",)


def lazy_exports(package: str,
                 homes: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module-level ``__getattr__`` and ``__dir__`` of ``package``.

    ``homes`` maps each lazily exported name to the module defining it, relative to ``package``
    (``".pool"``) or absolute. The first access imports that module and caches the value in the
    package's namespace, so later lookups never come back here; an unknown name raises
    :class:`AttributeError` naming the package, as a module without ``__getattr__`` would.
    """
    namespace = vars(sys.modules[package])

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home, package), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *homes})

    return __getattr__, __dir__
