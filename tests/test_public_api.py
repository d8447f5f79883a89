"""Every package re-exports its public API through a sorted tuple ``__all__``."""

from __future__ import annotations

import importlib

import pytest

PACKAGES = ("runtime", "sandbox", "sdk", "tools")


@pytest.mark.parametrize("name", PACKAGES)
def test_all_is_a_sorted_tuple_of_real_names(name: str) -> None:
    """It names only attributes that exist, once each, sorted."""
    module = importlib.import_module(name)
    exported = module.__all__
    assert isinstance(exported, tuple)
    assert list(exported) == sorted(set(exported), key=str)
    missing = [item for item in exported if not hasattr(module, item)]
    assert missing == []
