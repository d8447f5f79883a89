"""Escape family D1: rebinding a guard hook in some scope so the generated code calls the attacker's.

Under plain CPython the payload reads the secret through the attribute the shadowed hook would have
guarded; in the sandbox every binding form of a ``_``-name is rejected at compile time.
"""

from __future__ import annotations

import pytest

from .conftest import Attack, EscapeHarness

_READ = 'return g(lambda: 0, "__globals__")["__builtins__"]["open"](SECRET_PATH).read()'

ATTACKS = [
    Attack("positional-only-getattr", f"""
        def f(_getattr_=getattr, /):
            g = _getattr_
            {_READ}
        return f()
    """),
    Attack("positional-only-write", """
        import json
        def f(_write_=lambda o: o, /):
            json.loads = lambda s: open(SECRET_PATH).read()
            return json.loads("")
        return f()
    """, plain="""
        import json
        def f(_write_=lambda o: o, /):
            saved = json.loads
            json.loads = lambda s: open(SECRET_PATH).read()
            try:
                return json.loads("")
            finally:
                json.loads = saved
        return f()
    """),
    Attack("lambda-positional-only", f"""
        f = lambda _getattr_=getattr, /: _getattr_
        g = f()
        {_READ}
    """),
    Attack("keyword-only-parameter", f"""
        def f(*, _getattr_=getattr):
            g = _getattr_
            {_READ}
        return f()
    """),
    Attack("vararg-and-kwarg", f"""
        def f(*_getattr_, **_write_):
            g = getattr
            {_READ}
        return f()
    """),
    Attack("import-alias", f"""
        from functools import reduce as _getattr_
        g = getattr
        {_READ}
    """),
    Attack("except-as", f"""
        try:
            1 / 0
        except Exception as _getattr_:
            g = getattr
            {_READ}
    """),
    Attack("walrus", f"""
        if (_getattr_ := getattr):
            g = _getattr_
            {_READ}
    """),
    Attack("comprehension-target", f"""
        g = [_getattr_ for _getattr_ in [getattr]][0]
        {_READ}
    """),
    Attack("class-body", f"""
        class C:
            _getattr_ = getattr
        g = C._getattr_
        {_READ}
    """),
    Attack("global-declaration", f"""
        def f():
            global _getattr_
            _getattr_ = getattr
        f()
        g = _getattr_
        {_READ}
    """),
    Attack("for-target", f"""
        for _print_ in [getattr]:
            g = _print_
        {_READ}
    """),
    Attack("with-target", f"""
        class M:
            def __enter__(self):
                return getattr
            def __exit__(self, *a):
                return False
        with M() as _getitem_:
            g = _getitem_
            {_READ}
    """),
    Attack("async-def-positional-only", f"""
        async def f(_getattr_=getattr, /):
            g = _getattr_
            {_READ}
        return await f()
    """),
]


@pytest.mark.anyio
@pytest.mark.parametrize("attack", ATTACKS, ids=lambda a: a.id)
async def test_attack_is_blocked(escape: EscapeHarness, attack: Attack) -> None:
    """It reaches the secret under plain CPython and fails under the sandbox."""
    await escape.check(attack)
