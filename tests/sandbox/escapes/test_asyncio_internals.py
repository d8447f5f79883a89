"""Escape family: asyncio internals (futures, tasks, the event loop, coroutine frames, facade state).

Payloads that spawn processes run their plain variant in a fresh interpreter (``mode="subprocess"``);
payloads aimed at the facade's own objects run their plain variant against the facades.
"""

from __future__ import annotations

import pytest

from .conftest import Attack, EscapeHarness

_COPY = '"cp " + SECRET_PATH + " " + TARGET_PATH'

ATTACKS = [
    Attack("running-loop-subprocess", f"""
        import asyncio
        loop = asyncio.get_running_loop()
        transport, _ = await loop.subprocess_shell(asyncio.SubprocessProtocol, {_COPY})
        while transport.get_returncode() is None:
            await asyncio.sleep(0.01)
        return 1
    """, mode="subprocess"),
    Attack("coroutine-send-leaks-future-loop", f"""
        import asyncio
        async def a():
            await asyncio.sleep(10)
        c = a()
        fut = c.send(None)
        loop = fut.get_loop()
        transport, _ = await loop.subprocess_shell(asyncio.SubprocessProtocol, {_COPY})
        while transport.get_returncode() is None:
            await asyncio.sleep(0.01)
        return 1
    """, mode="subprocess"),
    Attack("coroutine-send-computed", f"""
        import asyncio
        async def a():
            await asyncio.sleep(10)
        c = a()
        fut = getattr(c, "send")(None)
        loop = getattr(fut, "get_loop")()
        transport, _ = await loop.subprocess_shell(asyncio.SubprocessProtocol, {_COPY})
        while transport.get_returncode() is None:
            await asyncio.sleep(0.01)
        return 1
    """, mode="subprocess"),
    Attack("coroutine-throw", """
        import asyncio
        async def a():
            await asyncio.sleep(10)
        c = a()
        fut = c.send(None)
        c.throw(ValueError)
        return fut.get_loop()
    """, plain=f"""
        import asyncio
        async def a():
            try:
                await asyncio.sleep(10)
            except ValueError:
                pass
        c = a()
        fut = c.send(None)
        loop = fut.get_loop()
        try:
            c.throw(ValueError)
        except StopIteration:
            pass
        transport, _ = await loop.subprocess_shell(asyncio.SubprocessProtocol, {_COPY})
        while transport.get_returncode() is None:
            await asyncio.sleep(0.01)
        return 1
    """, mode="subprocess"),
    Attack("gather-future-loop", f"""
        import asyncio
        fut = asyncio.gather(asyncio.sleep(0))
        loop = fut.get_loop()
        await fut
        transport, _ = await loop.subprocess_shell(asyncio.SubprocessProtocol, {_COPY})
        while transport.get_returncode() is None:
            await asyncio.sleep(0.01)
        return 1
    """, mode="subprocess"),
    Attack("sleep-coroutine-frame", """
        import asyncio
        c = asyncio.sleep(0)
        return c.cr_frame.f_globals["__builtins__"]["open"](SECRET_PATH).read()
    """),
    Attack("wait-for-coroutine-frame", """
        import asyncio
        c = asyncio.wait_for(asyncio.sleep(0), 1)
        return c.cr_frame.f_globals["__builtins__"]["open"](SECRET_PATH).read()
    """),
    Attack("as-completed-coroutine-frame", """
        import asyncio
        it = asyncio.as_completed([asyncio.sleep(0)])
        c = next(it)
        return c.cr_frame.f_globals["__builtins__"]["open"](SECRET_PATH).read()
    """),
    Attack("task-get-stack", """
        import asyncio
        async def a():
            await asyncio.sleep(0.2)
        t = asyncio.ensure_future(a())
        await asyncio.sleep(0)
        return t.get_stack()[0].f_builtins["open"](SECRET_PATH).read()
    """),
    Attack("create-task-get-coro", """
        import asyncio
        t = asyncio.create_task(asyncio.sleep(0.1))
        return t.get_coro().cr_frame.f_globals["__builtins__"]["open"](SECRET_PATH).read()
    """),
    Attack("create-subprocess", f"""
        import asyncio
        p = await asyncio.create_subprocess_shell({_COPY})
        await p.wait()
        return 1
    """, mode="subprocess"),
    Attack("facade-awaitable-start", """
        import asyncio
        aw = asyncio.sleep(0)
        return aw._start.__globals__["__builtins__"]["open"](SECRET_PATH).read()
    """, mode="facades"),
    Attack("facade-awaitable-start-computed", """
        import asyncio
        aw = asyncio.sleep(0)
        start = getattr(aw, "_start")
        return getattr(start, "__globals__")["__builtins__"]["open"](SECRET_PATH).read()
    """, mode="facades"),
    Attack("facade-gather-hidden-tasks", """
        import asyncio
        aw = asyncio.gather(asyncio.sleep(0.2))
        for cell in aw._start.__closure__:
            value = cell.cell_contents
            if isinstance(value, list):
                coro = value[0].get_coro()
                return coro.cr_frame.f_globals["__builtins__"]["open"](SECRET_PATH).read()
    """, mode="facades"),
    Attack("facade-module-members", """
        import asyncio
        members = asyncio._facade_members
        return members["gather"].__globals__["__builtins__"]["open"](SECRET_PATH).read()
    """, mode="facades"),
]


@pytest.mark.anyio
@pytest.mark.parametrize("attack", ATTACKS, ids=lambda a: a.id)
async def test_attack_is_blocked(escape: EscapeHarness, attack: Attack) -> None:
    """It reaches the secret under plain CPython and fails under the sandbox."""
    await escape.check(attack)
