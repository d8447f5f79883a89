"""The registry: a global layer plus per-scope layers, restrictions, guards, presentation and views.

Each layer holds named tools (insertion-ordered, unique per layer), restrictions, guards, prompt
sections and at most one presentation mode. A scope sees (spec 2.5): the inherited tools (global layer,
then each ancestor layer farthest-first, a same-name entry replacing the value but keeping its position),
filtered by every restriction on the chain (they intersect), then its own tools overlaid last (own
registrations are exempt from restrictions), then ``run_code`` when its effective mode is not native.

Views are cached per scope and invalidated by a generation counter bumped on every change, so the hot
path (``get`` during ``execute``) is a dictionary lookup.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from .cancel import Disposer, _Once, removal
from .definitions import ToolDefinition, check_definition
from .errors import DuplicateToolError, PresentationError, ReservedNameError, RestrictionError
from .modes import RUN_CODE, Mode, parse_mode
from .scope import Scope

__all__ = ("Layer", "Registry", "Restriction", "SectionSpec", "View")

logger = logging.getLogger("runtime")

_RESERVED_REGISTER = (f'tool name "{RUN_CODE}" is reserved for the Code Mode transport and cannot be '
                      "registered or shadowed")
_RESERVED_RESTRICT = (f'restrict() cannot name the reserved Code Mode transport "{RUN_CODE}"; '
                      "restrict the end-capability tools instead")


@dataclass(frozen=True, slots=True)
class Restriction:
    """A compiled filter: ``allow`` keeps only the listed names, ``deny`` drops the listed names."""

    allow: frozenset[str] | None
    deny: frozenset[str]

    def admits(self, name: str) -> bool:
        """True when the filter lets ``name`` through."""
        return (self.allow is None or name in self.allow) and name not in self.deny


@dataclass(frozen=True, slots=True)
class SectionSpec:
    """A registered prompt section: ``text`` is a string or ``fn(scope) -> str``."""

    name: str
    order: int
    text: str | Callable[[Scope | None], str]


class Layer:
    """The registrations of one scope (or of the global layer)."""

    __slots__ = ("guards", "mode", "restrictions", "sections", "tools")

    def __init__(self) -> None:
        self.tools: dict[str, ToolDefinition] = {}
        self.restrictions: list[Restriction] = []
        self.guards: list[Callable[[Any], str | None]] = []
        self.sections: dict[str, SectionSpec] = {}
        self.mode: Mode | None = None

    def is_empty(self) -> bool:
        return not (self.tools or self.restrictions or self.guards or self.sections or self.mode)


@dataclass(frozen=True, slots=True)
class View:
    """What one scope sees: ``visible`` tools (incl. ``run_code`` when presented), names for validation."""

    visible: dict[str, ToolDefinition]
    known_names: tuple[str, ...]
    inherited_names: tuple[str, ...]
    mode: Mode


class Registry:
    """Layers, scope chains and view resolution (owned by :class:`~codemode.runtime.ToolRuntime`)."""

    def __init__(self, default_mode: Mode, run_code: Callable[[], ToolDefinition]) -> None:
        self.default_mode = default_mode
        self._global = Layer()
        self._layers: weakref.WeakKeyDictionary[Scope, Layer] = weakref.WeakKeyDictionary()
        self._run_code = run_code
        self._generation = 0
        self._views: weakref.WeakKeyDictionary[Scope, tuple[int, View]] = weakref.WeakKeyDictionary()
        self._global_view: tuple[int, View] | None = None
        #: Guards registered anywhere (lets the hot path skip guard evaluation entirely when zero).
        self.guard_count = 0
        #: ``fn()`` called after every change of tools, restrictions or presentation (prompt caches).
        self.change_listeners: list[Callable[[], None]] = []

    # ---------------------------------------------------------------------------------- layers

    def _layer(self, scope: Scope | None, create: bool = True) -> Layer | None:
        if scope is None:
            return self._global
        layer = self._layers.get(scope)
        if layer is None and create:
            layer = self._layers[scope] = Layer()
        return layer

    def _reclaim(self, scope: Scope | None) -> None:
        if scope is not None:
            layer = self._layers.get(scope)
            if layer is not None and layer.is_empty():
                del self._layers[scope]

    def _changed(self) -> None:
        """Invalidate cached views and notify change listeners (a disposal never fails on them)."""
        self._generation += 1
        for listener in list(self.change_listeners):
            try:
                listener()
            except Exception:
                logger.exception("tools change listener failed")

    def _committed(self, rollback: Callable[[], None]) -> None:
        """Notify listeners of an addition; if one raises, undo the addition and re-raise (spec 1.2.6)."""
        self._generation += 1
        try:
            for listener in list(self.change_listeners):
                listener()
        except BaseException:
            rollback()
            self._generation += 1
            raise

    def chain_layers(self, scope: Scope | None) -> list[tuple[Scope, Layer]]:
        """Existing layers on the chain of ``scope``, farthest ancestor first, the scope itself last."""
        if scope is None:
            return []
        found = []
        for node in reversed(scope.chain):
            layer = self._layers.get(node)
            if layer is not None:
                found.append((node, layer))
        return found

    # ---------------------------------------------------------------------------------- registration

    def register(self, definition: ToolDefinition, scope: Scope | None) -> Disposer:
        """Add a tool to the layer of ``scope`` (global when None); returns its disposer."""
        _check_scope(scope, "register()")
        check_definition(definition)
        name = definition.name
        if name == RUN_CODE:
            raise ReservedNameError(_RESERVED_REGISTER)
        layer = self._layer(scope)
        assert layer is not None
        if name in layer.tools:
            where = ("in this scope" if scope is not None else
                     "globally (for a per-agent variant, register it with scope=<the agent>)")
            raise DuplicateToolError(f'tool "{name}" is already registered {where}')
        layer.tools[name] = definition

        def rollback() -> None:
            del layer.tools[name]
            self._reclaim(scope)

        self._committed(rollback)

        def dispose() -> None:
            if layer.tools.get(name) is definition:
                del layer.tools[name]
                self._reclaim(scope)
                self._changed()

        return _Once(dispose)

    def restrict(self, scope: Scope | None, allow: Iterable[str] | None,
                 deny: Iterable[str] | None) -> Disposer:
        """Add a restriction to ``scope`` (spec 2.2); returns its disposer."""
        if scope is None:
            raise RestrictionError(
                "restrict() requires a scope: a runtime-wide restriction would mask every agent; "
                "restrict the intended agent's scope instead")
        _check_scope(scope, "restrict()")
        if allow is None and deny is None:
            raise RestrictionError(
                "restrict() with neither allow nor deny is a no-op: pass allow= and/or deny= "
                "(an empty filter is almost always a configuration bug)")
        allowed = None if allow is None else _names(allow, "allow")
        denied = frozenset() if deny is None else _names(deny, "deny")
        named = (allowed or frozenset()) | denied
        if RUN_CODE in named:
            raise ReservedNameError(_RESERVED_RESTRICT)
        inherited = set(self._inherited(scope))
        unknown = sorted(named - inherited)
        if unknown:
            listed = ", ".join(f'"{n}"' for n in unknown)
            noun = "tool" if len(unknown) == 1 else "tools"
            known = ", ".join(sorted(inherited)) or "(none)"
            raise RestrictionError(f"restrict() names unknown inherited {noun} {listed}; "
                                   f"known inherited tools: {known}")
        restriction = Restriction(allowed, denied)
        layer = self._layer(scope)
        assert layer is not None
        layer.restrictions.append(restriction)

        def rollback() -> None:
            layer.restrictions.remove(restriction)
            self._reclaim(scope)

        self._committed(rollback)

        def removed() -> None:
            self._reclaim(scope)
            self._changed()

        return removal(layer.restrictions, restriction, removed)

    def guard(self, fn: Callable[[Any], str | None], scope: Scope | None) -> Disposer:
        """Add a guard to the layer of ``scope``; returns its disposer."""
        if not callable(fn):
            raise TypeError("guard() needs a callable fn(call) -> str | None")
        _check_scope(scope, "guard()")
        layer = self._layer(scope)
        assert layer is not None
        table = layer.guards
        table.append(fn)
        self.guard_count += 1

        def removed() -> None:
            self.guard_count -= 1
            if not table and layer.guards is table:
                layer.guards = []  # a fresh generation: a replacement registered now is seen next call
            self._reclaim(scope)

        return removal(table, fn, removed)

    def guard_tables(self, scope: Scope | None) -> list[list[Callable[[Any], str | None]]]:
        """Guard tables in evaluation order: global, then the chain farthest ancestor first."""
        tables = [self._global.guards]
        tables.extend(layer.guards for _, layer in self.chain_layers(scope))
        return tables

    def present_as(self, scope: Scope | None, mode: object) -> Disposer:
        """Declare the presentation mode of ``scope`` (one per scope); returns its disposer."""
        parsed = parse_mode(mode)
        if scope is None:
            raise PresentationError(
                "present_as() requires a scope: the runtime-wide presentation is ToolRuntime(mode=...)")
        _check_scope(scope, "present_as()")
        layer = self._layer(scope)
        assert layer is not None
        if layer.mode is not None:
            raise PresentationError(
                f'present_as("{parsed}") conflicts with "{layer.mode}" already declared for this scope; '
                "one scope selects one presentation")
        layer.mode = parsed

        def rollback() -> None:
            layer.mode = None
            self._reclaim(scope)

        self._committed(rollback)

        def dispose() -> None:
            if layer.mode is parsed:
                layer.mode = None
                self._reclaim(scope)
                self._changed()

        return _Once(dispose)

    def add_section(self, spec: SectionSpec, scope: Scope | None) -> Disposer:
        """Register a prompt section in the layer of ``scope`` (replacing a same-named one there)."""
        _check_scope(scope, "add_section()")
        layer = self._layer(scope)
        assert layer is not None
        layer.sections[spec.name] = spec

        def dispose() -> None:
            if layer.sections.get(spec.name) is spec:
                del layer.sections[spec.name]
                self._reclaim(scope)

        return _Once(dispose)

    def sections(self, scope: Scope | None) -> dict[str, SectionSpec]:
        """Sections visible to ``scope``: global ones, overridden by name along the chain (nearest wins)."""
        found = dict(self._global.sections)
        for _, layer in self.chain_layers(scope):
            found.update(layer.sections)
        return found

    def declares_code_presentation(self, scope: Scope | None) -> bool:
        """True when the runtime default or any scope on the chain declares a non-native mode."""
        if self.default_mode is not Mode.NATIVE:
            return True
        return any(layer.mode not in (None, Mode.NATIVE) for _, layer in self.chain_layers(scope))

    # ---------------------------------------------------------------------------------- views

    def mode_for(self, scope: Scope | None) -> Mode:
        """The effective mode: the nearest declaration on the chain, else the runtime default."""
        if scope is not None and self._layers:
            for node in scope.chain:
                layer = self._layers.get(node)
                if layer is not None and layer.mode is not None:
                    return layer.mode
        return self.default_mode

    def view(self, scope: Scope | None) -> View:
        """The resolved view of ``scope`` (cached until the next change)."""
        cached = self._global_view if scope is None else self._views.get(scope)
        if cached is not None and cached[0] == self._generation:
            return cached[1]
        view = self._resolve(scope)
        if scope is None:
            self._global_view = (self._generation, view)
        else:
            self._views[scope] = (self._generation, view)
        return view

    def _inherited(self, scope: Scope | None) -> dict[str, ToolDefinition]:
        inherited = dict(self._global.tools)
        for node, layer in self.chain_layers(scope):
            if node is not scope:
                inherited.update(layer.tools)
        return inherited

    def _resolve(self, scope: Scope | None) -> View:
        inherited = self._inherited(scope)
        chain = self.chain_layers(scope)
        restrictions = [r for _, layer in chain for r in layer.restrictions]
        visible = {name: d for name, d in inherited.items() if all(r.admits(name) for r in restrictions)}
        own = self._layers.get(scope) if scope is not None else None
        known = dict.fromkeys(inherited)
        if own is not None:
            visible.update(own.tools)
            known.update(dict.fromkeys(own.tools))
        mode = self.mode_for(scope)
        if mode is not Mode.NATIVE:
            visible[RUN_CODE] = self._run_code()
        return View(visible, tuple(known), tuple(inherited), mode)


def _names(names: Iterable[str], label: str) -> frozenset[str]:
    if isinstance(names, str):
        raise RestrictionError(f"restrict() {label}= must be a collection of tool names, not a string")
    copied = frozenset(names)
    bad = [n for n in copied if not isinstance(n, str)]
    if bad:
        raise RestrictionError(f"restrict() {label}= must contain only tool names (strings), got {bad[0]!r}")
    return copied


def _check_scope(scope: object, what: str) -> None:
    if scope is not None and not isinstance(scope, Scope):
        raise TypeError(f"{what} scope must be a codemode.runtime.Scope or None, not {type(scope).__name__}")
