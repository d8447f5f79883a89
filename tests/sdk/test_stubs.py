"""The ``tools.pyi`` stub and the PEP 561 stub package."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from mypy import api

from codemode.sdk import render_stub_module, write_stub_package
from codemode.sdk.stubs import STUB_MODULE, STUB_PACKAGE
from tests.sdk.support import TOOL_SETS, declaration, obj, sig, signatures

RICH_TOOLS = [
    sig(
        "read_file",
        obj({"path": {"type": "string"}, "limit": {"type": "integer"}}, ["path"]),
        {"type": "string"},
        "Read.",
    ),
    sig("list", obj({}), {"type": "array", "items": {"type": "string"}}, "List names."),
    sig("str", obj({"self": {"type": "string"}, "args": {"type": "integer"}}, ["self"]), {"type": "integer"}),
    sig("Any", {}, {}),
    sig("my-mcp.tool", obj({"q": {"type": "string", "enum": ["a\u2028b", "c\ud800"]}}), {"type": "boolean"}),
    sig("_hidden", {"type": "object", "additionalProperties": {"type": "integer"}}, {"type": "null"}),
    sig(
        "pick", {"oneOf": [obj({"a": {"type": "integer"}}, ["a"]), obj({"b": {"type": "string"}}, ["b"])]}, {}
    ),
    sig("scale", obj({"factor": {"type": "number", "enum": [0.5, 2, 1e-7]}}, ["factor"]), {"type": "number"}),
    sig("rows", {"type": "array", "items": {"type": "integer"}}, {"type": ["string", "null"]}),
    sig("overload", obj({"x": {"type": "boolean"}}), {"type": "object", "additionalProperties": False}),
    sig("Literal", obj({"Literal": {"type": "string"}}), {}),
]


def test_stub_declares_the_prompts_classes_under_the_same_names() -> None:
    """It declares every TypedDict of the prompt section with the same name."""
    stub = render_stub_module(RICH_TOOLS)
    prompt_classes = {line for line in declaration(*RICH_TOOLS).split("\n") if line.endswith("(TypedDict):")}
    stub_classes = {line for line in stub.split("\n") if line.endswith("(TypedDict):")}
    assert prompt_classes == stub_classes
    assert prompt_classes


def test_stub_offers_both_call_forms() -> None:
    """It overloads each call protocol for the dict form and the keyword form."""
    stub = render_stub_module([RICH_TOOLS[0]])
    assert "    async def __call__(self, args: ReadFileArgs, /) -> str: ..." in stub
    assert "    async def __call__(self, /, **kwargs: _Unpack[ReadFileArgs]) -> str: ..." in stub
    assert '    read_file: _ReadFileCall\n    """Read."""' in stub
    assert '    def __getitem__(self, name: _Literal["read_file"], /) -> _ReadFileCall: ...' in stub


def test_stub_widens_fractional_literals_for_checkers() -> None:
    """It renders Literal[1.5] of the prompt as float in the stub, since PEP 586 forbids float literals."""
    assert "factor: Literal[0.5, 2, 1e-7]" in declaration(RICH_TOOLS[7])
    assert "    factor: float\n" in render_stub_module([RICH_TOOLS[7]])
    mixed = sig("m", obj({"v": {"enum": ["a", 1, 0.5, True, None]}}, ["v"]))
    assert 'v: Literal[1, 0.5, "a", True, None]' not in render_stub_module([mixed])
    assert '    v: Literal["a", True, None] | float\n' in render_stub_module([mixed])


def test_stub_of_an_empty_set() -> None:
    """It declares an empty Tools protocol that cannot be subscripted."""
    stub = render_stub_module([])
    assert "class Tools(_Protocol):\n    pass\n" in stub
    assert "__getitem__" not in stub
    ast.parse(stub)


def test_stub_passes_mypy_strict(tmp_path: Path, mypy_cache: Path) -> None:
    """It type-checks cleanly under mypy --strict, even with tools named list, str, Any and overload."""
    path = tmp_path / f"{STUB_MODULE}.pyi"
    path.write_text(render_stub_module(RICH_TOOLS), encoding="utf-8")
    config = tmp_path / "mypy.ini"
    config.write_text("[mypy]\n", encoding="utf-8")
    stdout, stderr, status = api.run(
        [
            "--config-file",
            str(config),
            "--strict",
            "--no-site-packages",
            "--cache-dir",
            str(mypy_cache),
            str(path),
        ]
    )
    assert (status, stdout, stderr) == (0, "Success: no issues found in 1 source file\n", "")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(TOOL_SETS)
def test_property_stub_always_parses(raw: list[tuple[str, str, Any, Any]]) -> None:
    """It renders a parseable, UTF-8-encodable stub declaring exactly the prompt's public classes."""
    tools = signatures(raw)
    stub = render_stub_module(tools)
    stub.encode("utf-8")
    tree = ast.parse(stub, feature_version=(3, 11))
    stub_classes = {node.name for node in tree.body if isinstance(node, ast.ClassDef)}
    prompt_tree = ast.parse(declaration(*tools))
    prompt_classes = {node.name for node in prompt_tree.body if isinstance(node, ast.ClassDef)}
    assert prompt_classes - {"Tools"} <= stub_classes
    assert {name for name in stub_classes - prompt_classes if not name.startswith("_")} == set()


def test_write_stub_package_layout(tmp_path: Path) -> None:
    """It writes tools.pyi and a PEP 561 stub-only package with the same text."""
    out = tmp_path / "out" / "nested"
    written = write_stub_package(RICH_TOOLS, out)
    assert written == [
        out / "tools.pyi",
        out / STUB_PACKAGE / "__init__.pyi",
        out / STUB_PACKAGE / "py.typed",
    ]
    text = render_stub_module(RICH_TOOLS)
    assert (out / "tools.pyi").read_text(encoding="utf-8") == text
    assert (out / STUB_PACKAGE / "__init__.pyi").read_text(encoding="utf-8") == text
    assert (out / STUB_PACKAGE / "py.typed").read_text(encoding="utf-8") == ""


def test_write_stub_package_is_idempotent(tmp_path: Path) -> None:
    """It overwrites an earlier package in place."""
    write_stub_package([sig("a")], tmp_path)
    write_stub_package([sig("b")], tmp_path)
    assert "    b: _BCall" in (tmp_path / "tools.pyi").read_text(encoding="utf-8")


def test_write_stub_package_into_a_file_fails_with_os_error(tmp_path: Path) -> None:
    """It raises OSError naming the path when the output directory is a file."""
    target = tmp_path / "file"
    target.write_text("x", encoding="utf-8")
    with pytest.raises(OSError, match="file"):
        write_stub_package([sig("a")], target)


_USE_PROGRAM = (
    "from {module} import ReadFileArgs, ToolCallError, Tools, tools\n"
    "async def main(t: Tools) -> str:\n"
    "    args: ReadFileArgs = {{'path': 'x'}}\n"
    "    try:\n"
    "        return await t.read_file(args) + await tools.read_file(path='y')\n"
    "    except ToolCallError as err:\n"
    "        return err.code + err.tool_name\n"
)


def _mypy_strict(tmp_path: Path, cache: Path, program: str, *extra: str) -> tuple[int, str]:
    path = tmp_path / "use.py"
    path.write_text(program, encoding="utf-8")
    config = tmp_path / "mypy.ini"
    config.write_text("[mypy]\n", encoding="utf-8")
    stdout, _, status = api.run(
        ["--config-file", str(config), "--strict", "--cache-dir", str(cache), *extra, str(path)]
    )
    return status, stdout


def test_stub_package_is_found_on_the_python_path(tmp_path: Path, mypy_cache: Path) -> None:
    """It lets mypy resolve codemode_tools from the PEP 561 package when out_dir is on PYTHONPATH."""
    write_stub_package(RICH_TOOLS, tmp_path / "stubs")
    program = tmp_path / "use.py"
    program.write_text(_USE_PROGRAM.format(module=STUB_MODULE), encoding="utf-8")
    config = tmp_path / "mypy.ini"
    config.write_text("[mypy]\n", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "stubs")}
    command = [sys.executable, "-m", "mypy", "--config-file", str(config), "--strict"]
    done = subprocess.run(
        [*command, "--cache-dir", str(mypy_cache), str(program)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stdout) == (0, "Success: no issues found in 1 source file\n")


def test_tools_pyi_is_found_on_mypy_path(
    tmp_path: Path, mypy_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It lets mypy resolve the plain tools.pyi when out_dir is on MYPYPATH."""
    write_stub_package(RICH_TOOLS, tmp_path / "stubs")
    monkeypatch.setenv("MYPYPATH", str(tmp_path / "stubs"))
    status, stdout = _mypy_strict(
        tmp_path, mypy_cache, _USE_PROGRAM.format(module="tools"), "--no-site-packages"
    )
    assert (status, stdout) == (0, "Success: no issues found in 1 source file\n")
