"""Reliability tests run on anyio's asyncio backend; every test is bounded by ``anyio.fail_after``."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """Module-scoped so module-scoped async fixtures (one runtime per module) can use it."""
    return "asyncio"
