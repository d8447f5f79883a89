"""Two workers of one sandbox at once: a sibling that registers itself and holds, and an attacker.

The sibling program calls ``tools.register(...)`` and then ``tools.hold()``, returning ``"held"``; the
attacker's ``tools.sibling()`` waits for the registration and answers with what the sibling registered.
The sibling is held until the attacker's run is over, so whatever it set up (a listener, its process)
is alive for the whole attack.
"""

from __future__ import annotations

from typing import Any

import anyio

from codemode.sandbox import RunResult, Sandbox, SandboxLimits


async def attack_beside_a_sibling(sandbox: Sandbox, sibling_program: str, attacker_program: str,
                                  limits: SandboxLimits) -> tuple[dict[str, Any], RunResult]:
    """Run both; return what the sibling registered and the attacker's result (a run that succeeded,
    in another worker than the sibling's)."""
    registered, done = anyio.Event(), anyio.Event()
    sibling_state: list[dict[str, Any]] = []

    async def tools(name: str, args: Any) -> Any:
        if name == "register":
            sibling_state.append(dict(args))
            registered.set()
            return None
        if name == "sibling":
            await registered.wait()
            return sibling_state[0]
        await done.wait()  # hold: the sibling lives until the attack is over
        return None

    results: dict[str, RunResult] = {}

    async def sibling() -> None:
        results["sibling"] = await sandbox.run(sibling_program, tool_names=("register", "hold"),
                                               call_tool=tools, limits=limits)

    async def attacker() -> None:
        try:
            results["attacker"] = await sandbox.run(attacker_program, tool_names=("sibling",),
                                                    call_tool=tools, limits=limits)
        finally:
            done.set()

    with anyio.fail_after(30):
        async with anyio.create_task_group() as group:
            group.start_soon(sibling)
            group.start_soon(attacker)
    assert results["sibling"].value == "held", results["sibling"]
    attack = results["attacker"]
    assert attack.error is None, attack.error
    assert attack.stats.worker_pid != results["sibling"].stats.worker_pid
    return sibling_state[0], attack
