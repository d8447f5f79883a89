"""Escape family C3: format strings that walk attributes in C (``str.format``, ``Formatter``, f-strings).

The secret is also in the worker's environment here; a format string that reaches ``os.environ``
through a host function's globals would print it.
"""

from __future__ import annotations

import pytest

from .conftest import Attack, EscapeHarness

_FIELD = "{0.__globals__[_os].environ}"

ATTACKS = [
    Attack("str-format-method", f"""
        import random
        return "{_FIELD}".format(random.seed)
    """),
    Attack("str-format-class-level", f"""
        import random
        return str.format("{_FIELD}", random.seed)
    """),
    Attack("str-format-via-type", f"""
        import random
        return type("").format("{_FIELD}", random.seed)
    """),
    Attack("str-format-via-getattr", f"""
        import random
        return getattr("{_FIELD}", "format")(random.seed)
    """),
    Attack("str-subclass-format", f"""
        import random
        class S(str):
            pass
        return S("{_FIELD}").format(random.seed)
    """),
    Attack("format-map", """
        import random
        return "{f.__globals__[_os].environ}".format_map({"f": random.seed})
    """),
    Attack("formatter-get-field", """
        import string, random
        obj = string.Formatter().get_field("0.__globals__[_os]", [random.seed], {})[0]
        return str(obj.environ)
    """),
    Attack("formatter-vformat", f"""
        import string, random
        return string.Formatter().vformat("{_FIELD}", [random.seed], {{}})
    """),
    Attack("formatter-subclass-get-value", """
        import string, random
        class F(string.Formatter):
            pass
        return str(F().get_field("0.__globals__[_os].environ", [random.seed], {})[0])
    """),
    Attack("fstring-attribute-walk", """
        import random
        return f"{random.seed.__globals__['_os'].environ}"
    """),
    Attack("fstring-module-leak", """
        import random
        return f"{random._os.environ!r}"
    """),
    Attack("super-format-unbound-on-the-class", f"""
        import random
        class S(str):
            pass
        return super(S, S).format("{_FIELD}", random.seed)
    """),
    Attack("super-format-map-in-subclass", """
        import random
        class S(str):
            def leak(self, mapping):
                return super().format_map(mapping)
        return S("{f.__globals__[_os].environ}").leak({"f": random.seed})
    """),
    Attack("getattr-of-super-format", f"""
        import random
        class S(str):
            def leak(self, *o):
                return getattr(super(), "format")(*o)
        return S("{_FIELD}").leak(random.seed)
    """),
    Attack("str-enum-member-format", f"""
        import enum, random
        class S(enum.StrEnum):
            A = "{_FIELD}"
        return S.A.format(random.seed)
    """),
    Attack("map-unbound-format", f"""
        import random
        return list(map(str.format, ["{_FIELD}"], [random.seed]))[0]
    """),
    Attack("partial-of-bound-format", f"""
        import functools, random
        return functools.partial("{_FIELD}".format)(random.seed)
    """),
    Attack("format-builtin-spec-then-method", f"""
        import random
        fmt = "{_FIELD}"
        method = fmt.format
        return method(random.seed)
    """),
]


@pytest.mark.anyio
@pytest.mark.parametrize("attack", ATTACKS, ids=lambda a: a.id)
async def test_attack_is_blocked(escape: EscapeHarness, attack: Attack) -> None:
    """It reaches the secret under plain CPython and fails under the sandbox."""
    await escape.check(attack)
