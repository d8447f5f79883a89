"""Escape family: the ``tools`` proxy, its bindings and awaitables, and ``ToolCallError``.

Plain variants run against the very same proxy objects with unrestricted code, which proves that each
route exists on the object and that only the language policy and guards close it.
"""

from __future__ import annotations

import pytest

from .conftest import Attack, EscapeHarness

_OPEN = '["__builtins__"]["open"](SECRET_PATH).read()'

ATTACKS = [
    Attack("proxy-class-init-globals", f"""
        return tools.__class__.__init__.__globals__{_OPEN}
    """),
    Attack("proxy-type-getattr-globals", f"""
        return type(tools).__getattr__.__globals__{_OPEN}
    """),
    Attack("proxy-private-bindings", f"""
        binding = tools._bindings["search"]
        return binding._call_tool.__globals__{_OPEN}
    """),
    Attack("proxy-private-bindings-computed", f"""
        bindings = getattr(tools, "_bindings")
        return getattr(bindings["search"], "_call_tool").__globals__{_OPEN}
    """),
    Attack("binding-call-method-globals", f"""
        return tools.search.__call__.__globals__{_OPEN}
    """),
    Attack("binding-by-item-class", f"""
        return tools["search"].__class__.__call__.__globals__{_OPEN}
    """),
    Attack("awaitable-closure-call-tool", f"""
        aw = tools.search(q=1)
        for cell in aw._start.__closure__:
            if callable(cell.cell_contents):
                return cell.cell_contents.__globals__{_OPEN}
    """),
    Attack("tool-call-error-traceback", f"""
        try:
            await tools.fail()
        except ToolCallError as e:
            tb = e.__traceback__
            while tb.tb_next is not None:
                tb = tb.tb_next
            return tb.tb_frame.f_globals{_OPEN}
    """),
    Attack("tool-call-error-context", f"""
        try:
            await tools.fail()
        except ToolCallError as e:
            tb = e.__context__.__traceback__
            while tb.tb_next is not None:
                tb = tb.tb_next
            return tb.tb_frame.f_globals{_OPEN}
    """),
    Attack("tool-call-error-class-globals", f"""
        return ToolCallError.__init__.__globals__{_OPEN}
    """),
    Attack("tool-call-error-traceback-computed", f"""
        try:
            await tools.fail()
        except ToolCallError as e:
            tb = getattr(e, "__traceback__")
            frame = getattr(getattr(tb, "tb_next"), "tb_frame")
            return getattr(frame, "f_globals"){_OPEN}
    """),
    Attack("rebind-tools", f"""
        tools = type("T", (), {{}})
        return (lambda: 0).__globals__{_OPEN}
    """),
]


@pytest.mark.anyio
@pytest.mark.parametrize("attack", ATTACKS, ids=lambda a: a.id)
async def test_attack_is_blocked(escape: EscapeHarness, attack: Attack) -> None:
    """It reaches the secret under plain CPython and fails under the sandbox."""
    await escape.check(attack)
