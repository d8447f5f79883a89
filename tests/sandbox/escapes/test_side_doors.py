"""Escape families G and H: interpreter internals, forbidden builtins, modules off the allow-list, and
reading files through error messages."""

from __future__ import annotations

import pytest

from .conftest import Attack, EscapeHarness

_COPY = '"cp " + SECRET_PATH + " " + TARGET_PATH'

ATTACKS = [
    Attack("plain-open", "return open(SECRET_PATH).read()"),
    Attack("int-error-message", """
        try:
            int(*open(SECRET_PATH))
        except ValueError as e:
            return str(e)
    """),
    Attack("exit-code", """
        try:
            exit(open(SECRET_PATH).read())
        except SystemExit as e:
            return str(e.code)
    """),
    Attack("globals-builtins", 'return globals()["__builtins__"]["open"](SECRET_PATH).read()'),
    Attack("locals-vars-dir", """
        import json
        return vars(json)["__builtins__"]["open"](SECRET_PATH).read()
    """),
    Attack("eval-call", 'return eval("open(SECRET_PATH).read()")'),
    Attack("exec-call", """
        ns = {}
        exec("result = open(SECRET_PATH).read()", ns)
        return ns["result"]
    """),
    Attack("eval-alias", """
        run = eval
        return run("open(SECRET_PATH).read()")
    """),
    Attack("compile-and-exec-alias", """
        ns = {}
        run = exec
        run(compile("result = open(SECRET_PATH).read()", "x", "exec"), ns)
        return ns["result"]
    """),
    Attack("dunder-import", 'return __import__("builtins").open(SECRET_PATH).read()'),
    Attack("import-builtins", """
        import builtins
        return builtins.open(SECRET_PATH).read()
    """),
    Attack("import-os", """
        import os
        return os.read(os.open(SECRET_PATH, 0), 200)
    """),
    Attack("import-dotted-os-path", """
        import os.path
        return os.read(os.open(SECRET_PATH, 0), 200)
    """),
    Attack("from-os-import", """
        from os import read, open as op
        return read(op(SECRET_PATH, 0), 200)
    """),
    Attack("import-io", """
        import io
        return io.open(SECRET_PATH).read()
    """),
    Attack("import-pathlib", """
        import pathlib
        return pathlib.Path(SECRET_PATH).read_text()
    """),
    Attack("import-shutil", """
        import shutil
        shutil.copy(SECRET_PATH, TARGET_PATH)
        return 1
    """),
    Attack("import-subprocess", f"""
        import subprocess
        subprocess.run({_COPY}, shell=True, check=False)
        return 1
    """, mode="subprocess"),
    Attack("import-importlib", """
        import importlib
        return importlib.import_module("builtins").open(SECRET_PATH).read()
    """),
    Attack("import-linecache", """
        import linecache
        return linecache.getline(SECRET_PATH, 1)
    """),
    Attack("traceback-reads-source-file", """
        import traceback
        try:
            exec(compile("1/0", SECRET_PATH, "exec"))
        except ZeroDivisionError:
            return traceback.format_exc()
    """),
    Attack("pickle-reduce", f"""
        import pickle, os
        class E:
            def __reduce__(self):
                return (os.system, ({_COPY},))
        pickle.loads(pickle.dumps(E()))
        return 1
    """, mode="subprocess"),
    Attack("ctypes-libc-system", f"""
        import ctypes
        ctypes.CDLL(None).system(({_COPY}).encode())
        return 1
    """, mode="subprocess"),
    Attack("types-function-type", """
        import types
        return types.FunctionType((lambda: open(SECRET_PATH).read()).__code__, {})()
    """),
    Attack("except-star", """
        try:
            raise ExceptionGroup("g", [ValueError("v")])
        except* ValueError:
            found = open(SECRET_PATH).read()
        return found
    """),
    Attack("exception-group-name", """
        try:
            raise ExceptionGroup("g", [ValueError(open(SECRET_PATH).read())])
        except ExceptionGroup as g:
            return str(g.exceptions[0])
    """),
    Attack("relative-import", """
        from . import conftest
        return conftest.os.read(conftest.os.open(SECRET_PATH, 0), 200)
    """, plain="""
        import importlib
        conftest = importlib.import_module("tests.sandbox.escapes.conftest")
        return conftest.os.read(conftest.os.open(SECRET_PATH, 0), 200)
    """),
]


@pytest.mark.anyio
@pytest.mark.parametrize("attack", ATTACKS, ids=lambda a: a.id)
async def test_attack_is_blocked(escape: EscapeHarness, attack: Attack) -> None:
    """It reaches the secret under plain CPython and fails under the sandbox."""
    await escape.check(attack)
