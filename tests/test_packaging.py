"""The distribution installs one import name, ``codemode``, and works beside a project's own modules.

The wheel is built from this checkout, installed into a fresh virtualenv (dependencies come from the
running environment through a path file, so nothing is downloaded), and then used from a directory that
holds its own ``tools.py``, ``runtime.py``, ``sandbox.py``, ``sdk.py`` and ``app.py``, the most common
module names in an agent project: importing any of them ends the process with a message, so a collision
cannot pass unnoticed.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import sysconfig
import textwrap
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
USER_MODULES = ("tools", "runtime", "sandbox", "sdk", "app")
PROGRAM = "r = await tools.add({'a': 2, 'b': 3})\nprint('sum', r['sum'])\nreturn r\n"
SCRIPTED_POST = '''
import json as _json
def post(path, body):
    assert path == "/chat/completions" and [t["function"]["name"] for t in body["tools"]] == ["run_code"]
    last = body["messages"][-1]
    if last["role"] == "tool":
        return {"choices": [{"finish_reason": "stop",
                             "message": {"role": "assistant", "content": "the sum is " + last["content"]}}]}
    program = "r = await tools.add({'a': 2, 'b': 3})\\nreturn r['sum']"
    arguments = _json.dumps({"code": program, "description": "add"})
    call = {"id": "call-1", "type": "function", "function": {"name": "run_code", "arguments": arguments}}
    return {"choices": [{"finish_reason": "tool_calls",
                         "message": {"role": "assistant", "content": None, "tool_calls": [call]}}]}
'''


def _library_examples() -> list[str]:
    """The README's Python blocks under its library heading (the short program, then the agent loop)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("\n## Library"):]
    section = section[:section.index("\n## ", 1)]
    found = re.findall(r"```python\n(.*?)```", section, re.DOTALL)
    assert len(found) >= 2, "README.md lacks the library examples"
    return found


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv with the wheel of this checkout installed; returns its ``bin`` directory."""
    base = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(base / "dist"),
                    str(ROOT)], check=True, capture_output=True, timeout=300)
    (wheel,) = (base / "dist").glob("codemode-*.whl")
    env_dir = base / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    where = "import sysconfig; print(sysconfig.get_path('purelib'))"
    purelib = Path(subprocess.run([str(python), "-c", where], check=True, capture_output=True,
                                  text=True).stdout.strip())
    before = set(os.listdir(purelib))
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps",
                    "--no-index", str(wheel)], check=True, capture_output=True, timeout=300)
    added = set(os.listdir(purelib)) - before
    assert {name for name in added if not name.endswith(".dist-info")} == {"codemode"}
    assert (purelib / "codemode" / "py.typed").is_file()
    # Dependencies: the running environment's site-packages, after the venv's own (which wins).
    (purelib / "_codemode_test_deps.pth").write_text(sysconfig.get_path("purelib") + "\n", encoding="utf-8")
    return env_dir / "bin"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A directory holding an agent project's own modules named like codemode's subpackages."""
    for name in USER_MODULES:
        (tmp_path / f"{name}.py").write_text(
            f"raise SystemExit('the project\\'s own {name}.py was imported')\n", encoding="utf-8")
    (tmp_path / "prog.py").write_text(PROGRAM, encoding="utf-8")
    return tmp_path


def _run(command: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(cwd)}
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False)


def test_the_wheel_runs_a_program_from_a_project_with_colliding_module_names(
    installed: Path, project: Path
) -> None:
    """The console script runs a ``run_code`` program; no project module is imported, even by the worker."""
    done = _run([str(installed / "codemode"), "run", "prog.py", "--quiet", "--json"], project)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["result"] == {"sum": 5} and result["logs"] == ["sum 5"]


@pytest.mark.parametrize(("index", "expected"), [(0, "5\n"), (1, "the sum is 5\n")],
                         ids=["first-program", "agent-loop"])
def test_the_readme_library_examples_run_from_such_a_project(installed: Path, project: Path,
                                                             index: int, expected: str) -> None:
    """The README's library examples work as written, with a scripted chat-completions endpoint standing
    in for the LLM."""
    example = _library_examples()[index]
    source = (SCRIPTED_POST if "post(" in example else "") + example
    (project / "agent.py").write_text(source, encoding="utf-8")
    done = _run([str(installed / "python"), "agent.py"], project)
    assert done.returncode == 0, done.stderr
    assert done.stdout == expected


def test_python_dash_m_codemode_is_the_command_line(installed: Path, project: Path) -> None:
    """``python -m codemode`` is the same command line as the console script."""
    done = _run([str(installed / "python"), "-m", "codemode", "call", "add", "--args", '{"a": 1, "b": 2}',
                 "--json"], project)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["value"] == {"sum": 3}


def test_the_old_top_level_names_are_not_installed(installed: Path, tmp_path: Path) -> None:
    """The installation offers ``codemode`` only: no ``app``, ``runtime``, ``sandbox``, ``sdk``, ``tools``."""
    probe = textwrap.dedent("""
        import importlib.util, sys
        names = ("app", "runtime", "sandbox", "sdk", "tools")
        found = [n for n in names if importlib.util.find_spec(n) is not None]
        print(",".join(found))
    """)
    done = _run([str(installed / "python"), "-c", probe], tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ""
