"""Escape family F: identifiers that normalise (NFKC) to forbidden names, and escaped strings."""

from __future__ import annotations

import pytest

from .conftest import Attack, EscapeHarness

ATTACKS = [
    Attack("fullwidth-open", """
        return ｏｐｅｎ(SECRET_PATH).read()
    """),
    Attack("math-italic-open", """
        return 𝘰𝘱𝘦𝘯(SECRET_PATH).read()
    """),
    Attack("fullwidth-dunder-import", """
        return _＿ｉｍｐｏｒｔ＿＿("builtins").open(SECRET_PATH).read()
    """),
    Attack("fullwidth-dunder-attribute", """
        f = lambda: 0
        return f._＿ｇｌｏｂａｌｓ＿＿["__builtins__"]["open"](SECRET_PATH).read()
    """),
    Attack("fullwidth-hook-parameter", """
        def f(_ｇｅｔａｔｔｒ＿=getattr, /):
            return _ｇｅｔａｔｔｒ＿(lambda: 0, "__globals__")["__builtins__"]["open"](SECRET_PATH).read()
        return f()
    """),
    Attack("math-bold-builtins", """
        return 𝐠𝐥𝐨𝐛𝐚𝐥𝐬()["__builtins__"]["open"](SECRET_PATH).read()
    """),
    Attack("coding-cookie-is-ignored", """
        # -*- coding: utf_7 -*-
        return open(SECRET_PATH).read()
    """),
    Attack("form-feed-and-cr", "x = 1\x0c\rreturn open(SECRET_PATH).read()"),
]


@pytest.mark.anyio
@pytest.mark.parametrize("attack", ATTACKS, ids=lambda a: a.id)
async def test_attack_is_blocked(escape: EscapeHarness, attack: Attack) -> None:
    """It reaches the secret under plain CPython and fails under the sandbox."""
    await escape.check(attack)
