"""Escape family C4: ``match`` class patterns read attributes in C; ``match`` stays rejected."""

from __future__ import annotations

import pytest

from .conftest import Attack, EscapeHarness

ATTACKS = [
    Attack("match-class-pattern-globals", """
        match (lambda: 0):
            case object(__globals__=g):
                return g["__builtins__"]["open"](SECRET_PATH).read()
    """),
    Attack("match-class-pattern-chain", """
        match ():
            case object(__class__=object(__base__=base)):
                loader = [c for c in base.__subclasses__() if c.__name__ == "FileLoader"][0]
                return loader.get_data(None, SECRET_PATH)
    """),
    Attack("match-mapping-and-class", """
        import json
        match {"f": json.dumps}:
            case {"f": object(__globals__=g)}:
                return g["__builtins__"]["open"](SECRET_PATH).read()
    """),
]


@pytest.mark.anyio
@pytest.mark.parametrize("attack", ATTACKS, ids=lambda a: a.id)
async def test_attack_is_blocked(escape: EscapeHarness, attack: Attack) -> None:
    """It reaches the secret under plain CPython and fails under the sandbox."""
    await escape.check(attack)
