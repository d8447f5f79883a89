"""Hook decisions and hook signatures of the four policy stages.

* ``on_pre_execute``: ``async fn(call, call_next) -> Allow | Deny | Ask`` (waterfall, default ``Allow()``).
* ``around_execute``: ``async fn(call, call_next) -> ToolResult`` where ``call_next(cancel=None)`` runs
  the inner stages, optionally under a substitute cancellation signal (fused with the caller's).
* ``on_post_execute``: ``async fn(call, result, call_next) -> Accept | Block`` (waterfall, default
  ``Accept()``).
* ``on_result``: ``fn(call, result) -> None | Awaitable[None]`` (observers; failures are contained).
* ``on_code_dispatch_log``: ``async fn(dispatch, call_next) -> content blocks`` (waterfall over the *logged*
  copy of one settled ``run_code`` child call, default: its content unchanged; failures are contained).

Waterfalls run in registration order: the first registered hook runs first and decides whether and when
to consult the rest (``await call_next()``). Guards are plain ``fn(call) -> str | None``: a string denies,
None abstains, so a guard can never re-allow what another denied.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, TypeAlias

if TYPE_CHECKING:
    from .pipeline import ToolCall
    from .results import ToolResult
    from .scope import Scope

__all__ = (
    "UNSET",
    "Accept",
    "Allow",
    "AroundHook",
    "Ask",
    "Block",
    "CodeDispatch",
    "CodeDispatchLogHook",
    "Decision",
    "Deny",
    "Guard",
    "PostDecision",
    "PostExecuteHook",
    "PreExecuteHook",
    "ResultObserver",
)


class _Unset:
    __slots__ = ()

    def __repr__(self) -> str:
        return "UNSET"

    def __bool__(self) -> bool:
        return False


#: Marks an :class:`Accept` field that was not given (``None`` is a real JSON value).
UNSET: Final = _Unset()


@dataclass(frozen=True, slots=True)
class Allow:
    """Let the call proceed (guards still run afterwards and may still deny)."""


@dataclass(frozen=True, slots=True)
class Deny:
    """Refuse the call; the model sees ``Error: <reason>`` with code ``DENIED``."""

    reason: str


@dataclass(frozen=True, slots=True)
class Ask:
    """Route the call through the approval service (see :mod:`codemode.runtime.approval`)."""

    reason: str | None = None


Decision: TypeAlias = Allow | Deny | Ask


@dataclass(frozen=True, slots=True)
class Accept:
    """Keep the result; optionally replace its ``value`` (re-validated, re-rendered) or its ``content``."""

    value: Any = UNSET
    content: Any = UNSET
    additional_contexts: Sequence[Any] = field(default=())


@dataclass(frozen=True, slots=True)
class Block:
    """Replace the result with a failure whose content is ``feedback`` (code ``DENIED``)."""

    feedback: str | Sequence[Any]
    additional_contexts: Sequence[Any] = field(default=())


PostDecision: TypeAlias = Accept | Block


@dataclass(frozen=True, slots=True)
class CodeDispatch:
    """One settled child call of a ``run_code`` program, as the code-dispatch log hooks see it.

    ``content`` is what the child call's result showed (frozen content blocks); a hook returns the blocks
    to keep in the ``tool/code-dispatch`` event instead, e.g. a preview and the place a large output was
    spilled to. Only the logged copy changes: the program already has the value.
    """

    root_call_id: str
    parent_call_id: str
    sub_call_id: str
    name: str
    arguments: Any
    agent: Scope | None
    is_error: bool
    content: Any

PreExecuteHook: TypeAlias = Callable[["ToolCall", Callable[[], Awaitable[Decision]]], Awaitable[Decision]]
AroundHook: TypeAlias = Callable[
    ["ToolCall", Callable[..., Awaitable["ToolResult"]]], Awaitable["ToolResult"]
]
PostExecuteHook: TypeAlias = Callable[
    ["ToolCall", "ToolResult", Callable[[], Awaitable[PostDecision]]], Awaitable[PostDecision]
]
ResultObserver: TypeAlias = Callable[["ToolCall", "ToolResult"], "Awaitable[None] | None"]
Guard: TypeAlias = Callable[["ToolCall"], "str | None"]
CodeDispatchLogHook: TypeAlias = Callable[
    [CodeDispatch, Callable[[], Awaitable[Sequence[Any]]]], Awaitable[Sequence[Any]]
]
