"""Tool results: the frozen outcome of one call, plus content-block helpers.

A :class:`ToolResult` crosses every stage boundary and reaches observers, schedulers and the model, so it
is immutable all the way down: ``value``, ``content``, ``meta`` and ``additional_contexts`` are frozen
lossless JSON (:class:`~codemode.sandbox.lossless.FrozenDict` /
:class:`~codemode.sandbox.lossless.FrozenList`, which are ``dict``/``list`` subclasses that refuse mutation).

Success: ``is_error=False``, ``value`` is the canonical value, ``error`` is None. Failure:
``is_error=True``, ``value`` is None, ``error`` is a :class:`ToolErrorInfo` with a stable ``code``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from codemode.sandbox.lossless import FrozenDict, FrozenList, JsonValue, escape_lone_surrogates, snapshot

__all__ = (
    "ContentBlock",
    "ToolErrorInfo",
    "ToolResult",
    "error_content",
    "text_block",
    "text_of",
)

#: A content block is a lossless JSON object with a string ``"type"`` (``{"type": "text", "text": ...}``).
ContentBlock = dict[str, Any]

_EMPTY: FrozenList = FrozenList()


@dataclass(frozen=True, slots=True)
class ToolErrorInfo:
    """Why a call failed: a stable machine-readable ``code`` and a human ``message``."""

    code: str
    message: str

    def to_json(self) -> dict[str, str]:
        """The ``{"code", "message"}`` object used by the CLI and the event log."""
        return {"code": self.code, "message": self.message}


@dataclass(frozen=True, slots=True, eq=False, kw_only=True)
class ToolResult:
    """The frozen outcome of one tool call (identity-compared: each call produces its own object).

    Build one with :meth:`success` or :meth:`failure` (they validate and freeze every part); the fields
    are keyword-only, so a direct construction reads ``ToolResult(is_error=False, value=...)``.
    """

    is_error: bool
    value: Any = None
    content: Any = _EMPTY
    error: ToolErrorInfo | None = None
    meta: Any = None
    additional_contexts: Any = _EMPTY
    #: True when the body called ``ctx.conclude_turn()`` and the call succeeded (failures never conclude).
    concludes_turn: bool = False

    @staticmethod
    def success(value: JsonValue, content: Sequence[ContentBlock], *, meta: JsonValue = None,
                additional_contexts: Sequence[JsonValue] = ()) -> ToolResult:
        """Build a success, snapshotting (and so validating and freezing) every part."""
        return ToolResult(
            is_error=False,
            value=snapshot(value, freeze=True),
            content=snapshot(list(content), freeze=True, root="content"),
            meta=snapshot(meta, freeze=True, root="meta"),
            additional_contexts=snapshot(list(additional_contexts), freeze=True, root="additional_contexts"),
        )

    @staticmethod
    def failure(code: str, message: str, *, content: Sequence[ContentBlock] | None = None,
                meta: JsonValue = None, additional_contexts: Sequence[JsonValue] = ()) -> ToolResult:
        """Build an error result; ``content`` defaults to the single block ``Error: <message>``.

        A message quoting text that is not Unicode (a lone surrogate) has it escaped (``\\udc80``):
        an error must always be reportable.
        """
        message = escape_lone_surrogates(message)
        blocks = error_content(message) if content is None else snapshot(list(content), freeze=True,
                                                                          root="content")
        return ToolResult(
            is_error=True,
            content=blocks,
            error=ToolErrorInfo(code, message),
            meta=snapshot(meta, freeze=True, root="meta"),
            additional_contexts=snapshot(list(additional_contexts), freeze=True, root="additional_contexts"),
        )

    @property
    def code(self) -> str | None:
        """The error code of a failure, None for a success."""
        return None if self.error is None else self.error.code

    @property
    def text(self) -> str:
        """The text blocks of ``content`` joined by newlines (non-text blocks as ``[<type> content]``)."""
        return text_of(self.content)

    def to_json(self) -> dict[str, Any]:
        """The CLI shape ``{"is_error", "value", "content", "error"}`` as plain (mutable) JSON."""
        return {
            "is_error": self.is_error,
            "value": snapshot(self.value),
            "content": snapshot(self.content),
            "error": None if self.error is None else self.error.to_json(),
        }

    def __repr__(self) -> str:
        if self.error is not None:
            return f"ToolResult(error={self.error.code}: {self.error.message!r})"
        return f"ToolResult(value={self.value!r})"


def text_block(text: str) -> FrozenDict:
    """A frozen ``{"type": "text", "text": text}`` block."""
    return FrozenDict(type="text", text=text)


def error_content(message: str) -> FrozenList:
    """The standard content of a failure: one text block ``Error: <message>``."""
    return FrozenList((text_block("Error: " + escape_lone_surrogates(message)),))


def text_of(content: Sequence[Any]) -> str:
    """Join the text of content blocks with newlines; other blocks render as ``[<type> content]``."""
    parts: list[str] = []
    for block in content:
        if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif isinstance(block, dict):
            parts.append(f"[{block.get('type')} content]")
    return "\n".join(parts)
