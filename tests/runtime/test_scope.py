"""Scopes and agents: identity, chains, event logs."""

from __future__ import annotations

import pytest

from codemode.runtime import Agent, EventLog, Scope


def test_scopes_are_identity_compared_and_chained() -> None:
    """It compares scopes by identity and lists the chain nearest first."""
    root = Scope("root")
    preset = Scope("preset", root)
    agent = Agent("agent", preset)
    assert Scope("root") != root
    assert agent.chain == (agent, preset, root)
    assert list(agent.ancestors()) == [preset, root]
    assert agent.is_within(root) and agent.is_within(agent)
    assert not root.is_within(agent)
    assert repr(agent) == "<Agent 'agent'>"


def test_agents_own_an_event_log() -> None:
    """It gives every agent its own log, or the one passed in."""
    log = EventLog()
    assert Agent("a").events is not Agent("b").events
    assert Agent("c", events=log).events is log


@pytest.mark.parametrize(("name", "parent"), [(3, None), ("x", "parent")])
def test_bad_scope_arguments(name: object, parent: object) -> None:
    """It rejects non-string names and non-scope parents."""
    with pytest.raises(TypeError):
        Scope(name, parent)  # type: ignore[arg-type]
