"""SDK generation: the ``tools:sdk`` prompt declarations and ``.pyi`` stubs for program authors."""

from __future__ import annotations

__all__ = ()
