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


_LAZY_CHECK = """
import sys
import sandbox
assert "pydantic" not in sys.modules and "RestrictedPython" not in sys.modules, "eager sandbox"
assert "sandbox.pool" not in sys.modules and "sandbox.interpreter" not in sys.modules, "eager sandbox"
import runtime
assert "RestrictedPython" not in sys.modules, "runtime pulled in the interpreter"
assert "pydantic" not in sys.modules, "runtime pulled in pydantic"
assert sandbox.Sandbox.__module__ == "sandbox.pool" and "sandbox.pool" in sys.modules
assert sorted(set(dir(sandbox)) & set(sandbox.__all__)) == sorted(sandbox.__all__)
assert set(sandbox._HOMES) == set(sandbox.__all__), "the lazy table and __all__ disagree"
namespace = {}
exec("from sandbox import *", namespace)
assert set(sandbox.__all__) <= set(namespace)
try:
    sandbox.no_such_name
except AttributeError as exc:
    assert "no_such_name" in str(exc)
else:
    raise AssertionError("a missing name must raise AttributeError")
print("ok")
"""


def test_the_sandbox_package_imports_its_parts_on_first_use() -> None:
    """``import sandbox`` (and so ``import runtime``) loads neither the host side nor the interpreter.

    A fresh interpreter checks it: what a module imports depends on what was imported before.
    """
    import subprocess
    import sys

    found = subprocess.run([sys.executable, "-c", _LAZY_CHECK], capture_output=True, text=True, check=False)
    assert found.returncode == 0 and found.stdout.strip() == "ok", found.stderr
