"""Attacks on the module facades' classes: each facade is the one instance of its own sealed class.

A facade's members are class attributes of a per-module class (the fast path of ``math.sqrt``), so the
class and what it holds are the thing to protect: its ``__dict__`` (a mapping proxy over the real type
dict, whose entries are the members and their ``staticmethod`` wrappers), writes to the class, a new
``__class__`` for the facade, subclasses, and the ways around a guard that plain CPython offers
(``type.__setattr__``, ``vars()``, ``gc``). Each payload reaches the secret under plain CPython (on the
sandbox's own facade objects; payloads that modify a facade run in a fresh interpreter) and fails in
the sandbox.
"""

from __future__ import annotations

import pytest

from .conftest import Attack, EscapeHarness

_POISONED = "lambda *a, **k: open(SECRET_PATH).read()"
_FACADES = """\
from codemode.sandbox.facades import FACADES
json = FACADES["json"]
"""
_READ = '["__builtins__"]["open"](SECRET_PATH).read()'


def _poison(setup: str) -> str:
    return _FACADES + setup + "\nreturn FACADES['json'].dumps(1)\n"


ATTACKS = [
    Attack("facade-class-dict", f"""
        import json
        return type(json).__dict__["dumps"].__func__.__globals__{_READ}
    """, mode="facades"),
    Attack("facade-class-dict-by-getattr", f"""
        import json
        members = getattr(type(json), "__dict__")
        return getattr(members["dumps"], "__func__").__globals__{_READ}
    """, mode="facades"),
    Attack("facade-class-vars", f"""
        import json
        return vars(type(json))["dumps"].__func__.__globals__{_READ}
    """, mode="facades"),
    Attack("facade-class-gc-referents", f"""
        import gc, json
        table = [r for r in gc.get_referents(type(json)) if isinstance(r, dict) and "dumps" in r][0]
        return table["dumps"].__func__.__globals__{_READ}
    """, plain=_FACADES + f"""
import gc
table = [r for r in gc.get_referents(type(json)) if isinstance(r, dict) and "dumps" in r][0]
return table["dumps"].__func__.__globals__{_READ}
""", mode="subprocess"),
    Attack("facade-class-attribute-store", f"""
        import json
        type(json).dumps = {_POISONED}
        return json.dumps(1)
    """, plain=_poison(f"type.__setattr__(type(json), 'dumps', {_POISONED})"), mode="subprocess"),
    Attack("facade-class-setattr", f"""
        import json
        setattr(type(json), "dumps", {_POISONED})
        return json.dumps(1)
    """, plain=_poison(f"type.__setattr__(type(json), 'dumps', {_POISONED})"), mode="subprocess"),
    Attack("facade-class-type-setattr", f"""
        import json
        type.__setattr__(type(json), "dumps", {_POISONED})
        return json.dumps(1)
    """, plain=_poison(f"type.__setattr__(type(json), 'dumps', {_POISONED})"), mode="subprocess"),
    Attack("facade-class-type-setattr-by-getattr", f"""
        import json
        getattr(type, "__setattr__")(type(json), "dumps", {_POISONED})
        return json.dumps(1)
    """, plain=_poison(f"type.__setattr__(type(json), 'dumps', {_POISONED})"), mode="subprocess"),
    Attack("facade-class-assignment", f"""
        import json
        class Evil:
            dumps = {_POISONED}
        setattr(json, "__class__", Evil)
        return json.dumps(1)
    """, plain=_poison(f"""
class Evil:
    __slots__ = ()
    dumps = staticmethod({_POISONED})
object.__setattr__(json, "__class__", Evil)"""), mode="subprocess"),
    Attack("facade-object-setattr-class", f"""
        import json
        class Evil:
            dumps = {_POISONED}
        object.__setattr__(json, "__class__", Evil)
        return json.dumps(1)
    """, plain=_poison(f"""
class Evil:
    __slots__ = ()
    dumps = staticmethod({_POISONED})
object.__setattr__(json, "__class__", Evil)"""), mode="subprocess"),
    Attack("facade-subclass", f"""
        import json
        class Evil(type(json)):
            dumps = {_POISONED}
        setattr(json, "__class__", Evil)
        return json.dumps(1)
    """, plain=_poison(f"""
from codemode.sandbox.facades import _BUILD
class Evil(type(json), token=_BUILD):
    __slots__ = ()
    dumps = staticmethod({_POISONED})
object.__setattr__(json, "__class__", Evil)"""), mode="subprocess"),
    Attack("facade-class-mro-base-makes-facades", f"""
        import json
        base = type.mro(type(json))[1]
        fake = base("json", {{"dumps": {_POISONED}}})
        return fake.dumps(1)
    """, mode="facades"),
    Attack("facade-class-mro-method", f"""
        import json
        base = type(json).mro()[1]
        fake = base("json", {{"dumps": {_POISONED}}})
        return fake.dumps(1)
    """, plain=f"""
        import json
        base = type.mro(type(json))[1]
        fake = base("json", {{"dumps": {_POISONED}}})
        return fake.dumps(1)
    """, mode="facades"),
    Attack("facade-class-new-facade", f"""
        import json
        fake = type(json)("json", {{"dumps": {_POISONED}}})
        return fake.dumps(1)
    """, plain=_FACADES + f"""
from codemode.sandbox.facades import ModuleFacade
fake = ModuleFacade("json", {{"dumps": {_POISONED}}})
return fake.dumps(1)
""", mode="subprocess"),
]


@pytest.mark.anyio
@pytest.mark.parametrize("attack", ATTACKS, ids=lambda a: a.id)
async def test_attack_is_blocked(escape: EscapeHarness, attack: Attack) -> None:
    """It reaches the secret under plain CPython and fails under the sandbox."""
    await escape.check(attack)
