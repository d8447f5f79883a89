"""Escape family B: generator, coroutine, async-generator, traceback and explicit frame walks."""

from __future__ import annotations

import pytest

from .conftest import Attack, EscapeHarness

ATTACKS = [
    Attack("generator-frame-builtins", """
        def g():
            yield 1
        return g().gi_frame.f_builtins["open"](SECRET_PATH).read()
    """),
    Attack("generator-frame-globals", """
        def g():
            yield 1
        return g().gi_frame.f_globals["__builtins__"]["open"](SECRET_PATH).read()
    """),
    Attack("generator-frame-computed", """
        def g():
            yield 1
        frame = getattr(g(), "gi_" + "frame")
        return getattr(frame, "f_" + "builtins")["open"](SECRET_PATH).read()
    """),
    Attack("generator-expression-frame", """
        gen = (x for x in [1])
        return gen.gi_frame.f_builtins["open"](SECRET_PATH).read()
    """),
    Attack("coroutine-frame", """
        async def a():
            return 1
        c = a()
        found = c.cr_frame.f_builtins["open"](SECRET_PATH).read()
        c.close()
        return found
    """),
    Attack("coroutine-frame-computed", """
        async def a():
            return 1
        c = a()
        found = getattr(getattr(c, "cr_frame"), "f_builtins")["open"](SECRET_PATH).read()
        c.close()
        return found
    """),
    Attack("async-generator-frame", """
        async def ag():
            yield 1
        return ag().ag_frame.f_builtins["open"](SECRET_PATH).read()
    """),
    Attack("traceback-frame", """
        try:
            1 / 0
        except Exception as e:
            return e.__traceback__.tb_frame.f_builtins["open"](SECRET_PATH).read()
    """),
    Attack("traceback-frame-computed", """
        try:
            1 / 0
        except Exception as e:
            tb = getattr(e, "__traceback__")
            return getattr(getattr(tb, "tb_frame"), "f_builtins")["open"](SECRET_PATH).read()
    """),
    Attack("host-frames-from-facade-error", """
        import json
        try:
            json.loads("{")
        except Exception as e:
            tb = e.__traceback__
            while tb.tb_next is not None:
                tb = tb.tb_next
            return tb.tb_frame.f_globals["__builtins__"]["open"](SECRET_PATH).read()
    """, mode="facades"),
    Attack("sys-getframe", """
        import sys
        return sys._getframe().f_builtins["open"](SECRET_PATH).read()
    """),
    Attack("inspect-currentframe", """
        import inspect
        return inspect.currentframe().f_builtins["open"](SECRET_PATH).read()
    """),
    Attack("frame-code-replace", """
        def g():
            yield 1
        target = (lambda: open(SECRET_PATH).read()).__code__
        def f():
            return 0
        f.__code__ = target.replace(co_name=g().gi_code.co_name)
        return f()
    """),
]


@pytest.mark.anyio
@pytest.mark.parametrize("attack", ATTACKS, ids=lambda a: a.id)
async def test_attack_is_blocked(escape: EscapeHarness, attack: Attack) -> None:
    """It reaches the secret under plain CPython and fails under the sandbox."""
    await escape.check(attack)
