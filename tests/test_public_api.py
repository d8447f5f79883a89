"""Every package re-exports its public API through a sorted tuple ``__all__``."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

PACKAGES = ("codemode", "codemode.runtime", "codemode.sandbox", "codemode.sdk", "codemode.tools")


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
import codemode
eager = {"codemode.runtime", "codemode.sandbox", "codemode.tools"} & set(sys.modules)
assert not eager, eager
from codemode import sandbox
assert "pydantic" not in sys.modules and "RestrictedPython" not in sys.modules, "eager sandbox"
assert "codemode.sandbox.pool" not in sys.modules, "eager sandbox"
assert "codemode.sandbox.interpreter" not in sys.modules, "eager sandbox"
import codemode.runtime
assert "RestrictedPython" not in sys.modules, "runtime pulled in the interpreter"
assert "pydantic" not in sys.modules, "runtime pulled in pydantic"
assert sandbox.Sandbox.__module__ == "codemode.sandbox.pool" and "codemode.sandbox.pool" in sys.modules
assert codemode.Sandbox is sandbox.Sandbox and codemode.ToolRuntime is codemode.runtime.ToolRuntime
for package in (codemode, sandbox):
    assert sorted(set(dir(package)) & set(package.__all__)) == sorted(package.__all__)
    assert set(package._HOMES) == set(package.__all__), "the lazy table and __all__ disagree"
    namespace = {}
    exec(f"from {package.__name__} import *", namespace)
    assert set(package.__all__) <= set(namespace)
    try:
        package.no_such_name
    except AttributeError as exc:
        assert "no_such_name" in str(exc) and package.__name__ in str(exc)
    else:
        raise AssertionError("a missing name must raise AttributeError")
print("ok")
"""


def test_packages_import_their_parts_on_first_use() -> None:
    """``import codemode`` and ``codemode.sandbox`` (and so ``codemode.runtime``) load neither the
    host side nor the interpreter.

    A fresh interpreter checks it: what a module imports depends on what was imported before.
    """
    found = subprocess.run([sys.executable, "-c", _LAZY_CHECK], capture_output=True, text=True, check=False)
    assert found.returncode == 0 and found.stdout.strip() == "ok", found.stderr
