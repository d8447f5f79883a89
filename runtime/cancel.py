"""Cancellation signals: cheap, callback-based, bridged to anyio cancel scopes.

A :class:`CancelSource` owns a :class:`CancelSignal`; ``source.cancel(reason)`` fires it once. Firing
runs the registered callbacks synchronously and cancels every attached anyio
:class:`~anyio.CancelScope`, so a tool body awaiting anything sees cancellation at its next checkpoint.

This is the hot path of every tool call, so a signal is a few slots and a list: no watcher task per call,
no event object until somebody actually calls :meth:`CancelSignal.wait`. :data:`NEVER` is a shared signal
that can never fire; the pipeline uses it for calls without a caller signal and skips the cancel scope.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import anyio

__all__ = ("NEVER", "CancelSignal", "CancelSource", "Disposer", "removal")

Disposer = Callable[[], None]

_T = TypeVar("_T")


class _Once:
    """An idempotent disposer."""

    __slots__ = ("_fn",)

    def __init__(self, fn: Callable[[], None]) -> None:
        self._fn: Callable[[], None] | None = fn

    def __call__(self) -> None:
        fn, self._fn = self._fn, None
        if fn is not None:
            fn()


def removal(items: list[_T], item: _T, then: Callable[[], None] | None = None) -> Disposer:
    """The idempotent disposer of an entry just appended to ``items``: it removes that very object
    (compared by identity, never by ``==``) and then calls ``then()``; it does nothing once it is gone."""

    def dispose() -> None:
        for index, entry in enumerate(items):
            if entry is item:
                del items[index]
                if then is not None:
                    then()
                return

    return _Once(dispose)


def _noop() -> None:
    return None


class CancelSignal:
    """A read-only view of a cancellation: ``cancelled``, ``reason``, ``wait()``, ``on_cancel()``."""

    __slots__ = ("_callbacks", "_cancelled", "_event", "_reason", "_scopes")

    def __init__(self) -> None:
        self._cancelled = False
        self._reason: str | None = None
        self._callbacks: list[Callable[[str], Any]] | None = None
        self._scopes: list[anyio.CancelScope] | None = None
        self._event: anyio.Event | None = None

    @property
    def cancelled(self) -> bool:
        """True once the signal has fired (it never un-fires)."""
        return self._cancelled

    @property
    def reason(self) -> str | None:
        """Why the signal fired, or None while it has not."""
        return self._reason

    def __repr__(self) -> str:
        state = f"cancelled: {self._reason!r}" if self._cancelled else "pending"
        return f"<CancelSignal {state}>"

    async def wait(self) -> None:
        """Return once the signal has fired (immediately if it already has)."""
        if self._cancelled:
            return
        if self._event is None:
            self._event = anyio.Event()
        await self._event.wait()

    def on_cancel(self, callback: Callable[[str], Any]) -> Disposer:
        """Call ``callback(reason)`` when the signal fires (now, if it already has); returns a disposer.

        Callbacks must not raise; an exception from one is swallowed so the others still run.
        """
        if self._cancelled:
            _safe_call(callback, self._reason or "cancelled")
            return _noop
        if self._callbacks is None:
            self._callbacks = []
        self._callbacks.append(callback)
        return _Remover(self._callbacks, callback)

    def attach_scope(self, scope: anyio.CancelScope) -> Disposer:
        """Cancel ``scope`` when the signal fires (now, if it already has); returns a disposer."""
        if self._cancelled:
            scope.cancel()
            return _noop
        if self._scopes is None:
            self._scopes = []
        self._scopes.append(scope)
        return _Remover(self._scopes, scope)

    def _fire(self, reason: str) -> None:
        if self._cancelled:
            return
        self._cancelled = True
        self._reason = reason
        scopes, self._scopes = self._scopes, None
        callbacks, self._callbacks = self._callbacks, None
        for scope in scopes or ():
            scope.cancel()
        for callback in callbacks or ():
            _safe_call(callback, reason)
        if self._event is not None:
            self._event.set()

    @staticmethod
    def any_of(*signals: CancelSignal | None) -> CancelSignal:
        """A signal that fires when any of ``signals`` fires, with that signal's reason.

        ``None`` entries and :data:`NEVER` are ignored; with one real signal left it is returned as is
        (no allocation). A fused signal holds a callback on each input: call :meth:`detach` on it when
        the fused signal is no longer needed, so long-lived inputs do not accumulate callbacks.
        """
        real = [s for s in signals if s is not None and s is not NEVER]
        if not real:
            return NEVER
        first = real[0]
        if all(s is first for s in real):
            return first
        fused = _FusedSignal()
        for signal in real:
            if signal.cancelled:
                fused._fire(signal.reason or "cancelled")
                return fused
        fused._disposers = [signal.on_cancel(fused._fire) for signal in real]
        return fused

    def detach(self) -> None:
        """Release the callbacks a fused signal holds on its inputs (no-op for plain signals)."""
        return None


class _FusedSignal(CancelSignal):
    __slots__ = ("_disposers",)

    def __init__(self) -> None:
        super().__init__()
        self._disposers: list[Disposer] = []

    def detach(self) -> None:
        disposers, self._disposers = self._disposers, []
        for dispose in disposers:
            dispose()


class _NeverSignal(CancelSignal):
    __slots__ = ()

    async def wait(self) -> None:
        # Shared across event loops, so it must not cache a loop-bound event.
        await anyio.sleep_forever()

    def on_cancel(self, callback: Callable[[str], Any]) -> Disposer:
        return _noop

    def attach_scope(self, scope: anyio.CancelScope) -> Disposer:
        return _noop

    def _fire(self, reason: str) -> None:
        raise TypeError("the NEVER signal cannot be cancelled")


#: A signal that never fires (shared; cancelling it is an error).
NEVER: CancelSignal = _NeverSignal()


class _Remover:
    """Idempotent disposer removing one entry from a signal's list."""

    __slots__ = ("_entry", "_items")

    def __init__(self, items: list[Any], entry: object) -> None:
        self._items: list[Any] | None = items
        self._entry = entry

    def __call__(self) -> None:
        items, self._items = self._items, None
        if items is None:
            return
        for index, item in enumerate(items):
            if item is self._entry:
                del items[index]
                break


def _safe_call(callback: Callable[[str], Any], reason: str) -> None:
    try:
        callback(reason)
    except Exception:  # a broken callback must not stop the others or the canceller
        import logging

        logging.getLogger(__name__).exception("cancel callback failed")


class CancelSource:
    """The owner side of a cancellation: hand out :attr:`signal`, call :meth:`cancel` once.

    With ``follows`` the signal also fires when that (longer-lived) signal does, with its reason: the
    same as ``CancelSignal.any_of(follows, source.signal)`` for one allocation instead of three. Call
    :meth:`detach` once the source is done with, so ``follows`` does not keep a callback per source.
    """

    __slots__ = ("_dispose", "signal")

    def __init__(self, *, follows: CancelSignal | None = None) -> None:
        self.signal = CancelSignal()
        self._dispose: Disposer = _noop
        if follows is not None:
            self._dispose = follows.on_cancel(self.signal._fire)

    def detach(self) -> None:
        """Stop following the ``follows`` signal (idempotent; the source's own :meth:`cancel` still works)."""
        dispose, self._dispose = self._dispose, _noop
        dispose()

    @property
    def cancelled(self) -> bool:
        """True once :meth:`cancel` has been called."""
        return self.signal.cancelled

    def cancel(self, reason: str = "cancelled") -> None:
        """Fire the signal (idempotent: later calls keep the first reason)."""
        self.signal._fire(reason)

    def __repr__(self) -> str:
        return f"<CancelSource {self.signal!r}>"
