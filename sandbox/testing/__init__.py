"""Test-only parts of the sandbox: never used unless named explicitly.

:mod:`codemode.sandbox.testing.unrestricted` is an executor that runs programs as plain, unrestricted
CPython inside a real worker, so the operating-system layers can be tested on their own.
"""

from __future__ import annotations

__all__ = ()
