"""The compatibility suite shares one warm sandbox per module (every run still gets a fresh worker)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from codemode.sandbox import Sandbox


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    """Module-scoped async fixtures need a wider-scoped backend."""
    return "asyncio"


@pytest.fixture(scope="module")
async def sandbox() -> AsyncIterator[Sandbox]:
    """One sandbox (one template, one supply of workers) for the module's programs."""
    async with Sandbox() as box:
        yield box
