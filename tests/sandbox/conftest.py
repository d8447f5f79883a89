"""Sandbox tests share module-scoped sandboxes, so the anyio backend fixture is session-scoped here."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    """Run the sandbox tests on asyncio (module-scoped async fixtures need a wider-scoped backend)."""
    return "asyncio"
