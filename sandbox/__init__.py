"""The sandbox: a RestrictedPython interpreter with async, run in isolated, resource-limited workers.

This package imports nothing from ``runtime``, ``sdk`` or ``tools``.
"""

from __future__ import annotations

from .lossless import (
    FrozenDict as FrozenDict,
)
from .lossless import (
    FrozenList as FrozenList,
)
from .lossless import (
    JsonValue as JsonValue,
)
from .lossless import (
    LosslessJsonError as LosslessJsonError,
)

__all__ = ("FrozenDict", "FrozenList", "JsonValue", "LosslessJsonError")
