"""The import direction between the four subpackages of ``codemode`` is part of the design and is checked
here."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("app", "runtime", "sandbox", "sdk", "tools")
# package -> the packages (or exact modules) it may import from
ALLOWED: dict[str, set[str]] = {
    "sandbox": set(),
    "runtime": {"sandbox.lossless"},
    "sdk": {"runtime", "sandbox"},
    "tools": {"runtime", "sandbox", "sdk"},
    "app": {"runtime", "sandbox", "sdk", "tools"},
}


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append(node.module)
    return found


def _sources(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


@pytest.mark.parametrize("package", PACKAGES)
def test_package_imports_only_what_its_layer_allows(package: str) -> None:
    """It refuses imports that point up or across the layering."""
    offending = []
    for path in _sources(package):
        for full_name in _imports(path):
            if full_name.split(".")[0] in PACKAGES:
                offending.append(f"{path.relative_to(ROOT)} imports {full_name} (not under codemode)")
                continue
            if not full_name.startswith("codemode."):
                continue
            name = full_name.removeprefix("codemode.")
            top = name.split(".")[0]
            if top not in PACKAGES or top == package:
                continue
            allowed = ALLOWED[package]
            if top in allowed or any(name == m or name.startswith(m + ".") for m in allowed):
                continue
            offending.append(f"{path.relative_to(ROOT)} imports {full_name}")
    assert offending == []
