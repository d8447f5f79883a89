"""Escape family C: attribute access hidden from static checks (computed names, helpers, leaks)."""

from __future__ import annotations

import pytest

from .conftest import Attack, EscapeHarness

ATTACKS = [
    Attack("getattr-concatenated-dunder", """
        f = (lambda: 0)
        g = getattr(f, "__glo" + "bals__")
        return g["__builtins__"]["open"](SECRET_PATH).read()
    """),
    Attack("getattr-chr-built-name", """
        name = "".join(map(chr, [95, 95, 103, 108, 111, 98, 97, 108, 115, 95, 95]))
        return getattr(lambda: 0, name)["__builtins__"]["open"](SECRET_PATH).read()
    """),
    Attack("getattr-escaped-name", """
        return getattr(lambda: 0, "\\x5f\\x5fglobals\\x5f\\x5f")["__builtins__"]["open"](SECRET_PATH).read()
    """),
    Attack("vars-of-module", """
        import json
        return vars(json)["codecs"].sys.modules["builtins"].open(SECRET_PATH).read()
    """),
    Attack("dunder-dict", """
        import json
        return json.__dict__["codecs"].sys.modules["builtins"].open(SECRET_PATH).read()
    """),
    Attack("object-getattribute", """
        import json
        codecs = object.__getattribute__(json, "codecs")
        return codecs.sys.modules["builtins"].open(SECRET_PATH).read()
    """),
    Attack("object-getattribute-computed", """
        import json
        get = getattr(object, "__getattri" + "bute__")
        return get(json, "codecs").sys.modules["builtins"].open(SECRET_PATH).read()
    """),
    Attack("bound-getattribute", """
        f = lambda: 0
        return f.__getattribute__("__globals__")["__builtins__"]["open"](SECRET_PATH).read()
    """),
    Attack("operator-attrgetter", """
        import operator
        g = operator.attrgetter("__globals__")(lambda: 0)
        return g["__builtins__"]["open"](SECRET_PATH).read()
    """),
    Attack("operator-methodcaller", """
        import operator
        g = operator.methodcaller("__getattribute__", "__globals__")(lambda: 0)
        return g["__builtins__"]["open"](SECRET_PATH).read()
    """),
    Attack("functools-partial-getattr", """
        import functools
        g = functools.partial(getattr, lambda: 0)("__globals__")
        return g["__builtins__"]["open"](SECRET_PATH).read()
    """),
    Attack("map-getattr", """
        g = list(map(getattr, [lambda: 0], ["__globals__"]))[0]
        return g["__builtins__"]["open"](SECRET_PATH).read()
    """),
    Attack("sorted-key-getattr", """
        found = []
        sorted([lambda: 0], key=lambda f: found.append(getattr(f, "__globals__")) or 0)
        return found[0]["__builtins__"]["open"](SECRET_PATH).read()
    """),
    Attack("attribute-error-obj", """
        import json
        try:
            json.no_such_member
        except AttributeError as e:
            return e.obj.codecs.sys.modules["builtins"].open(SECRET_PATH).read()
    """),
    Attack("attribute-error-obj-computed", """
        import json
        try:
            json.no_such_member
        except AttributeError as e:
            return getattr(e, "obj").codecs.sys.modules["builtins"].open(SECRET_PATH).read()
    """),
    Attack("str-subclass-name", """
        class Name(str):
            def startswith(self, prefix):
                return False
        g = getattr(lambda: 0, Name("__globals__"))
        return g["__builtins__"]["open"](SECRET_PATH).read()
    """),
    # (hasattr and getattr-with-default read a refused name as a missing one; the plain read raises)
    Attack("hasattr-then-getattr", """
        f = lambda: 0
        g = getattr(f, "__globals__", None)
        if g is None and not hasattr(f, "__globals__"):
            g = getattr(f, "__globals__")
        return g["__builtins__"]["open"](SECRET_PATH).read()
    """),
    Attack("getattr-default-probe", """
        f = lambda: 0
        g = getattr(f, "__globals__", {"__builtins__": {}})
        return g["__builtins__"]["open"](SECRET_PATH).read()
    """),
    # (__name__ and __qualname__ are readable strings; they lead nowhere else)
    Attack("name-then-class", """
        e = ValueError("x")
        assert type(e).__name__ == "ValueError" and type(e).__qualname__ == "ValueError"
        root = e.__class__.__mro__[-1]
        loader = [c for c in root.__subclasses__() if c.__name__ == "FileLoader"][0]
        return loader.get_data(None, SECRET_PATH).decode()
    """),
    Attack("name-of-a-function-to-globals", """
        f = lambda: 0
        names = [f.__name__, f.__qualname__, getattr(f, "__name__")]
        return getattr(f, "__glob" + "als__")["__builtins__"]["open"](SECRET_PATH).read()
    """),
    Attack("namedtuple-api-to-globals", """
        import collections
        P = collections.namedtuple("P", ["a"])
        return P._make.__func__.__globals__["__builtins__"]["open"](SECRET_PATH).read()
    """),
    Attack("type-dict", """
        g = type(lambda: 0).__dict__["__globals__"].__get__(lambda: 0)
        return g["__builtins__"]["open"](SECRET_PATH).read()
    """),
    Attack("super-getattribute", """
        class C:
            def m(self):
                return super().__getattribute__("m").__globals__
        return C().m()["__builtins__"]["open"](SECRET_PATH).read()
    """),
]


@pytest.mark.anyio
@pytest.mark.parametrize("attack", ATTACKS, ids=lambda a: a.id)
async def test_attack_is_blocked(escape: EscapeHarness, attack: Attack) -> None:
    """It reaches the secret under plain CPython and fails under the sandbox."""
    await escape.check(attack)
