"""Escape family A: walking the object graph from literals, functions and methods to ``open``."""

from __future__ import annotations

import pytest

from .conftest import Attack, EscapeHarness

ATTACKS = [
    Attack("subclass-walk-wrap-close", """
        subs = ().__class__.__base__.__subclasses__()
        wrap = [c for c in subs if c.__name__ == "_wrap_close"][0]
        return wrap.__init__.__globals__["__builtins__"]["open"](SECRET_PATH).read()
    """),
    Attack("subclass-walk-mro", """
        subs = ().__class__.__mro__[1].__subclasses__()
        loader = [c for c in subs if c.__name__ == "FileLoader"][0]
        return loader.get_data(None, SECRET_PATH)
    """),
    Attack("subclass-walk-catch-warnings", """
        subs = object.__subclasses__()
        cw = [c for c in subs if c.__name__ == "catch_warnings"][0]
        return cw()._module.__builtins__["open"](SECRET_PATH).read()
    """),
    Attack("metaclass-route", """
        metas = ().__class__.__class__.__subclasses__(().__class__.__class__)
        abcmeta = [m for m in metas if m.__name__ == "ABCMeta"][0]
        return abcmeta.register.__globals__["__builtins__"]["open"](SECRET_PATH).read()
    """),
    Attack("function-globals", """
        def f():
            return 1
        return f.__globals__["__builtins__"]["open"](SECRET_PATH).read()
    """),
    Attack("method-func-globals", """
        class C:
            def m(self):
                return 1
        return C().m.__func__.__globals__["__builtins__"]["open"](SECRET_PATH).read()
    """),
    Attack("init-globals-of-class", """
        class C:
            def __init__(self):
                self.x = 1
        return C.__init__.__globals__["__builtins__"]["open"](SECRET_PATH).read()
    """),
    Attack("builtin-self-is-builtins", """
        return len.__self__.open(SECRET_PATH).read()
    """),
    Attack("site-helper-globals", """
        return help.__call__.__globals__["sys"].modules["builtins"].open(SECRET_PATH).read()
    """),
    Attack("host-function-globals-via-facade", """
        import json
        return json.dumps.__globals__["__builtins__"]["open"](SECRET_PATH).read()
    """, mode="facades"),
    Attack("host-function-closure", """
        import functools
        deco = functools.lru_cache(maxsize=4)
        cells = deco.__closure__
        return cells[0].cell_contents.__globals__["__builtins__"]["open"](SECRET_PATH).read()
    """, plain="""
        import functools
        deco = functools.lru_cache(maxsize=4)
        return deco.__globals__["__builtins__"]["open"](SECRET_PATH).read()
    """),
    Attack("host-function-defaults", """
        import functools
        host = functools.update_wrapper.__defaults__[0]
        return host.__class__.__init__.__globals__["__builtins__"]["open"](SECRET_PATH).read()
    """, plain="""
        def f(x=open):
            return x
        return f.__defaults__[0](SECRET_PATH).read()
    """),
    Attack("reduce-ex-copyreg", """
        return (1).__reduce_ex__(2)[0].__globals__["__builtins__"]["open"](SECRET_PATH).read()
    """),
    Attack("builtins-name", """
        return __builtins__["open"](SECRET_PATH).read()
    """),
    Attack("gc-referents", """
        import gc
        for o in gc.get_objects():
            if isinstance(o, dict) and o.get("__name__") == "builtins" and "open" in o:
                return o["open"](SECRET_PATH).read()
    """),
    Attack("sys-modules-cache", """
        import sys
        return sys.modules["builtins"].open(SECRET_PATH).read()
    """),
    Attack("subclass-walk-computed", """
        base = getattr(getattr((), "__class__"), "__base__")
        subs = getattr(base, "__subclasses__")()
        loader = [c for c in subs if getattr(c, "__name__") == "FileLoader"][0]
        return loader.get_data(None, SECRET_PATH)
    """),
]


@pytest.mark.anyio
@pytest.mark.parametrize("attack", ATTACKS, ids=lambda a: a.id)
async def test_attack_is_blocked(escape: EscapeHarness, attack: Attack) -> None:
    """It reaches the secret under plain CPython and fails under the sandbox."""
    await escape.check(attack)
