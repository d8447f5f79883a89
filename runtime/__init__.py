"""The tool runtime: definitions, registry, the five-stage pipeline, scheduling, modes and events.

The seams for writing another scheduler or code runtime (the pipeline's stages, the sub-lane) live in
:mod:`codemode.runtime.lowlevel`.
"""

from __future__ import annotations

from ._runtime import CodeBinding as CodeBinding
from ._runtime import ToolRuntime as ToolRuntime
from .approval import APPROVAL_OUTCOMES as APPROVAL_OUTCOMES
from .approval import ApprovalRequest as ApprovalRequest
from .approval import ApprovalService as ApprovalService
from .cancel import NEVER as NEVER
from .cancel import CancelSignal as CancelSignal
from .cancel import CancelSource as CancelSource
from .cancel import Disposer as Disposer
from .definitions import ResourceClaims as ResourceClaims
from .definitions import ToolDefinition as ToolDefinition
from .definitions import ToolOutput as ToolOutput
from .definitions import compile_parameters as compile_parameters
from .definitions import define_tool as define_tool
from .definitions import raw_tool as raw_tool
from .errors import AbortedBeforeDispatchError as AbortedBeforeDispatchError
from .errors import AbortedError as AbortedError
from .errors import CodemodeError as CodemodeError
from .errors import CodeRunFailedError as CodeRunFailedError
from .errors import CodeRuntimeChangedError as CodeRuntimeChangedError
from .errors import CodeRuntimeMissingError as CodeRuntimeMissingError
from .errors import ConfigError as ConfigError
from .errors import DefinitionError as DefinitionError
from .errors import DuplicateToolError as DuplicateToolError
from .errors import EventLogError as EventLogError
from .errors import JsonSchemaError as JsonSchemaError
from .errors import LifecycleError as LifecycleError
from .errors import PolicyError as PolicyError
from .errors import PresentationError as PresentationError
from .errors import PromptError as PromptError
from .errors import ProviderMessageError as ProviderMessageError
from .errors import ReservedNameError as ReservedNameError
from .errors import RestrictionError as RestrictionError
from .errors import ToolArgsError as ToolArgsError
from .errors import ToolDeniedError as ToolDeniedError
from .errors import ToolError as ToolError
from .errors import ToolExecutionError as ToolExecutionError
from .errors import ToolNotFoundError as ToolNotFoundError
from .errors import ToolOutputError as ToolOutputError
from .errors import ToolStalledError as ToolStalledError
from .errors import ToolTimeoutError as ToolTimeoutError
from .errors import TurnOverError as TurnOverError
from .errors import UnknownLanguageError as UnknownLanguageError
from .errors import UsageError as UsageError
from .events import Event as Event
from .events import EventLog as EventLog
from .events import ToolExchange as ToolExchange
from .events import project_tool_history as project_tool_history
from .functions import tool as tool
from .hooks import UNSET as UNSET
from .hooks import Accept as Accept
from .hooks import Allow as Allow
from .hooks import AroundHook as AroundHook
from .hooks import Ask as Ask
from .hooks import Block as Block
from .hooks import CodeDispatch as CodeDispatch
from .hooks import CodeDispatchLogHook as CodeDispatchLogHook
from .hooks import Decision as Decision
from .hooks import Deny as Deny
from .hooks import Guard as Guard
from .hooks import PostDecision as PostDecision
from .hooks import PostExecuteHook as PostExecuteHook
from .hooks import PreExecuteHook as PreExecuteHook
from .hooks import ResultObserver as ResultObserver
from .modes import KNOWN_LANGUAGES as KNOWN_LANGUAGES
from .modes import RUN_CODE as RUN_CODE
from .modes import CodeRuntime as CodeRuntime
from .modes import Mode as Mode
from .modes import collapses as collapses
from .pipeline import ExecutionToken as ExecutionToken
from .pipeline import ToolCall as ToolCall
from .pipeline import ToolContext as ToolContext
from .prompt import UNLISTED_TOOLS as UNLISTED_TOOLS
from .prompt import Prompt as Prompt
from .prompt import Section as Section
from .results import ToolErrorInfo as ToolErrorInfo
from .results import ToolResult as ToolResult
from .results import error_content as error_content
from .results import text_block as text_block
from .results import text_of as text_of
from .scheduler import ToolCallRequest as ToolCallRequest
from .schema import check_schema as check_schema
from .schema import validate_value as validate_value
from .scope import Agent as Agent
from .scope import Scope as Scope
from .turn import Step as Step
from .turn import Turn as Turn
from .turn import UserMessage as UserMessage
from .turn import deliver_results as deliver_results

__all__ = (  # noqa: RUF022 (plain sorted order, checked by tests/test_public_api.py)
    "APPROVAL_OUTCOMES",
    "AbortedBeforeDispatchError",
    "AbortedError",
    "Accept",
    "Agent",
    "Allow",
    "ApprovalRequest",
    "ApprovalService",
    "AroundHook",
    "Ask",
    "Block",
    "CancelSignal",
    "CancelSource",
    "CodeBinding",
    "CodeDispatch",
    "CodeDispatchLogHook",
    "CodeRunFailedError",
    "CodeRuntime",
    "CodeRuntimeChangedError",
    "CodeRuntimeMissingError",
    "CodemodeError",
    "ConfigError",
    "Decision",
    "DefinitionError",
    "Deny",
    "Disposer",
    "DuplicateToolError",
    "Event",
    "EventLog",
    "EventLogError",
    "ExecutionToken",
    "Guard",
    "JsonSchemaError",
    "KNOWN_LANGUAGES",
    "LifecycleError",
    "Mode",
    "NEVER",
    "PolicyError",
    "PostDecision",
    "PostExecuteHook",
    "PreExecuteHook",
    "PresentationError",
    "Prompt",
    "PromptError",
    "ProviderMessageError",
    "RUN_CODE",
    "ReservedNameError",
    "ResourceClaims",
    "RestrictionError",
    "ResultObserver",
    "Scope",
    "Section",
    "Step",
    "ToolArgsError",
    "ToolCall",
    "ToolCallRequest",
    "ToolContext",
    "ToolDefinition",
    "ToolDeniedError",
    "ToolError",
    "ToolErrorInfo",
    "ToolExchange",
    "ToolExecutionError",
    "ToolNotFoundError",
    "ToolOutput",
    "ToolOutputError",
    "ToolResult",
    "ToolRuntime",
    "ToolStalledError",
    "ToolTimeoutError",
    "Turn",
    "TurnOverError",
    "UNLISTED_TOOLS",
    "UNSET",
    "UnknownLanguageError",
    "UsageError",
    "UserMessage",
    "check_schema",
    "collapses",
    "compile_parameters",
    "define_tool",
    "deliver_results",
    "error_content",
    "project_tool_history",
    "raw_tool",
    "text_block",
    "text_of",
    "tool",
    "validate_value",
)
