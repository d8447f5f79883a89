"""The sandbox: a RestrictedPython interpreter with async, run in isolated, resource-limited workers.

``Sandbox`` (an async context manager owning a warm worker supply) runs a program in a fresh worker
process and returns a ``RunResult``; ``SandboxLimits`` are its budgets; ``SandboxSession`` keeps one
worker and its globals between runs. Inside the worker the language half executes the program; its
stages (``compile_program``, ``run_program``) are in :mod:`codemode.sandbox.lowlevel`. This package
imports nothing from ``runtime``, ``sdk``, ``tools`` or ``app``. A sandbox supervises its template
(``RestartPolicy``) and reports its health (``SandboxHealth``, ``HealthEvent``). ``RaySandbox`` (extra
``codemode[ray]``) runs the workers on a Ray cluster instead.

The names are imported on first use (PEP 562): the template process, which runs
``python -c "from codemode.sandbox._template import main"``, then loads only what a worker needs (the
interpreter, the protocol, the isolation layers), not the host's side (anyio, the pydantic limits).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import lazy_exports

if TYPE_CHECKING:
    from .calls import CallAbandonment as CallAbandonment
    from .calls import CooperativeCallTool as CooperativeCallTool
    from .errors import SandboxClosedError as SandboxClosedError
    from .errors import SandboxError as SandboxError
    from .errors import SandboxIsolationError as SandboxIsolationError
    from .errors import SandboxLimitsError as SandboxLimitsError
    from .errors import SandboxStartError as SandboxStartError
    from .errors import SandboxUsageError as SandboxUsageError
    from .errors import SessionClosedError as SessionClosedError
    from .errors import ToolCallFailure as ToolCallFailure
    from .health import HealthEvent as HealthEvent
    from .health import RestartPolicy as RestartPolicy
    from .health import SandboxHealth as SandboxHealth
    from .interpreter import ProgramCompileError as ProgramCompileError
    from .interpreter import ProgramPolicyError as ProgramPolicyError
    from .interpreter import ProgramSyntaxError as ProgramSyntaxError
    from .interpreter import ToolCallError as ToolCallError
    from .limits import DEFAULT_LIMITS as DEFAULT_LIMITS
    from .limits import SandboxLimits as SandboxLimits
    from .lossless import FrozenDict as FrozenDict
    from .lossless import FrozenList as FrozenList
    from .lossless import JsonValue as JsonValue
    from .lossless import LosslessJsonError as LosslessJsonError
    from .pool import Sandbox as Sandbox
    from .ray import RaySandbox as RaySandbox
    from .results import ERROR_KINDS as ERROR_KINDS
    from .results import ISOLATION_LAYERS as ISOLATION_LAYERS
    from .results import RunError as RunError
    from .results import RunResult as RunResult
    from .results import RunStats as RunStats
    from .session import SandboxSession as SandboxSession

#: Where each public name lives; ``__all__`` is derived from it, and tests/test_public_api.py checks
#: that the ``TYPE_CHECKING`` imports above (which type checkers read) say the same.
_HOMES: dict[str, str] = {
    "CallAbandonment": ".calls",
    "CooperativeCallTool": ".calls",
    "SandboxClosedError": ".errors",
    "SandboxError": ".errors",
    "SandboxIsolationError": ".errors",
    "SandboxLimitsError": ".errors",
    "SandboxStartError": ".errors",
    "SandboxUsageError": ".errors",
    "SessionClosedError": ".errors",
    "ToolCallFailure": ".errors",
    "HealthEvent": ".health",
    "RestartPolicy": ".health",
    "SandboxHealth": ".health",
    "ProgramCompileError": ".interpreter",
    "ProgramPolicyError": ".interpreter",
    "ProgramSyntaxError": ".interpreter",
    "ToolCallError": ".interpreter",
    "DEFAULT_LIMITS": ".limits",
    "SandboxLimits": ".limits",
    "FrozenDict": ".lossless",
    "FrozenList": ".lossless",
    "JsonValue": ".lossless",
    "LosslessJsonError": ".lossless",
    "Sandbox": ".pool",
    "RaySandbox": ".ray",
    "ERROR_KINDS": ".results",
    "ISOLATION_LAYERS": ".results",
    "RunError": ".results",
    "RunResult": ".results",
    "RunStats": ".results",
    "SandboxSession": ".session",
}

__all__ = tuple(sorted(_HOMES))
__getattr__, __dir__ = lazy_exports(__name__, _HOMES)
