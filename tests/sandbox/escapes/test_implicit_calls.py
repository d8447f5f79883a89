"""Escape family E: code run without a call expression (dunder protocols, decorators, hooks).

Under plain CPython each payload gets its protocol method called implicitly and reads the secret from
there. In the sandbox the protocol methods cannot be defined (only ``__init__``, ``__eq__`` and the
rich comparisons may be), and where one runs, it has nothing to reach ``open`` with.
"""

from __future__ import annotations

import pytest

from .conftest import Attack, EscapeHarness

ATTACKS = [
    Attack("enter-exit", """
        class M:
            def __enter__(self):
                return open(SECRET_PATH).read()
            def __exit__(self, *exc):
                return False
        with M() as found:
            return found
    """),
    Attack("iadd", """
        class A:
            def __iadd__(self, other):
                return open(SECRET_PATH).read()
        a = A()
        a += 1
        return a
    """),
    Attack("eq-called-by-dict-lookup", """
        found = []
        class K:
            def __eq__(self, other):
                found.append(open(SECRET_PATH).read())
                return True
            def __hash__(self):
                return hash("k")
        {"k": 1}.get(K())
        return found
    """),
    Attack("eq-allowed-but-powerless", """
        found = []
        class K:
            def __eq__(self, other):
                found.append(getattr(other, "__globals__")["__builtins__"]["open"](SECRET_PATH).read())
                return False
        [lambda: 0].count(K())
        return found
    """),
    Attack("init-subclass", """
        found = []
        class Base:
            def __init_subclass__(cls):
                found.append(open(SECRET_PATH).read())
        class Child(Base):
            pass
        return found
    """),
    Attack("set-name", """
        found = []
        class D:
            def __set_name__(self, owner, name):
                found.append(open(SECRET_PATH).read())
        class C:
            d = D()
        return found
    """),
    Attack("class-getitem", """
        class C:
            def __class_getitem__(cls, item):
                return open(item).read()
        return C[SECRET_PATH]
    """),
    Attack("class-getitem-via-for-target", """
        class C:
            pass
        for C.__class_getitem__ in [classmethod(lambda cls, item: open(item).read())]:
            pass
        return C[SECRET_PATH]
    """),
    Attack("index", """
        class I:
            def __index__(self):
                raise ValueError(open(SECRET_PATH).read())
        try:
            [1, 2][I()]
        except ValueError as e:
            return str(e)
    """),
    Attack("format-dunder", """
        class F:
            def __format__(self, spec):
                return open(SECRET_PATH).read()
        return f"{F()}"
    """),
    Attack("repr-called-by-host", """
        class R:
            def __repr__(self):
                return open(SECRET_PATH).read()
        return repr([R()])
    """),
    Attack("getattr-hook", """
        class G:
            def __getattr__(self, name):
                return open(SECRET_PATH).read()
        return G().anything
    """),
    Attack("del-hook", """
        found = []
        class D:
            def __del__(self):
                found.append(open(SECRET_PATH).read())
        d = D()
        del d
        return found
    """),
    Attack("missing-hook", """
        class M(dict):
            def __missing__(self, key):
                return open(key).read()
        return M()[SECRET_PATH]
    """),
    Attack("decorator-open", """
        @open
        def SECRET():
            pass
        return SECRET
    """, plain="""
        def read(f):
            return open(SECRET_PATH).read()
        @read
        class A:
            pass
        return A
    """),
    Attack("decorator-builtins-route", """
        @lambda f: f.__globals__["__builtins__"]["open"](SECRET_PATH).read()
        def a():
            pass
        return a
    """),
    Attack("decorator-exec", """
        @exec
        @lambda f: "result = open(" + repr(SECRET_PATH) + ").read()"
        class A:
            pass
        return result
    """, plain="""
        ns = {}
        @lambda s: exec(s, ns)
        @lambda f: "result = open(" + repr(SECRET_PATH) + ").read()"
        class A:
            pass
        return ns["result"]
    """),
    Attack("metaclass-keyword", """
        class Meta(type):
            def __new__(mcs, name, bases, ns):
                ns["found"] = open(SECRET_PATH).read()
                return super().__new__(mcs, name, bases, ns)
        class C(metaclass=Meta):
            pass
        return C.found
    """),
]


@pytest.mark.anyio
@pytest.mark.parametrize("attack", ATTACKS, ids=lambda a: a.id)
async def test_attack_is_blocked(escape: EscapeHarness, attack: Attack) -> None:
    """It reaches the secret under plain CPython and fails under the sandbox."""
    await escape.check(attack)
