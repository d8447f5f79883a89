"""Errors of the tool runtime, each with a stable machine-readable ``code``.

Tree::

    CodemodeError                      root of everything codemode raises on purpose
    ├── ToolError                      a tool call failed; becomes an error ToolResult
    │   ├── ToolNotFoundError          UNKNOWN_TOOL
    │   ├── ToolArgsError              INVALID_ARGS
    │   ├── ToolOutputError            INVALID_TOOL_OUTPUT
    │   ├── ToolExecutionError         TOOL_FAILED        (a body raised something that is not a ToolError)
    │   ├── ToolDeniedError            DENIED             (pre-execute deny, guard, approval refusal, block)
    │   ├── AbortedError               ABORTED
    │   ├── AbortedBeforeDispatchError ABORTED_BEFORE_DISPATCH
    │   ├── ToolTimeoutError           TOOL_TIMEOUT
    │   ├── ToolStalledError           TOOL_STALLED       (a body ignored cancellation past its grace period)
    │   ├── CodeRunFailedError         CODE_RUN_FAILED
    │   └── PolicyError                POLICY_FAILED      (a hook, guard or approval broke: fail closed)
    └── UsageError                     the integrator misused the API; raised to the caller
        ├── JsonSchemaError            UNSUPPORTED_SCHEMA
        ├── DefinitionError            INVALID_DEFINITION
        ├── ReservedNameError          RESERVED_NAME
        ├── DuplicateToolError         DUPLICATE_TOOL
        ├── RestrictionError           INVALID_RESTRICTION (restrict() without scope, empty or unknown names)
        ├── PresentationError          INVALID_PRESENTATION (present_as() without scope, or a second one)
        ├── CodeRuntimeMissingError    CODE_RUNTIME_REQUIRED (code/both mode without a code runtime)
        ├── UnknownLanguageError       UNKNOWN_CODE_LANGUAGE (a code runtime in a language we cannot render)
        ├── ConfigError                INVALID_CONFIG     (bad ToolRuntime options)
        ├── PromptError                INVALID_PROMPT     (prompt assembly misuse, e.g. a bad tool_order)
        ├── EventLogError              INVALID_EVENT_LOG  (an event log export that cannot be replayed)
        ├── TurnOverError              TURN_OVER          (a step asked of a Turn that already ended)
        ├── ProviderMessageError       INVALID_PROVIDER_MESSAGE (a provider's reply that cannot be read)
        └── LifecycleError             INVALID_LIFECYCLE  (also a RuntimeError: an object used before it
                                                           was entered, after it exited, or entered twice)

Codes are class attributes, unique across the tree (a test enforces it) and never reused. Messages say
what happened and, where there is one, what to do about it.
"""

from __future__ import annotations

from typing import ClassVar

__all__ = (
    "AbortedBeforeDispatchError",
    "AbortedError",
    "CodeRunFailedError",
    "CodeRuntimeChangedError",
    "CodeRuntimeMissingError",
    "CodemodeError",
    "ConfigError",
    "DefinitionError",
    "DuplicateToolError",
    "EventLogError",
    "JsonSchemaError",
    "LifecycleError",
    "PolicyError",
    "PresentationError",
    "PromptError",
    "ProviderMessageError",
    "ReservedNameError",
    "RestrictionError",
    "ToolArgsError",
    "ToolDeniedError",
    "ToolError",
    "ToolExecutionError",
    "ToolNotFoundError",
    "ToolOutputError",
    "ToolStalledError",
    "ToolTimeoutError",
    "TurnOverError",
    "UnknownLanguageError",
    "UsageError",
    "all_error_classes",
)


class CodemodeError(Exception):
    """Root of every error codemode raises deliberately."""

    code: ClassVar[str] = "CODEMODE_ERROR"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ToolError(CodemodeError):
    """A tool call failed. The pipeline turns it into an error :class:`~codemode.runtime.ToolResult`."""

    code: ClassVar[str] = "TOOL_ERROR"


class ToolNotFoundError(ToolError):
    """The name is not callable here (unknown, or reachable only from a ``run_code`` program)."""

    code: ClassVar[str] = "UNKNOWN_TOOL"


class ToolArgsError(ToolError):
    """The arguments do not satisfy the tool's parameter schema."""

    code: ClassVar[str] = "INVALID_ARGS"

    def __init__(self, violations: list[str]) -> None:
        self.violations = tuple(violations)
        super().__init__("invalid arguments: " + "; ".join(violations))


class ToolOutputError(ToolError):
    """The tool's value is not lossless JSON, violates ``output.schema`` or cannot be rendered."""

    code: ClassVar[str] = "INVALID_TOOL_OUTPUT"


class ToolExecutionError(ToolError):
    """A tool body raised an exception that is not a :class:`ToolError`."""

    code: ClassVar[str] = "TOOL_FAILED"


class ToolDeniedError(ToolError):
    """A policy refused the call: a pre-execute deny, a guard, the approval seam or a post-execute block."""

    code: ClassVar[str] = "DENIED"


class AbortedError(ToolError):
    """The caller cancelled the call after its body had started."""

    code: ClassVar[str] = "ABORTED"

    def __init__(self, message: str = "tool call aborted") -> None:
        super().__init__(message)


class AbortedBeforeDispatchError(ToolError):
    """The caller cancelled the call before its body started; nothing ran."""

    code: ClassVar[str] = "ABORTED_BEFORE_DISPATCH"

    def __init__(self, message: str = "tool call aborted before dispatch") -> None:
        super().__init__(message)


class ToolTimeoutError(ToolError):
    """The tool's own ``timeout_ms`` budget expired before it settled."""

    code: ClassVar[str] = "TOOL_TIMEOUT"

    def __init__(self, timeout_ms: float) -> None:
        self.timeout_ms = timeout_ms
        shown = int(timeout_ms) if float(timeout_ms).is_integer() else timeout_ms
        super().__init__(f"tool call timed out after {shown}ms")


class ToolStalledError(ToolError):
    """A cancelled tool body kept running past the grace period; the call was settled without it."""

    code: ClassVar[str] = "TOOL_STALLED"


class CodeRunFailedError(ToolError):
    """A ``run_code`` program failed (syntax, policy, exception, budget, worker exit, ...)."""

    code: ClassVar[str] = "CODE_RUN_FAILED"

    def __init__(self, kind: str, message: str, logs: list[str] | tuple[str, ...] = ()) -> None:
        self.kind = kind
        self.logs = tuple(logs)
        text = f"code run failed ({kind}): {message}"
        if logs:
            text += "\nCaptured output:\n" + "\n".join(logs)
        super().__init__(text)


class PolicyError(ToolError):
    """A pre-execute hook, guard or approval service failed; the call is refused (fail closed)."""

    code: ClassVar[str] = "POLICY_FAILED"


class UsageError(CodemodeError):
    """The integrator used the API wrongly (bad definition, bad restriction, bad configuration)."""

    code: ClassVar[str] = "USAGE_ERROR"


class JsonSchemaError(UsageError):
    """A schema uses JSON Schema outside the supported subset; ``violations`` lists every problem."""

    code: ClassVar[str] = "UNSUPPORTED_SCHEMA"

    def __init__(self, violations: list[str]) -> None:
        self.violations = tuple(violations)
        super().__init__("unsupported JSON schema: " + "; ".join(violations))


class DefinitionError(UsageError):
    """A tool definition is malformed (missing output, bad timeout, non-callable hook...)."""

    code: ClassVar[str] = "INVALID_DEFINITION"


class ReservedNameError(UsageError):
    """A reserved name (``run_code``) was registered, shadowed or restricted."""

    code: ClassVar[str] = "RESERVED_NAME"


class DuplicateToolError(UsageError):
    """A name is already registered in the same layer."""

    code: ClassVar[str] = "DUPLICATE_TOOL"


class RestrictionError(UsageError):
    """``restrict()`` was called without a scope, with an empty filter, or naming unknown tools."""

    code: ClassVar[str] = "INVALID_RESTRICTION"


class PresentationError(UsageError):
    """``present_as()`` was called without a scope, or twice for one scope."""

    code: ClassVar[str] = "INVALID_PRESENTATION"


class CodeRuntimeMissingError(UsageError):
    """A ``code``/``both`` presentation needs a code runtime and none was given.

    ``mode`` is the *effective* mode of the scope that needed it (not the runtime-wide default).
    """

    code: ClassVar[str] = "CODE_RUNTIME_REQUIRED"

    def __init__(self, mode: str) -> None:
        self.mode = mode
        super().__init__(
            f'mode "{mode}" requires a code runtime: pass code_runtime= to ToolRuntime '
            '(e.g. codemode.tools.run_code.PythonCodeRuntime()) or use mode "native"'
        )


class UnknownLanguageError(UsageError):
    """The code runtime names a language for which no SDK renderer exists."""

    code: ClassVar[str] = "UNKNOWN_CODE_LANGUAGE"

    def __init__(self, language: str, known: tuple[str, ...]) -> None:
        self.language = language
        listed = ", ".join(f'"{name}"' for name in known)
        super().__init__(f'no SDK renderer registered for runtime language "{language}" (known: {listed})')


class CodeRuntimeChangedError(UsageError):
    """``run_code`` was called under a prompt whose SDK another code runtime rendered.

    The prompt binds the code runtime (its language and the SDK text's hash) when it is assembled; a
    ``run_code`` call checks the binding, so a program is never handed to a runtime it was not
    written for (reference weak spot 13.1).
    """

    code: ClassVar[str] = "CODE_RUNTIME_CHANGED"

    def __init__(self, bound: str, current: str) -> None:
        self.bound = bound
        self.current = current
        super().__init__(
            f"the code runtime was replaced after this prompt was assembled (the prompt offered {bound}, "
            f"the runtime now has {current}): assemble the prompt again and resend the program")


class ConfigError(UsageError):
    """A :class:`~codemode.runtime.ToolRuntime` option is out of range."""

    code: ClassVar[str] = "INVALID_CONFIG"


class PromptError(UsageError):
    """Prompt assembly was asked for something impossible (e.g. ``tool_order`` naming an unknown tool)."""

    code: ClassVar[str] = "INVALID_PROMPT"


class EventLogError(UsageError):
    """An exported event log is malformed (bad JSON line, non-increasing seq, dangling link)."""

    code: ClassVar[str] = "INVALID_EVENT_LOG"


class TurnOverError(UsageError):
    """A :class:`~codemode.runtime.turn.Turn` was asked for another step after it ended."""

    code: ClassVar[str] = "TURN_OVER"

    def __init__(self, reason: str) -> None:
        super().__init__(f'the turn is over ({reason}); start a new Turn with the next user message')
        self.reason = reason


class ProviderMessageError(UsageError):
    """A model provider's message has a shape its adapter cannot read (e.g. a tool call without an id).

    ``path`` locates the problem in the message (``tool_calls[1].id``).
    """

    code: ClassVar[str] = "INVALID_PROVIDER_MESSAGE"

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


class LifecycleError(UsageError, RuntimeError):
    """An async context manager was used outside its lifetime: before ``async with`` entered it, after it
    exited, or entered a second time (also while still open).

    It is also a :class:`RuntimeError`, the type Python and anyio use for an object in the wrong state,
    so ``except RuntimeError`` keeps working. Raised where the mistake is made, to the integrator: a
    ``run_code`` call handed to a code runtime that was never entered fails here rather than as a
    tool error the model would see.
    """

    code: ClassVar[str] = "INVALID_LIFECYCLE"


def all_error_classes() -> tuple[type[CodemodeError], ...]:
    """Every error class defined here, root first (used to check that codes are unique)."""
    found: list[type[CodemodeError]] = []
    pending: list[type[CodemodeError]] = [CodemodeError]
    while pending:
        cls = pending.pop(0)
        found.append(cls)
        pending.extend(cls.__subclasses__())
    return tuple(found)
