"""Attacks on the policy's native fast paths (see :mod:`codemode.sandbox.policy`): each tries to exploit
exactly the shortcut (native attribute loads, native iteration/unpacking targets, native augmented assignment,
native star-calls, the ``_write_`` fast path, the one-argument ``type``).

Payloads that modify real modules run their plain variant in a fresh interpreter.
"""

from __future__ import annotations

import pytest

from .conftest import Attack, EscapeHarness

_POISONED = "lambda *a, **k: open(SECRET_PATH).read()"

ATTACKS = [
    Attack("native-load-of-module-internal", """
        import json
        return json.decoder.re.enum.sys.modules["builtins"].open(SECRET_PATH).read()
    """),
    Attack("native-load-of-unguarded-exception-field", """
        import json
        try:
            json.missing
        except AttributeError as e:
            holder = [e]
        return holder[0].obj.codecs.sys.modules["builtins"].open(SECRET_PATH).read()
    """),
    Attack("native-load-of-frame-prefixed-name", """
        def g():
            yield 1
        gen = g()
        frame = [gen.gi_frame][0]
        return frame.f_builtins["open"](SECRET_PATH).read()
    """),
    Attack("for-target-attribute-poisons-module", f"""
        import json
        for json.dumps in [{_POISONED}]:
            pass
        import json as again
        return again.dumps(1)
    """, mode="subprocess"),
    Attack("unpacking-target-attribute-poisons-module", f"""
        import json
        json.dumps, other = ({_POISONED}), 1
        import json as again
        return again.dumps(1)
    """, mode="subprocess"),
    Attack("with-target-attribute-poisons-module", f"""
        import json, contextlib
        with contextlib.nullcontext({_POISONED}) as json.dumps:
            pass
        import json as again
        return again.dumps(1)
    """, plain=f"""
        import json, contextlib
        with contextlib.nullcontext({_POISONED}) as json.dumps:
            pass
        import json as again
        return again.dumps(1)
    """, mode="subprocess"),
    Attack("augmented-assignment-on-module-attribute", """
        import string
        string.digits += open(SECRET_PATH).read()
        import string as again
        return again.digits
    """, mode="subprocess"),
    Attack("augmented-assignment-on-shared-set", """
        import hashlib
        algorithms = hashlib.algorithms_available
        algorithms |= {open(SECRET_PATH).read()}
        import hashlib as again
        return sorted(again.algorithms_available)
    """, mode="subprocess"),
    Attack("setattr-builtin-poisons-module", f"""
        import json
        setattr(json, "dumps", {_POISONED})
        import json as again
        return again.dumps(1)
    """, mode="subprocess"),
    Attack("item-write-into-module-namespace", f"""
        import json
        vars(json)["dumps"] = {_POISONED}
        import json as again
        return again.dumps(1)
    """, mode="subprocess"),
    Attack("class-attribute-write-on-host-class", """
        import collections
        collections.Counter.most_common = lambda self, n=None: open(SECRET_PATH).read()
        return collections.Counter("ab").most_common()
    """, mode="subprocess"),
    Attack("dataclass-rewrites-host-class", """
        import dataclasses, string
        string.Formatter.extra = dataclasses.field(default_factory=lambda: open(SECRET_PATH).read())
        string.Formatter.__annotations__ = {"extra": str}
        made = dataclasses.dataclass(string.Formatter)
        return made().extra
    """, mode="subprocess"),
    Attack("inline-write-through-module-alias", f"""
        import json
        alias = json
        alias.dumps = {_POISONED}
        import json as again
        return again.dumps(1)
    """, mode="subprocess"),
    Attack("inline-write-into-shared-class-dict", """
        import textwrap
        table = textwrap.TextWrapper.unicode_whitespace_trans
        table[0] = open(SECRET_PATH).read()
        import textwrap as again
        return again.TextWrapper.unicode_whitespace_trans[0]
    """, mode="subprocess"),
    Attack("inline-write-augmented-through-alias", """
        import string
        alias = string
        alias.digits += open(SECRET_PATH).read()
        import string as again
        return again.digits
    """, mode="subprocess"),
    # (a rebound super whose __init__ re-runs on a shared host object: a cached typing alias that every
    # run and the host share gets another origin, which its __call__ then calls)
    Attack("super-init-hook-with-rebound-super", f"""
        import typing
        alias = typing.List[int]
        super = lambda: alias
        super().__init__({_POISONED}, (int,))
        return typing.List[int]()
    """, mode="subprocess"),
    # (a subclass of a facade's sealed class, with the facade moved onto it: here the sealing is
    # bypassed with the private build token, which is what a subclass in the sandbox would need)
    Attack("subclass-facade-then-init", f"""
        import json
        class Evil(type(json)):
            dumps = {_POISONED}
        setattr(json, "__class__", Evil)
        return json.dumps(1)
    """, plain=f"""
        from codemode.sandbox.facades import FACADES, _BUILD
        json = FACADES["json"]
        class Evil(type(json), token=_BUILD):
            __slots__ = ()
            dumps = staticmethod({_POISONED})
        object.__setattr__(json, "__class__", Evil)
        return FACADES["json"].dumps(1)
    """, mode="subprocess"),
    Attack("star-call-getattr", """
        g = getattr(*[lambda: 0, "__globals__"])
        return g["__builtins__"]["open"](SECRET_PATH).read()
    """),
    Attack("star-call-kwargs-getattr", """
        args = {"name": "__globals__"}
        g = (lambda obj, name: getattr(obj, name))(lambda: 0, **args)
        return g["__builtins__"]["open"](SECRET_PATH).read()
    """),
    Attack("three-argument-type-via-type-of-type", """
        def hook(cls, **kw):
            cls.found = open(SECRET_PATH).read()
        Base = type(int)("Base", (), {"__init_subclass__": classmethod(hook)})
        class C(Base):
            pass
        return C.found
    """),
    Attack("three-argument-type-direct", """
        def hook(cls, **kw):
            cls.found = open(SECRET_PATH).read()
        Base = type("Base", (), {"__init_subclass__": classmethod(hook)})
        class C(Base):
            pass
        return C.found
    """),
    Attack("three-argument-type-via-star-args", """
        def hook(cls, **kw):
            cls.found = open(SECRET_PATH).read()
        Base = type(*["Base", (), {"__init_subclass__": classmethod(hook)}])
        class C(Base):
            pass
        return C.found
    """),
    # (the inlined write guard of a store into an object that is not a plain name: a temporary)
    Attack("write-temp-poisons-module-in-function", f"""
        import json
        def poison():
            [json][0].dumps = {_POISONED}
        poison()
        import json as again
        return again.dumps(1)
    """, mode="subprocess"),
    Attack("write-temp-call-result-poisons-module", """
        import json
        def evil(*a, **k):
            return open(SECRET_PATH).read()
        def poison():
            (lambda: json)().dumps = evil
        poison()
        return json.dumps(1)
    """, mode="subprocess"),
    Attack("write-temp-in-class-body", f"""
        import json
        class Holder:
            [json][0].dumps = {_POISONED}
        import json as again
        return again.dumps(1)
    """, mode="subprocess"),
    Attack("subscript-into-class-dict", """
        sub = type.__dict__["__subclasses__"](object)
        loader = [c for c in sub if c.__name__ == "FileLoader"][0]
        return loader.get_data(None, SECRET_PATH)
    """),
]


@pytest.mark.anyio
@pytest.mark.parametrize("attack", ATTACKS, ids=lambda a: a.id)
async def test_attack_is_blocked(escape: EscapeHarness, attack: Attack) -> None:
    """It reaches the secret under plain CPython and fails under the sandbox."""
    await escape.check(attack)
