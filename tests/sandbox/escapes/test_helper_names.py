"""Escape family F: stdlib helpers that take attribute names, class-namespace names or source text from the
program (``functools.update_wrapper``, enum's functional API, ``dataclasses``, ``copy``), and guards that a
``super`` proxy, an unbound method reached through the class or a forwarding object could route around.

The first four are the escapes of the assume-breach review; the rest are the same mechanisms reached
another way. Each payload is real under plain CPython (real modules and builtins) and must fail in the
sandbox, in process and in the worker.
"""

from __future__ import annotations

import pytest

from .conftest import LOOP_THROUGH_COROUTINE_SEND, Attack, EscapeHarness

ATTACKS = [
    # (a) update_wrapper's `updated` names: the real builtins are merged into the program's own
    Attack("wraps-updated-merges-host-builtins", """
        import functools, json
        @functools.wraps(json.dumps, assigned=(), updated=("__builtins__",))
        def w():
            pass
        return open(SECRET_PATH).read()
    """),
    # (a') the same with __globals__: a host module's globals become the program's
    Attack("update-wrapper-updated-merges-host-globals", """
        import functools, json
        def w():
            pass
        functools.update_wrapper(w, json.dumps, assigned=(), updated=("__globals__",))
        def get():
            return typing
        return get().sys.modules["builtins"].open(SECRET_PATH).read()
    """, plain="""
        import functools, json
        def w():
            pass
        functools.update_wrapper(w, json.dumps, assigned=(), updated=("__globals__",))
        def get():
            return codecs
        return get().sys.modules["builtins"].open(SECRET_PATH).read()
    """),
    Attack("update-wrapper-assigned-swaps-code", """
        import functools
        def w():
            pass
        functools.update_wrapper(w, lambda: "swapped", assigned=("__code__",), updated=())
        return w()
    """, plain="""
        import functools
        def w():
            pass
        functools.update_wrapper(w, lambda: open(SECRET_PATH).read(), assigned=("__code__",), updated=())
        return w()
    """),
    # (b) enum's functional API binds a dunder; dataclasses then exec()s the annotation keys
    Attack("enum-functional-annotations-reach-dataclass-exec", """
        import enum, dataclasses
        class P:
            pass
        N = "__class__,)==0 or __import__('os'),(0"
        E = enum.Enum("E", [("__annotations__", {N: int}), ("m", 1)], type=P)
        dataclasses.dataclass(E, init=False, repr=False)
        os = (E.m == E.m)[0]
        return os.read(os.open(SECRET_PATH, 0), 200).decode()
    """),
    Attack("enum-functional-reduce-ex-reaches-copy", """
        import enum, copy
        E = enum.Enum("E", [("__copy__", None), ("__deepcopy__", None),
                            ("__reduce_ex__", lambda self, protocol: (open, (SECRET_PATH,))), ("A", 1)])
        return copy.copy(E.A).read()
    """, plain="""
        import enum, copy
        E = enum.Enum("E", [("__copy__", None), ("__deepcopy__", None),
                            ("__reduce_ex__", lambda self, protocol: (open, (SECRET_PATH,))), ("A", 1)],
                      module="program")  # (the plain harness's globals have no __name__ to default to)
        return copy.copy(E.A).read()
    """),
    Attack("enum-functional-missing-hook", """
        import enum
        E = enum.Enum("E", [("_missing_", classmethod(lambda cls, value: open(value).read())), ("A", 1)])
        try:
            E(SECRET_PATH)
        except TypeError as e:
            return str(e)
    """),
    Attack("enum-functional-string-names", """
        import enum
        E = enum.Enum("E", "__doc__ __init_subclass__ A")
        return [E.A.value, open(SECRET_PATH).read()]
    """),
    Attack("enum-functional-module-claims-a-real-module", """
        import enum, dataclasses
        class P:
            pass
        E = enum.Enum("E", "A", type=P, module="os")
        return open(SECRET_PATH).read()
    """),
    # (c) str.format reached through super(): the guard must be keyed on the function
    Attack("super-format-in-str-subclass", """
        class S(str):
            def leak(self, *o):
                return super().format(*o)
        import json
        return S("{0.__globals__[typing].sys.modules[os].environ}").leak(json.dumps)
    """, plain="""
        class S(str):
            def leak(self, *o):
                return super().format(*o)
        import json
        return S("{0.__globals__[codecs].sys.modules[os].environ}").leak(json.dumps)
    """),
    Attack("super-attribute-error-obj", """
        import json
        class E(AttributeError):
            pass
        try:
            raise E("no attribute", name="codecs", obj=json)
        except E as e:
            found = super(E, e).obj
        return found.codecs.sys.modules["builtins"].open(SECRET_PATH).read()
    """),
    Attack("attribute-error-obj-descriptor-through-the-class", """
        import json
        class E(AttributeError):
            o = AttributeError.obj
        try:
            raise E("no attribute", name="codecs", obj=json)
        except E as e:
            found = e.o
        return found.codecs.sys.modules["builtins"].open(SECRET_PATH).read()
    """),
    Attack("typing-alias-forwards-format", """
        import typing, json
        return typing.Annotated[str, 0].format("{0.__globals__[typing].sys.modules[os].environ}", json.dumps)
    """, plain="""
        import typing, json
        return typing.Annotated[str, 0].format("{0.__globals__[codecs].sys.modules[os].environ}", json.dumps)
    """),
    # driving a coroutine by hand through its class hands out the event loop's futures, and the loop
    Attack("coroutine-send-through-the-class-reaches-the-loop", LOOP_THROUGH_COROUTINE_SEND),
    Attack("deepcopy-memo-hands-out-originals", """
        import copy, functools
        memo = {}
        copy.deepcopy(functools.partial(len), memo)
        state = [x for x in memo[id(memo)] if isinstance(x, tuple)][0]
        return state[0].__self__.open(SECRET_PATH).read()
    """),
]


@pytest.mark.anyio
@pytest.mark.parametrize("attack", ATTACKS, ids=lambda a: a.id)
async def test_attack_is_blocked(escape: EscapeHarness, attack: Attack) -> None:
    """It reaches the secret under plain CPython and fails under the sandbox."""
    await escape.check(attack)
