"""A worker cannot reach a sibling worker over the network: not through a socket the sibling listens on.

Workers under the seccomp allowlist share one network namespace (the template's, with no interface up)
instead of unsharing one each; what keeps them apart there is that no worker can make a socket at all.
Workers without seccomp each get a namespace of their own. Both are attacked the same way: a sibling
listens on an abstract Unix name (abstract names live in the network namespace, so two processes in one
namespace reach each other by name, as the plain-CPython check below shows) and holds; the attacker,
running at the same time, connects to that name.
"""

from __future__ import annotations

import errno
import socket
import uuid
from typing import Any

import pytest

from tests.sandbox.breach._pair import attack_beside_a_sibling
from tests.sandbox.breach.conftest import LIMITS, Breach

pytestmark = pytest.mark.anyio

SIBLING = """\
import socket
try:
    listener = socket.socket(socket.AF_UNIX)
    listener.bind({name!r})
    listener.listen()
    state = 'listening'
except OSError as exc:
    state = exc.errno
await tools.register(state=state)
await tools.hold()
return 'held'
"""

ATTACKER = """\
import socket
await tools.sibling()
try:
    probe = socket.socket(socket.AF_UNIX)
    probe.settimeout(1)
    probe.connect({name!r})
    return 'connected'
except OSError as exc:
    return exc.errno
"""

#: config -> (what the sibling's listen got, what the attacker's connect got, the layer that answers).
EXPECTED = {
    "all": (errno.EPERM, errno.EPERM, "seccomp"),  # the shared namespace: no socket can be made
    "no-seccomp": ("listening", errno.ECONNREFUSED, "netns"),  # a namespace each: the name is not there
    "no-seccomp-no-landlock": ("listening", errno.ECONNREFUSED, "netns"),
}


def test_the_payload_reaches_a_listener_in_the_same_namespace() -> None:
    """Plain CPython: a process that connects to an abstract name in its namespace reaches the listener."""
    name = f"\0codemode-sibling-{uuid.uuid4().hex}"
    with socket.socket(socket.AF_UNIX) as listener, socket.socket(socket.AF_UNIX) as probe:
        listener.bind(name)
        listener.listen()
        probe.connect(name)
        accepted, _ = listener.accept()
        with accepted:
            probe.close()
            assert accepted.recv(1) == b""


async def _attack(breach: Breach, config: str) -> tuple[Any, Any, tuple[str, ...]]:
    name = f"\0codemode-sibling-{uuid.uuid4().hex}"
    registered, attack = await attack_beside_a_sibling(breach.sandboxes[config], SIBLING.format(name=name),
                                                       ATTACKER.format(name=name), LIMITS)
    return registered["state"], attack.value, attack.stats.isolation


@pytest.mark.parametrize("config", sorted(EXPECTED))
async def test_a_sibling_listener_is_out_of_reach(breach: Breach, config: str) -> None:
    """The attacker never connects; each configuration's answer names the layer that stops it."""
    listened, connected, isolation = await _attack(breach, config)
    assert (listened, connected) == EXPECTED[config][:2], (config, listened, connected)
    assert EXPECTED[config][2] in isolation and "netns" in isolation
