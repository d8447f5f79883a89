"""Scopes and agents: the keys of per-scope registry layers and hook filters.

A :class:`Scope` is identity-compared (two scopes with one name are different scopes) and may have a
parent; its chain is itself, its parent, its grandparent, ... A scope's tools, restrictions, guards,
presentation mode and hooks apply to it and to every descendant. An :class:`Agent` is a scope that also
owns the agent session's append-only :class:`~codemode.runtime.events.EventLog`.
"""

from __future__ import annotations

from collections.abc import Iterator

from .events import EventLog

__all__ = ("Agent", "Scope")


class Scope:
    """A node in the scope tree (an agent, or a standing preset scope agents are bound under)."""

    __slots__ = ("__weakref__", "_chain", "name", "parent")

    def __init__(self, name: str, parent: Scope | None = None) -> None:
        if not isinstance(name, str):
            raise TypeError(f"Scope name must be a str, not {type(name).__name__}")
        if parent is not None and not isinstance(parent, Scope):
            raise TypeError(f"Scope parent must be a Scope or None, not {type(parent).__name__}")
        self.name = name
        self.parent = parent
        chain: list[Scope] = [self]
        node = parent
        while node is not None:
            chain.append(node)
            node = node.parent
        self._chain: tuple[Scope, ...] = tuple(chain)

    @property
    def chain(self) -> tuple[Scope, ...]:
        """This scope first, then each ancestor, nearest first."""
        return self._chain

    def is_within(self, other: Scope) -> bool:
        """True when ``other`` is this scope or one of its ancestors."""
        return any(node is other for node in self._chain)

    def ancestors(self) -> Iterator[Scope]:
        """Every ancestor, nearest first (not including this scope)."""
        return iter(self._chain[1:])

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


class Agent(Scope):
    """A scope that is an agent session: it owns the session's event log."""

    __slots__ = ("events",)

    def __init__(self, name: str, parent: Scope | None = None, *, events: EventLog | None = None) -> None:
        super().__init__(name, parent)
        self.events = EventLog() if events is None else events
