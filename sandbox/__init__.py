"""The sandbox: a RestrictedPython interpreter with async, run in isolated, resource-limited workers.

``Sandbox`` (an async context manager owning a warm worker supply) runs a program in a fresh worker
process and returns a ``RunResult``; ``SandboxLimits`` are its budgets; ``SandboxSession`` keeps one
worker and its globals between runs. Inside the worker the language half (``compile_program``,
``run_program``) executes the program. This package imports nothing from ``runtime``, ``sdk`` or
``tools``.
"""

from __future__ import annotations

from .calls import (
    CallAbandonment as CallAbandonment,
)
from .calls import (
    CooperativeCallTool as CooperativeCallTool,
)
from .errors import (
    SandboxClosedError as SandboxClosedError,
)
from .errors import (
    SandboxError as SandboxError,
)
from .errors import (
    SandboxStartError as SandboxStartError,
)
from .errors import (
    SandboxUsageError as SandboxUsageError,
)
from .errors import (
    SessionClosedError as SessionClosedError,
)
from .errors import (
    ToolCallFailure as ToolCallFailure,
)
from .interpreter import (
    CompiledProgram as CompiledProgram,
)
from .interpreter import (
    ProgramCompileError as ProgramCompileError,
)
from .interpreter import (
    ProgramOutcome as ProgramOutcome,
)
from .interpreter import (
    ProgramPolicyError as ProgramPolicyError,
)
from .interpreter import (
    ProgramSyntaxError as ProgramSyntaxError,
)
from .interpreter import (
    ToolCallError as ToolCallError,
)
from .interpreter import (
    compile_program as compile_program,
)
from .interpreter import (
    run_program as run_program,
)
from .limits import (
    DEFAULT_LIMITS as DEFAULT_LIMITS,
)
from .limits import (
    SandboxLimits as SandboxLimits,
)
from .lossless import (
    FrozenDict as FrozenDict,
)
from .lossless import (
    FrozenList as FrozenList,
)
from .lossless import (
    JsonValue as JsonValue,
)
from .lossless import (
    LosslessJsonError as LosslessJsonError,
)
from .pool import (
    Sandbox as Sandbox,
)
from .results import (
    ERROR_KINDS as ERROR_KINDS,
)
from .results import (
    RunError as RunError,
)
from .results import (
    RunResult as RunResult,
)
from .results import (
    RunStats as RunStats,
)
from .session import (
    SandboxSession as SandboxSession,
)

__all__ = (  # noqa: RUF022 (plain sorted order, checked by tests/test_public_api.py)
    "CallAbandonment",
    "CompiledProgram",
    "CooperativeCallTool",
    "DEFAULT_LIMITS",
    "ERROR_KINDS",
    "FrozenDict",
    "FrozenList",
    "JsonValue",
    "LosslessJsonError",
    "ProgramCompileError",
    "ProgramOutcome",
    "ProgramPolicyError",
    "ProgramSyntaxError",
    "RunError",
    "RunResult",
    "RunStats",
    "Sandbox",
    "SandboxClosedError",
    "SandboxError",
    "SandboxLimits",
    "SandboxSession",
    "SandboxStartError",
    "SandboxUsageError",
    "SessionClosedError",
    "ToolCallError",
    "ToolCallFailure",
    "compile_program",
    "run_program",
)
