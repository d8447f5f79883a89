"""The approval seam: how an ``Ask`` decision from pre-execute becomes allow or deny (spec 4).

The service is any object with ``async request(ApprovalRequest) -> str`` answering one of
``"allowed-once" | "rejected" | "cancelled" | "unavailable"``. Mapping:

* no service configured, or the call has no agent -> deny (the service is not consulted);
* ``allowed-once`` -> allow (guards still run afterwards and may still deny);
* ``rejected`` / ``unavailable`` -> distinct denials;
* ``cancelled`` -> a denial flagged as *approval cancelled*: if the caller is cancelled too, the call
  ends ``ABORTED_BEFORE_DISPATCH`` instead;
* anything else, or a raising service -> :class:`~codemode.runtime.errors.PolicyError` (fail closed).
"""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any, Final, Protocol, runtime_checkable

import anyio

from .cancel import CancelSignal
from .errors import PolicyError
from .hooks import Allow, Ask, Deny
from .scope import Scope

__all__ = ("APPROVAL_OUTCOMES", "ApprovalRequest", "ApprovalService", "Approved", "resolve_ask")

APPROVAL_OUTCOMES: Final = ("allowed-once", "rejected", "cancelled", "unavailable")


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """What the approval service is asked: who, which tool, which call, why; ``cancel`` is the caller's."""

    agent: Scope
    tool_name: str
    call_id: str
    reason: str | None
    cancel: CancelSignal


@runtime_checkable
class ApprovalService(Protocol):
    """The approval seam."""

    def request(self, request: ApprovalRequest) -> Awaitable[str]:
        """Ask a human (or a policy) and answer one of :data:`APPROVAL_OUTCOMES`."""
        ...


@dataclass(frozen=True, slots=True)
class Approved:
    """The resolved decision: ``Allow()`` or a ``Deny``; ``approval_cancelled`` marks the cancelled case."""

    decision: Allow | Deny
    approval_cancelled: bool = False


async def resolve_ask(service: Any, ask: Ask, *, name: str, call_id: str, agent: Scope | None,
                      cancel: CancelSignal) -> Approved:
    """Resolve an ``Ask`` through ``service`` (None when the runtime has none)."""
    if service is None:
        return Approved(Deny(ask.reason or f'tool "{name}" requires approval, but no approval service '
                                           "is configured"))
    if agent is None:
        return Approved(Deny(f'tool "{name}" requires approval, but the call has no agent to route it '
                             "through"))
    # Race the service against the call's signal: a service that never answers must not hold a
    # cancelled call (or a run_code run at its deadline) forever. Cancelled while pending = "cancelled".
    with anyio.CancelScope() as scope:
        detach = cancel.attach_scope(scope)
        try:
            outcome = await service.request(ApprovalRequest(agent, name, call_id, ask.reason, cancel))
        except Exception as exc:
            raise PolicyError(f'approval service failed for tool "{name}": {exc}') from exc
        finally:
            detach()
    if scope.cancelled_caught:
        outcome = "cancelled"
    if type(outcome) is str:
        if outcome == "allowed-once":
            return Approved(Allow())
        if outcome == "rejected":
            return Approved(Deny(f'the user rejected tool "{name}"'))
        if outcome == "cancelled":
            return Approved(Deny(f'approval for tool "{name}" was cancelled'), approval_cancelled=True)
        if outcome == "unavailable":
            return Approved(Deny(f'tool "{name}" requires approval, but no approval channel is available'))
    shown = repr(outcome) if len(repr(outcome)) <= 80 else repr(outcome)[:77] + "..."
    raise PolicyError(f'approval service answered {shown} for tool "{name}"; expected one of '
                      + ", ".join(f'"{o}"' for o in APPROVAL_OUTCOMES) + " (failing closed)")
