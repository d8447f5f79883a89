"""The tool runtime: definitions, registry, the five-stage pipeline, scheduling, modes and events."""

from __future__ import annotations

from .errors import (
    AbortedBeforeDispatchError as AbortedBeforeDispatchError,
)
from .errors import (
    AbortedError as AbortedError,
)
from .errors import (
    CodemodeError as CodemodeError,
)
from .errors import (
    CodeRunFailedError as CodeRunFailedError,
)
from .errors import (
    DefinitionError as DefinitionError,
)
from .errors import (
    DuplicateToolError as DuplicateToolError,
)
from .errors import (
    JsonSchemaError as JsonSchemaError,
)
from .errors import (
    PolicyError as PolicyError,
)
from .errors import (
    ReservedNameError as ReservedNameError,
)
from .errors import (
    ToolArgsError as ToolArgsError,
)
from .errors import (
    ToolDeniedError as ToolDeniedError,
)
from .errors import (
    ToolError as ToolError,
)
from .errors import (
    ToolExecutionError as ToolExecutionError,
)
from .errors import (
    ToolNotFoundError as ToolNotFoundError,
)
from .errors import (
    ToolOutputError as ToolOutputError,
)
from .errors import (
    ToolStalledError as ToolStalledError,
)
from .errors import (
    ToolTimeoutError as ToolTimeoutError,
)
from .errors import (
    UsageError as UsageError,
)

__all__ = (
    "AbortedBeforeDispatchError",
    "AbortedError",
    "CodeRunFailedError",
    "CodemodeError",
    "DefinitionError",
    "DuplicateToolError",
    "JsonSchemaError",
    "PolicyError",
    "ReservedNameError",
    "ToolArgsError",
    "ToolDeniedError",
    "ToolError",
    "ToolExecutionError",
    "ToolNotFoundError",
    "ToolOutputError",
    "ToolStalledError",
    "ToolTimeoutError",
    "UsageError",
)
