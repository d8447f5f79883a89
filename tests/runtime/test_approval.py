"""The approval seam: Ask decisions resolved into allow or distinct denials, failing closed."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from codemode.runtime import Agent, ApprovalRequest, Ask, CancelSource, ToolCall, ToolResult, ToolRuntime

from .helpers import echo_tool

pytestmark = pytest.mark.anyio


class Service:
    """A scripted approval service that records its requests."""

    def __init__(self, answer: Any, *, cancel: CancelSource | None = None, raises: bool = False) -> None:
        self.answer = answer
        self.cancel = cancel
        self.raises = raises
        self.requests: list[ApprovalRequest] = []

    async def request(self, request: ApprovalRequest) -> Any:
        self.requests.append(request)
        if self.cancel is not None:
            self.cancel.cancel("user left")
        if self.raises:
            raise RuntimeError("approval UI crashed")
        return self.answer


def _runtime(service: Any) -> tuple[ToolRuntime, list[Any]]:
    rt = ToolRuntime(approval=service)
    calls: list[Any] = []
    rt.register(echo_tool(calls=calls))

    async def ask(call: ToolCall, call_next: Any) -> Any:
        return Ask("writes to disk")

    rt.on_pre_execute(ask)
    return rt, calls


async def _run(rt: ToolRuntime, **kw: Any) -> ToolResult:
    with anyio.fail_after(5):
        return await rt.execute("echo", {"text": "x"}, call_id="a1", **kw)


@pytest.mark.parametrize(("answer", "code", "message"), [
    ("allowed-once", None, None),
    ("rejected", "DENIED", 'the user rejected tool "echo"'),
    ("cancelled", "DENIED", 'approval for tool "echo" was cancelled'),
    ("unavailable", "DENIED", 'tool "echo" requires approval, but no approval channel is available'),
    ("maybe", "POLICY_FAILED", None),
    (None, "POLICY_FAILED", None),
])
async def test_outcomes_map_to_allow_or_distinct_denials(answer: Any, code: str | None,
                                                         message: str | None) -> None:
    """It maps each closed outcome, and fails closed on anything else."""
    service = Service(answer)
    rt, calls = _runtime(service)
    agent = Agent("a")
    result = await _run(rt, agent=agent)
    assert result.code == code
    if message is not None:
        assert result.error is not None and result.error.message == message
    assert len(calls) == (1 if code is None else 0)
    request = service.requests[0]
    assert (request.agent, request.tool_name, request.call_id, request.reason) == (agent, "echo", "a1",
                                                                                   "writes to disk")


async def test_no_service_denies_with_the_ask_reason() -> None:
    """It denies with the ask's reason when no approval service is configured."""
    rt, calls = _runtime(None)
    result = await _run(rt, agent=Agent("a"))
    assert (result.code, result.error.message if result.error else None) == ("DENIED", "writes to disk")
    assert calls == []


async def test_no_agent_denies_without_consulting_the_service() -> None:
    """It refuses to route an approval for an anonymous call."""
    service = Service("allowed-once")
    rt, _calls = _runtime(service)
    result = await _run(rt)
    assert result.code == "DENIED"
    assert "has no agent to route it through" in result.text
    assert service.requests == []


async def test_raising_service_fails_closed() -> None:
    """It turns a raising approval service into POLICY_FAILED."""
    rt, _calls = _runtime(Service("allowed-once", raises=True))
    result = await _run(rt, agent=Agent("a"))
    assert result.code == "POLICY_FAILED"
    assert "approval UI crashed" in result.text


@pytest.mark.parametrize(("answer", "code"), [("cancelled", "ABORTED_BEFORE_DISPATCH"),
                                              ("allowed-once", "ABORTED_BEFORE_DISPATCH"),
                                              ("rejected", "DENIED")])
async def test_caller_cancelled_while_approval_pending(answer: str, code: str) -> None:
    """It aborts before dispatch when the caller left during approval; a deny stays a deny."""
    source = CancelSource()
    rt, calls = _runtime(Service(answer, cancel=source))
    result = await _run(rt, agent=Agent("a"), cancel=source.signal)
    assert result.code == code
    assert calls == []
