"""The repeat-call reminder: a post-execute observer that notices an agent repeating the same call.

Each agent has a chain ``(key, count)``: the key is the tool name plus the call's canonical arguments
(deep key-sorted JSON, so property order does not matter; arrays keep their order). Counting happens in
post-execute, so denied calls count too. A *tracked* call (it passes ``include`` and is not ``exclude``d)
equal to the previous tracked call increments the count; a different tracked call restarts it at 1; an
untracked call neither counts nor resets.

When the count reaches a threshold (default 3, 5, 8) the reminder prepends an advisory context to the
downstream decision's ``additional_contexts`` (for ``Accept`` and ``Block`` alike). It never vetoes and
never rewrites the result. The first threshold gets a gentle note; later thresholds a detailed one naming
the tool, the number of consecutive calls and the (truncated) canonical arguments. Nothing fires between
or beyond thresholds.

Better than the reference (spec 13.10): child calls of ``run_code`` (calls with a parent token) have a
chain of their own, separate from the agent's model-level chain, so a program's sub-calls neither
inflate nor reset the count of the agent's own calls. Chains live in memory only, weakly keyed by the
agent; calls without an agent are ignored. A user message resets the agent's chains: the reminder
listens to :meth:`ToolRuntime.note_user_message <codemode.runtime.ToolRuntime.note_user_message>`, which
:class:`codemode.runtime.Turn` calls for each user message (a loop of your own calls it, or
:meth:`RepeatReminder.note_user_message`, when the user speaks). Contexts delivered as user messages are
not the user's words and reset nothing.
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Final

from codemode.runtime.errors import ConfigError
from codemode.runtime.hooks import Accept, Block, PostDecision
from codemode.runtime.scope import Scope
from codemode.sandbox.lossless import LosslessJsonError, canonical_dumps

if TYPE_CHECKING:
    from codemode.runtime._runtime import ToolRuntime
    from codemode.runtime.pipeline import ToolCall
    from codemode.runtime.results import ToolResult

__all__ = ("DEFAULT_THRESHOLDS", "PLUGIN_NAME", "RepeatReminder", "install_repeat_reminder")

DEFAULT_THRESHOLDS: Final = (3, 5, 8)
#: The plugin name in each reminder context's ``source``.
PLUGIN_NAME: Final = "repeat-tool-reminder"


@dataclass(slots=True)
class _Chain:
    key: str
    count: int


def _compile_patterns(label: str, patterns: object, problems: list[str]) -> tuple[re.Pattern[str], ...]:
    if isinstance(patterns, str) or not isinstance(patterns, Sequence):
        problems.append(f"{label} must be a sequence of name patterns, not {type(patterns).__name__}")
        return ()
    compiled: list[re.Pattern[str]] = []
    for index, pattern in enumerate(patterns):
        if not isinstance(pattern, str) or not pattern:
            problems.append(f"{label}[{index}] must be a non-empty string pattern, not {pattern!r}")
            continue
        compiled.append(re.compile(".*".join(re.escape(part) for part in pattern.split("*"))))
    return tuple(compiled)


def _check_thresholds(thresholds: object, problems: list[str]) -> tuple[int, ...]:
    if isinstance(thresholds, str) or not isinstance(thresholds, Sequence):
        problems.append(f"thresholds must be a sequence of integers, not {type(thresholds).__name__}")
        return ()
    if not thresholds:
        problems.append("thresholds must not be empty")
        return ()
    good: list[int] = []
    for index, value in enumerate(thresholds):
        if type(value) is not int or value < 2:
            problems.append(f"thresholds[{index}] must be an integer >= 2, not {value!r}")
        elif value in good:
            problems.append(f"thresholds[{index}] repeats {value}: thresholds must be unique")
        else:
            good.append(value)
    return tuple(sorted(good))


def _matches(patterns: tuple[re.Pattern[str], ...], name: str) -> bool:
    return any(pattern.fullmatch(name) for pattern in patterns)


def _preview(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… (+{len(text) - limit} more chars)"


class RepeatReminder:
    """The installed reminder: call it to uninstall; :meth:`note_user_message` resets an agent's chains.

    Build it with :func:`install_repeat_reminder`, which validates the configuration.
    """

    def __init__(self, *, thresholds: tuple[int, ...], include: tuple[re.Pattern[str], ...],
                 exclude: tuple[re.Pattern[str], ...], arguments_preview_chars: int) -> None:
        self.thresholds = thresholds
        self._first = thresholds[0]
        self._include = include
        self._exclude = exclude
        self._preview_chars = arguments_preview_chars
        self._chains: weakref.WeakKeyDictionary[Scope, dict[bool, _Chain]] = weakref.WeakKeyDictionary()
        self._disposers: list[Callable[[], None]] = []

    def __call__(self) -> None:
        """Uninstall the post-execute hook and the user-message listener (idempotent)."""
        disposers, self._disposers = self._disposers, []
        for dispose in disposers:
            dispose()

    def note_user_message(self, agent: Scope) -> None:
        """A user message reached ``agent``: forget its chains (model-level and ``run_code`` children)."""
        self._chains.pop(agent, None)

    reset = note_user_message

    def count(self, agent: Scope, *, nested: bool = False) -> int:
        """The current consecutive count of the agent's model-level (or nested) chain (0 when empty)."""
        chain = self._chains.get(agent, {}).get(nested)
        return 0 if chain is None else chain.count

    def tracks(self, name: str) -> bool:
        """Whether calls of tool ``name`` count (they pass ``include`` and are not ``exclude``d)."""
        if self._include and not _matches(self._include, name):
            return False
        return not _matches(self._exclude, name)

    def observe(self, agent: Scope, name: str, arguments: Any, *, nested: bool) -> dict[str, Any] | None:
        """Count one settled call; return the reminder context when the count hits a threshold."""
        if not self.tracks(name):
            return None
        try:
            canonical_args = canonical_dumps(arguments)
        except (LosslessJsonError, TypeError, ValueError):
            canonical_args = "null"
        key = canonical_dumps([name, canonical_args])
        chains = self._chains.setdefault(agent, {})
        chain = chains.get(nested)
        if chain is not None and chain.key == key:
            chain.count += 1
        else:
            chain = chains[nested] = _Chain(key, 1)
        if chain.count not in self.thresholds:
            return None
        return self._context(name, canonical_args, chain.count)

    def _context(self, name: str, canonical_args: str, count: int) -> dict[str, Any]:
        if count == self._first:
            text = (f"Reminder: you have now made the identical {name} call {count} times in a row. "
                    "Before repeating it, analyse the result you already got. If it did not give you what "
                    "you need, try different arguments or a different approach.")
        else:
            text = (
                "Repeated identical tool call detected.\n"
                f"tool: {name}\n"
                f"consecutive_calls: {count}\n"
                f"arguments: {_preview(canonical_args, self._preview_chars)}\n"
                "Do not repeat this call again: the result will not change. Change your action (other "
                "arguments, another tool, or a different plan), or finish with what you have.")
        return {
            "content": [{"type": "text", "text": text}],
            "source": {"kind": "plugin", "plugin": PLUGIN_NAME, "form": "notice",
                       "summary": f"{name} × {count}"},
        }

    async def _hook(self, call: ToolCall, result: ToolResult,
                    call_next: Callable[[], Awaitable[PostDecision]]) -> PostDecision:
        decision = await call_next()
        agent = call.agent
        if agent is None or not isinstance(decision, Accept | Block):
            return decision  # no chain to count in; a malformed decision is the pipeline's to reject
        context = self.observe(agent, call.name, call.arguments, nested=call.parent is not None)
        if context is None:
            return decision
        return replace(decision, additional_contexts=(context, *decision.additional_contexts))


def install_repeat_reminder(rt: ToolRuntime, *, thresholds: Sequence[int] = DEFAULT_THRESHOLDS,
                            include: Sequence[str] = (), exclude: Sequence[str] = (),
                            arguments_preview_chars: int = 500) -> RepeatReminder:
    """Install the reminder on ``rt``'s post-execute stage and return it (calling it uninstalls).

    ``include``/``exclude`` are tool-name patterns where ``*`` matches any run of characters and every
    other character is literal (anchored); an empty ``include`` tracks every tool. Invalid configuration
    raises :class:`~codemode.runtime.errors.ConfigError` listing every problem.
    """
    problems: list[str] = []
    checked = _check_thresholds(thresholds, problems)
    included = _compile_patterns("include", include, problems)
    excluded = _compile_patterns("exclude", exclude, problems)
    if type(arguments_preview_chars) is not int or arguments_preview_chars < 1:
        problems.append(f"arguments_preview_chars must be an integer >= 1, not {arguments_preview_chars!r}")
    if problems:
        raise ConfigError("invalid repeat reminder configuration: " + "; ".join(problems))
    reminder = RepeatReminder(thresholds=checked, include=included, exclude=excluded,
                              arguments_preview_chars=arguments_preview_chars)
    reminder._disposers = [rt.on_post_execute(reminder._hook),
                           rt.on_user_message(reminder.note_user_message)]
    return reminder
