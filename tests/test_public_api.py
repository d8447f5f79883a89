"""Every package re-exports its public API through a sorted tuple ``__all__``."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGES = ("codemode", "codemode.app", "codemode.runtime", "codemode.runtime.lowlevel", "codemode.sandbox",
            "codemode.sandbox.lowlevel", "codemode.sdk", "codemode.tools")


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
eager = {"codemode.app", "codemode.runtime", "codemode.tools"} & set(sys.modules)
assert not eager, eager
loaded = {name for name in sys.modules if name.startswith("codemode.sandbox.")}
assert loaded <= {"codemode.sandbox._lazy"}, loaded
from codemode import sandbox
assert "pydantic" not in sys.modules and "RestrictedPython" not in sys.modules, "eager sandbox"
assert "codemode.sandbox.pool" not in sys.modules, "eager sandbox"
assert "codemode.sandbox.interpreter" not in sys.modules, "eager sandbox"
import codemode.sandbox.lowlevel as lowlevel
assert "codemode.sandbox.interpreter" not in sys.modules, "sandbox.lowlevel loaded the interpreter"
import codemode.runtime
assert "RestrictedPython" not in sys.modules, "runtime pulled in the interpreter"
assert "pydantic" not in sys.modules, "runtime pulled in pydantic"
assert sandbox.Sandbox.__module__ == "codemode.sandbox.pool" and "codemode.sandbox.pool" in sys.modules
assert codemode.Sandbox is sandbox.Sandbox and codemode.ToolRuntime is codemode.runtime.ToolRuntime
assert codemode.CodeMode is codemode.tools.CodeMode
assert "pydantic" not in sys.modules, "CodeMode pulled in pydantic"
tool = codemode.tool
assert "pydantic" not in sys.modules, "codemode.tool pulled in pydantic before building a tool"
@tool
def add(a: int, b: int) -> int:
    return a + b
assert "pydantic" in sys.modules and add.name == "add"
import codemode.app
assert "mcp" not in sys.modules, "codemode.app pulled in the MCP SDK"
for package in (codemode, sandbox, codemode.app):
    assert sorted(set(dir(package)) & set(package.__all__)) == sorted(package.__all__)
    assert set(package._HOMES) <= set(package.__all__), "the lazy table names what __all__ does not"
    namespace = {}
    exec(f"from {package.__name__} import *", namespace)
    assert set(package.__all__) <= set(namespace)
    try:
        package.no_such_name
    except AttributeError as exc:
        assert "no_such_name" in str(exc) and package.__name__ in str(exc)
    else:
        raise AssertionError("a missing name must raise AttributeError")
for package in (codemode, sandbox, lowlevel):
    assert set(package._HOMES) == set(package.__all__), "the lazy table and __all__ disagree"
print("ok")
"""


def test_packages_import_their_parts_on_first_use() -> None:
    """``import codemode`` and ``codemode.sandbox`` (and so ``codemode.runtime``) load neither the
    host side nor the interpreter, and nothing loads pydantic until ``@tool`` builds a tool.

    A fresh interpreter checks it: what a module imports depends on what was imported before.
    """
    found = subprocess.run([sys.executable, "-c", _LAZY_CHECK], capture_output=True, text=True, check=False)
    assert found.returncode == 0 and found.stdout.strip() == "ok", found.stderr


def _type_checking_imports(path: Path) -> dict[str, str]:
    """``name -> module`` of the ``from .module import name as name`` lines under ``if TYPE_CHECKING:``."""
    found: dict[str, str] = {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for statement in node.body:
                assert isinstance(statement, ast.ImportFrom) and statement.level == 1, ast.dump(statement)
                for alias in statement.names:
                    assert alias.asname == alias.name, f"{alias.name} must be re-exported as itself"
                    found[alias.name] = "." + str(statement.module)
    return found


@pytest.mark.parametrize("name", ["codemode", "codemode.app", "codemode.sandbox",
                                  "codemode.sandbox.lowlevel"])
def test_the_lazy_table_and_the_type_checking_imports_say_the_same(name: str) -> None:
    """Each lazily exported name is listed once in ``_HOMES``; the ``TYPE_CHECKING`` imports that type
    checkers read (they cannot evaluate the table) name the same modules, so the two never drift."""
    module = importlib.import_module(name)
    assert module.__file__ is not None
    assert _type_checking_imports(Path(module.__file__)) == module._HOMES
