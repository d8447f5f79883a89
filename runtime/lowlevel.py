"""The low-level seams that schedulers and code runtimes build on: the pipeline's stages and the sub-lane.

An integrator never needs these: ``ToolRuntime.execute`` and ``ToolRuntime.execute_tool_calls`` run calls
through every stage, and ``run_code`` drives its child calls through :func:`open_sub_lane`. They are for
writing another scheduler or another code runtime:

* ``rt.stages`` is a :class:`Stages` (``create`` -> :class:`Execution`, ``prepare`` -> :class:`Prepared`,
  ``dispatch`` -> :class:`Dispatched`, ``finish`` -> ``ToolResult``; see :mod:`codemode.runtime.pipeline`),
  so a scheduler keeps prepare, post-execute and commit in order while only dispatch overlaps;
* :func:`open_sub_lane` opens the ordered lane of one program's child calls (:class:`SubLane`), for an
  outer call that satisfies :class:`OuterCall`;
* :func:`signpost_message` is the ``UNKNOWN_TOOL`` message of a call collapsed into code.

Like anyio's and trio's ``lowlevel`` modules, these names may change more freely than the package's
top-level ones.
"""

from __future__ import annotations

from .pipeline import Dispatched as Dispatched
from .pipeline import Execution as Execution
from .pipeline import ExecutionMode as ExecutionMode
from .pipeline import Prepared as Prepared
from .pipeline import Stages as Stages
from .pipeline import signpost_message as signpost_message
from .scheduler import OuterCall as OuterCall
from .scheduler import SubLane as SubLane
from .scheduler import open_sub_lane as open_sub_lane

__all__ = (
    "Dispatched",
    "Execution",
    "ExecutionMode",
    "OuterCall",
    "Prepared",
    "Stages",
    "SubLane",
    "open_sub_lane",
    "signpost_message",
)
