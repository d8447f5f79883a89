"""Fixtures for the SDK tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def mypy_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One mypy cache for the whole session, so only the first check analyses the standard library."""
    return tmp_path_factory.mktemp("mypy-cache")
