"""Escape family C9: the surface the wider language admits (guarded formatter, attrgetter/methodcaller,
match class patterns, private names, async iteration and async context managers of facade objects,
dir/vars, eval/exec).

Every payload reads the secret (a file, or the worker's environment for the format family) under plain
CPython, and fails in the sandbox, in process and in the isolated worker.
"""

from __future__ import annotations

import pytest

from . import test_format_strings, test_side_doors
from .conftest import SECRET_ENV, Attack, EscapeHarness, same_attack

_ENVIRON = "{0.__globals__[_os].environ}"

ATTACKS = [
    # -- the guarded formatter: every attribute step of a field is the program's getattr
    Attack("format-nested-spec-field", """
        import random
        try:
            return "{0:{1.__globals__[_os].environ}}".format(0, random.seed)
        except ValueError as error:
            return str(error)
    """),
    Attack("format-item-then-attribute", """
        import random
        return "{m[f].__globals__[_os].environ}".format_map({"m": {"f": random.seed}})
    """),
    Attack("format-bound-method-reference", f"""
        import random
        render = "{_ENVIRON}".format
        return render(random.seed)
    """),
    same_attack(test_format_strings.ATTACKS, "map-unbound-format", "format-through-map"),
    Attack("format-subclass-super-map", """
        import random
        class T(str):
            def render(self, **kw):
                return super().format_map(kw)
        return T("{f.__globals__[_os].environ}").render(f=random.seed)
    """),
    Attack("attrgetter-dotted-dunder", """
        import operator, random
        return str(operator.attrgetter("__func__.__globals__")(random.seed)["_os"].environ)
    """),
    Attack("methodcaller-format", f"""
        import operator, random
        return operator.methodcaller("format", random.seed)("{_ENVIRON}")
    """),
    # -- match class patterns read attributes in C
    Attack("match-class-dunder-chain", """
        import random
        match random.seed:
            case object(__func__=object(__globals__=g)):
                return str(g["_os"].environ)
    """),
    Attack("match-class-private", """
        import asyncio
        match asyncio.Queue():
            case object(_get_loop=get_loop):
                loop = get_loop()
                return await loop.run_in_executor(None, lambda: open(SECRET_PATH).read())
    """),
    # -- private names: only on objects of classes the program defined (every base its own or builtin)
    Attack("private-name-of-facade-wrapper", """
        import asyncio
        loop = asyncio.Queue()._real._get_loop()
        return await loop.run_in_executor(None, lambda: open(SECRET_PATH).read())
    """, mode="facades"),
    Attack("private-name-via-program-subclass", """
        import asyncio
        class Q(asyncio.Queue):
            pass
        loop = Q()._real._get_loop()
        return await loop.run_in_executor(None, lambda: open(SECRET_PATH).read())
    """, mode="facades"),
    Attack("private-name-via-getattr", """
        import asyncio
        loop = getattr(getattr(asyncio.Lock(), "_real"), "_get_loop")()
        return await loop.run_in_executor(None, lambda: open(SECRET_PATH).read())
    """, mode="facades"),
    Attack("private-write-on-host-object", """
        import textwrap
        w = textwrap.TextWrapper()
        w._munge_whitespace = lambda text: open(SECRET_PATH).read()
        return w.wrap("x")
    """),
    # -- async iteration and async context managers of what the sandbox hands out
    Attack("async-generator-driven-by-hand", """
        import asyncio
        async def ticks():
            await asyncio.sleep(0.01)
            yield 1
        step = ticks().asend(None)
        future = step.send(None)
        secret = await future.get_loop().run_in_executor(None, lambda: open(SECRET_PATH).read())
        await asyncio.sleep(0.05)
        try:
            step.send(None)  # (let the generator reach its yield, so it can be finalised)
        except StopIteration:
            pass
        return secret
    """),
    Attack("async-generator-throw-by-hand", """
        import asyncio
        async def ticks():
            try:
                yield 1
            finally:
                await asyncio.sleep(0.01)
        agen = ticks()
        await agen.__anext__()
        future = type(agen.aclose()).send(agen.aclose(), None)
        return await future.get_loop().run_in_executor(None, lambda: open(SECRET_PATH).read())
    """),
    Attack("async-with-timeout-internals", """
        import asyncio
        async with asyncio.timeout(5) as cm:
            loop = cm._real._task.get_loop()
            return await loop.run_in_executor(None, lambda: open(SECRET_PATH).read())
    """, mode="facades"),
    Attack("task-wrapper-internals", """
        import asyncio
        task = asyncio.create_task(asyncio.sleep(0))
        loop = task._task.get_loop()
        return await loop.run_in_executor(None, lambda: open(SECRET_PATH).read())
    """, mode="facades"),
    Attack("taskgroup-internals", """
        import asyncio
        async with asyncio.TaskGroup() as tg:
            loop = tg._real._loop
        return await loop.run_in_executor(None, lambda: open(SECRET_PATH).read())
    """, mode="facades"),
    # -- dir/vars and eval/exec
    Attack("vars-of-a-facade", """
        import json
        return vars(json)["__builtins__"]["eval"]("open(SECRET_PATH).read()")
    """),
    Attack("vars-of-a-host-class", """
        import random
        return vars(random.Random)["seed"].__globals__["__builtins__"]["open"](SECRET_PATH).read()
    """),
    Attack("dir-then-getattr", """
        import random
        name = [n for n in dir(random.seed) if n.endswith("func__")][0]
        return getattr(random.seed, name).__globals__["__builtins__"]["open"](SECRET_PATH).read()
    """),
    same_attack(test_side_doors.ATTACKS, "eval-call", "eval-string"),
    Attack("exec-string", """
        found = {}
        exec("found['x'] = open(SECRET_PATH).read()")
        return found["x"]
    """),
    Attack("eval-through-getattr", """
        import json
        return getattr(json, "__builtins__")["eval"]("open(SECRET_PATH).read()")
    """),
]


@pytest.mark.anyio
@pytest.mark.parametrize("attack", ATTACKS, ids=lambda a: a.id)
async def test_attack_is_blocked(escape: EscapeHarness, attack: Attack) -> None:
    """It reaches the secret under plain CPython and fails under the sandbox."""
    await escape.check(attack)


def test_the_environment_secret_is_the_harness_one() -> None:
    """The format-family payloads print the environment that holds the harness's secret."""
    assert SECRET_ENV.startswith("CODEMODE_")
