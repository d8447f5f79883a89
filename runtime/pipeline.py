"""The five-stage execution pipeline, exposed stage by stage for schedulers.

INTERNAL API for ``runtime.scheduler`` and ``tools.run_code`` (shape pinned here; being implemented):

``rt.stages`` is a :class:`Stages` object::

    execution = rt.stages.create(name, arguments, *, call_id, root_call_id=None, agent=None,
                                 parent=None, cancel=None)              # sync, never raises for bad input
    execution.call        -> ToolCall (frozen: name, arguments, call_id, root_call_id, agent, token,
                                       parent, cancel)
    execution.token       -> ExecutionToken (pass as ``parent=`` for child calls)
    rt.stages.execution_mode(execution) -> "parallel" | "exclusive"     # re-classify right before start
    rt.stages.claims(execution) -> ResourceClaims | None                # opt-in resource claims
    prepared = await rt.stages.prepare(execution)                       # ordered: pre-execute, approval,
                                                                        # guards
    prepared.ready        -> bool (False: already settled, do not dispatch; pass it to finish)
    dispatched = await rt.stages.dispatch(prepared)                     # the only overlapping stage:
                                                                        # around wrappers + body
    result = await rt.stages.finish(dispatched_or_prepared)             # ordered: post-execute,
                                                                        # materialise, finalize_content
                                                                        # once, observers -> ToolResult

``rt.execute(...)`` is exactly ``create -> prepare -> dispatch -> finish``. Every stage is total: bad
input, failing hooks and failing bodies become error results; only a genuine outer anyio cancellation of
the calling task propagates (after a started body has finished).
"""

from __future__ import annotations

__all__ = ()
