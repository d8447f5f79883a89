"""run_code: programs call tools through child dispatches of the same pipeline (issue 4, spec 7)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codemode.runtime import (
    Agent,
    CancelSource,
    Scope,
    ToolCall,
    ToolContext,
    ToolOutput,
    ToolRuntime,
    define_tool,
    text_block,
)
from codemode.sandbox import SandboxClosedError
from codemode.tools.demo import demo_tools
from codemode.tools.run_code import NO_OUTPUT, PythonCodeRuntime, render_run_output
from codemode.tools.timeout_policy import install_timeout_policy

pytestmark = pytest.mark.anyio


def _object_output() -> ToolOutput:
    return ToolOutput(schema={"type": "object"}, render=lambda args, value: [text_block(str(value))])


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def code_runtime() -> AsyncIterator[PythonCodeRuntime]:
    async with PythonCodeRuntime() as runtime:
        yield runtime


@pytest.fixture
async def rt(code_runtime: PythonCodeRuntime) -> AsyncIterator[ToolRuntime]:
    async with ToolRuntime("code", code_runtime=code_runtime) as runtime:
        for definition in demo_tools():
            runtime.register(definition)
        yield runtime


async def run(rt: ToolRuntime, code: str, *, agent: Scope | None = None, call_id: str = "outer",
              cancel: Any = None) -> Any:
    with anyio.fail_after(30):
        return await rt.execute("run_code", {"code": code, "description": "test program"},
                                agent=agent, call_id=call_id, cancel=cancel)


def text_of(result: Any) -> str:
    return str(result.content[0]["text"])


async def test_a_program_returns_logs_then_its_value(rt: ToolRuntime) -> None:
    """It shows printed lines first, then the returned value pretty-printed."""
    result = await run(rt, 'print("a")\nprint("b", 2)\nreturn {"n": 42, "ok": True}')
    assert not result.is_error
    assert text_of(result) == 'a\nb 2\n{\n  "n": 42,\n  "ok": true\n}'
    assert result.value == {"logs": ["a", "b 2"], "result": {"n": 42, "ok": True}}


@pytest.mark.parametrize(
    ("logs", "value", "has_value", "expected"),
    [
        ([], None, False, NO_OUTPUT),
        ([], "raw text", True, "raw text"),
        (["x"], None, True, "x\nnull"),
        ([], [], True, "[]"),
        ([], {}, True, "{}"),
        ([], [[[[[[1, 2]]]]]], True,
         "[\n  [\n    [\n      [\n        [\n          [1,2]\n        ]\n      ]\n    ]\n  ]\n]"),
    ],
)
def test_rendering_rules(logs: list[str], value: Any, has_value: bool, expected: str) -> None:
    """It renders strings raw, other JSON pretty with bounded indentation, and marks empty runs."""
    assert render_run_output(logs, value, has_value) == expected


def test_rendering_a_deep_value_stays_linear() -> None:
    """It keeps indentation under 11 characters however deep the value is."""
    deep: Any = 1
    for _ in range(3000):
        deep = [deep]
    text = render_run_output([], deep, True)
    assert max(len(line) - len(line.lstrip(" ")) for line in text.splitlines()) <= 10


async def test_a_program_with_no_output_says_so(rt: ToolRuntime) -> None:
    """It reports `(run_code completed with no output)` for a silent program."""
    result = await run(rt, "x = 1")
    assert text_of(result) == NO_OUTPUT and result.value == {"logs": []}


async def test_a_failing_program_is_code_run_failed_with_captured_output(rt: ToolRuntime) -> None:
    """It fails with CODE_RUN_FAILED, the kind, the message and the captured output."""
    result = await run(rt, 'print("before")\nraise ValueError("boom")')
    assert result.is_error and result.error.code == "CODE_RUN_FAILED"
    message = result.error.message
    assert message.startswith("code run failed (exception): ")
    assert "ValueError: boom" in message and message.endswith("\nCaptured output:\nbefore")
    assert "/work" not in message and "site-packages" not in message


async def test_syntax_errors_report_program_line_numbers(rt: ToolRuntime) -> None:
    """It reports every diagnostic with the program's own line number."""
    result = await run(rt, "x = 1\ny = (\n")
    assert result.is_error and "code run failed (syntax)" in result.error.message
    assert "line 2" in result.error.message or "line 3" in result.error.message


async def test_bindings_are_exactly_the_agents_visible_set(rt: ToolRuntime) -> None:
    """It binds scoped tools, hides restricted ones and never binds run_code."""
    agent = Agent("alice")
    mine = define_tool(name="mine", description="scoped", parameters={}, output=_object_output(),
                       execute=_return({"mine": True}))
    rt.register(mine, scope=agent)
    rt.restrict(agent, deny=["add"])
    code = (
        "found = {}\n"
        "for name in ['echo', 'add', 'mine', 'run_code', 'counter_increment']:\n"
        "    try:\n"
        "        tools[name]\n"
        "        found[name] = True\n"
        "    except KeyError:\n"
        "        found[name] = False\n"
        "return found"
    )
    result = await run(rt, code, agent=agent)
    assert result.value["result"] == {"echo": True, "add": False, "mine": True, "run_code": False,
                                      "counter_increment": True}
    sdk = next(s for s in rt.prompt(agent).sections if s.name == "tools:sdk").text
    assert "async def mine(" in sdk and "async def add(" not in sdk and "def run_code" not in sdk


def _return(value: Any) -> Any:
    async def execute(args: Any, ctx: ToolContext) -> Any:
        return value

    return execute


async def test_child_calls_carry_the_outer_identity(rt: ToolRuntime) -> None:
    """It numbers children <outer>:code:<n> and gives them the outer root, agent and token as parent."""
    seen: list[dict[str, Any]] = []
    outer_tokens: list[Any] = []

    async def record(args: Any, ctx: ToolContext) -> Any:
        seen.append({"call_id": ctx.call_id, "root": ctx.root_call_id, "agent": ctx.agent,
                     "parent": ctx.parent})
        return {}

    async def capture(call: ToolCall, call_next: Any) -> Any:
        if call.name == "run_code":
            outer_tokens.append(call.token)
        return await call_next()

    rt.register(define_tool(name="record", description="records", parameters={},
                            output=_object_output(), execute=record))
    rt.on_pre_execute(capture)
    agent = Agent("bob")
    result = await run(rt, "await tools.record({})\nawait tools.record()\n", agent=agent, call_id="c7")
    assert not result.is_error
    assert [s["call_id"] for s in seen] == ["c7:code:1", "c7:code:2"]
    assert {s["root"] for s in seen} == {"c7"}
    assert all(s["agent"] is agent and s["parent"] is outer_tokens[0] for s in seen)
    kinds = [(e.type, e.data["sub_call_id"]) for e in agent.events.events]
    assert kinds == [("tool/code-dispatch-start", "c7:code:1"), ("tool/code-dispatch", "c7:code:1"),
                     ("tool/code-dispatch-start", "c7:code:2"), ("tool/code-dispatch", "c7:code:2")]


async def test_dict_keyword_and_subscript_calls_all_work(rt: ToolRuntime) -> None:
    """It accepts a dict, keyword arguments and subscript access for the same tool."""
    code = (
        "a = await tools.add({'a': 1, 'b': 2})\n"
        "b = await tools.add(a=3, b=4)\n"
        "c = await tools['add']({'a': 5, 'b': 6})\n"
        "return [a['sum'], b['sum'], c['sum']]"
    )
    assert (await run(rt, code)).value["result"] == [3, 7, 11]


@pytest.mark.parametrize(
    ("call", "code"),
    [
        ("tools.fail({'message': 'nope'})", "TOOL_FAILED"),
        ("tools.add({'a': 1})", "INVALID_ARGS"),
        ("tools.echo({'text': 1})", "INVALID_ARGS"),
    ],
)
async def test_failed_child_calls_raise_tool_call_error_with_a_code(rt: ToolRuntime, call: str,
                                                                      code: str) -> None:
    """It raises ToolCallError carrying the tool name, the message and a machine-readable code."""
    program = (f"try:\n    await {call}\nexcept ToolCallError as error:\n"
               "    return [error.tool_name, error.code, str(error)]")
    name, got_code, message = (await run(rt, program)).value["result"]
    assert (name, got_code) == (call.split(".")[1].split("(")[0], code) and message


async def test_guards_and_denials_apply_to_child_calls(rt: ToolRuntime) -> None:
    """It runs guards on child calls; a denial reaches the program as code DENIED."""
    rt.guard(lambda call: "echo is off limits" if call.name == "echo" else None)
    program = ("try:\n    await tools.echo({'text': 'x'})\nexcept ToolCallError as error:\n"
               "    return [error.code, str(error)]")
    assert (await run(rt, program)).value["result"] == ["DENIED", "echo is off limits"]


async def test_the_timeout_policy_applies_to_child_calls(rt: ToolRuntime) -> None:
    """It times out a child call that outlives its tool's timeout_ms."""
    install_timeout_policy(rt)

    async def slow(args: Any, ctx: ToolContext) -> Any:
        await anyio.sleep(5)
        return {}

    rt.register(define_tool(name="slow", description="slow", parameters={}, output=_object_output(),
                            execute=slow, timeout_ms=50))
    program = "try:\n    await tools.slow()\nexcept ToolCallError as error:\n    return error.code"
    with anyio.fail_after(4):
        assert (await run(rt, program)).value["result"] == "TOOL_TIMEOUT"


async def test_safe_calls_overlap_and_exclusive_calls_do_not(rt: ToolRuntime) -> None:
    """It overlaps concurrency-safe calls under gather and serialises exclusive ones."""
    active = {"safe": 0, "excl": 0}
    peak = {"safe": 0, "excl": 0}

    def tool(kind: str, safe: bool) -> Any:
        async def execute(args: Any, ctx: ToolContext) -> Any:
            active[kind] += 1
            peak[kind] = max(peak[kind], active[kind])
            await anyio.sleep(0.05)
            active[kind] -= 1
            return {}

        return define_tool(name=kind, description=kind, parameters={}, output=_object_output(),
                           execute=execute, is_concurrency_safe=(lambda args: True) if safe else None)

    rt.register(tool("safe", True))
    rt.register(tool("excl", False))
    program = ("import asyncio\nawait asyncio.gather(*[tools.safe() for _ in range(6)])\n"
               "await asyncio.gather(*[tools.excl() for _ in range(3)])")
    assert not (await run(rt, program)).is_error
    assert peak == {"safe": 6, "excl": 1}


async def test_the_sub_call_cap_bounds_overlap(code_runtime: PythonCodeRuntime) -> None:
    """It never runs more than max_parallel_sub_calls child bodies at once."""
    active, peak = [0], [0]

    async def execute(args: Any, ctx: ToolContext) -> Any:
        active[0] += 1
        peak[0] = max(peak[0], active[0])
        await anyio.sleep(0.02)
        active[0] -= 1
        return {}

    async with ToolRuntime("code", code_runtime=code_runtime, max_parallel_sub_calls=3) as rt:
        rt.register(define_tool(name="safe", description="s", parameters={}, output=_object_output(),
                                execute=execute, is_concurrency_safe=lambda args: True))
        result = await run(rt, "import asyncio\nawait asyncio.gather(*[tools.safe() for _ in range(12)])")
    assert not result.is_error and peak[0] == 3


async def test_cancelling_the_outer_call_stops_the_program_and_its_children(rt: ToolRuntime) -> None:
    """It stops the run, cancels the in-flight child and settles every started call."""
    agent = Agent("carol")
    source = CancelSource()
    outcome: list[Any] = []

    async def call() -> None:
        outcome.append(await run(rt, "await tools.sleep({'ms': 20000})", agent=agent, cancel=source.signal))

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            await anyio.sleep(0.5)
            source.cancel("user pressed stop")
    result = outcome[0]
    assert result.is_error and result.error.code in {"CODE_RUN_FAILED", "ABORTED"}
    types = [event.type for event in agent.events.events]
    assert types.count("tool/code-dispatch-start") == types.count("tool/code-dispatch") == 1


async def test_a_collapsed_call_and_the_prompt_follow_one_predicate(rt: ToolRuntime) -> None:
    """It signposts direct calls exactly when the prompt withholds the tool, whatever the mode."""
    agent = Agent("dave")
    for mode in ("code", "both", "native"):
        dispose = None if mode == "code" else rt.present_as(agent, mode)
        offered = {tool["name"] for tool in rt.prompt(agent).tools}
        direct = await rt.execute("echo", {"text": "hi"}, agent=agent)
        assert ("echo" in offered) is (not direct.is_error)
        assert rt.collapses("echo", agent, False) is ("echo" not in offered)
        if direct.is_error:
            assert direct.error.code == "UNKNOWN_TOOL" and "run_code" in direct.error.message
        if dispose is not None:
            dispose()


async def test_persistent_sessions_keep_variables_per_agent() -> None:
    """It keeps one session per agent, so a later run sees an earlier run's globals."""
    async with PythonCodeRuntime(persistent_sessions=True) as code_runtime, \
            ToolRuntime("code", code_runtime=code_runtime) as rt:
        alice, bob = Agent("alice"), Agent("bob")
        assert not (await run(rt, "counter = 41", agent=alice)).is_error
        assert (await run(rt, "return counter + 1", agent=alice)).value["result"] == 42
        other = await run(rt, "return counter", agent=bob)
        assert other.is_error and "counter" in other.error.message
        assert any(event.type == "code/session" for event in alice.events.events)


async def test_calls_without_an_agent_never_share_a_session() -> None:
    """With persistent sessions, two calls without an agent run on fresh workers: B never reads A's
    variable, and agents still keep theirs."""
    async with PythonCodeRuntime(persistent_sessions=True) as code_runtime, \
            ToolRuntime("code", code_runtime=code_runtime) as rt:
        assert not (await run(rt, "secret = 'from caller A'")).is_error
        stolen = await run(rt, "return secret")
        assert stolen.is_error and "secret" in stolen.error.message
        alice = Agent("alice")
        assert not (await run(rt, "n = 1", agent=alice)).is_error
        assert (await run(rt, "return n + 1", agent=alice)).value["result"] == 2


async def test_each_run_wakes_its_worker_ahead_of_the_program(
        code_runtime: PythonCodeRuntime, rt: ToolRuntime, monkeypatch: pytest.MonkeyPatch) -> None:
    """run_code prewakes the warm worker before it sets up the run's lane and bindings."""
    order: list[str] = []
    prewake, start = code_runtime.sandbox.prewake, code_runtime.sandbox.run

    def spy_prewake() -> None:
        order.append("prewake")
        prewake()

    async def spy_run(*args: Any, **kwargs: Any) -> Any:
        order.append("run")
        return await start(*args, **kwargs)

    monkeypatch.setattr(code_runtime.sandbox, "prewake", spy_prewake)
    monkeypatch.setattr(code_runtime.sandbox, "run", spy_run)
    for expected in (1, 2):
        assert (await run(rt, f"return {expected}")).value["result"] == expected
    assert order == ["prewake", "run", "prewake", "run"]


async def test_a_kept_session_is_woken_ahead_of_its_next_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """With persistent sessions, each run after an agent's first prewakes that agent's session."""
    from codemode.sandbox import SandboxSession

    woken: list[int | None] = []
    original = SandboxSession.prewake

    def spy(self: SandboxSession) -> None:
        woken.append(self.worker_pid)
        original(self)

    monkeypatch.setattr(SandboxSession, "prewake", spy)
    async with PythonCodeRuntime(persistent_sessions=True) as code_runtime, \
            ToolRuntime("code", code_runtime=code_runtime) as rt:
        alice = Agent("alice")
        assert not (await run(rt, "n = 1", agent=alice)).is_error
        assert (await run(rt, "n += 1\nreturn n", agent=alice)).value["result"] == 2
        assert (await run(rt, "return n", agent=Agent("bob"))).is_error  # (a new agent: nothing to wake)
    assert len(woken) == 1 and woken[0] is not None


def _register_hanging(rt: ToolRuntime, name: str, *, safe: bool = False) -> list[str]:
    """Register a tool that sleeps 30 s; returns the call ids whose bodies were cancelled."""
    cancelled: list[str] = []

    async def hang(args: Any, ctx: ToolContext) -> Any:
        try:
            await anyio.sleep(30)
        except anyio.get_cancelled_exc_class():
            cancelled.append(ctx.call_id)
            raise
        return {}

    rt.register(define_tool(name=name, description="never answers", parameters={}, output=_object_output(),
                            execute=hang, is_concurrency_safe=(lambda args: True) if safe else None))
    return cancelled


async def test_a_call_the_program_abandons_is_cancelled_and_blocks_nothing(rt: ToolRuntime) -> None:
    """It cancels a child call whose await the program gave up (wait_for), so later calls are not held."""
    agent = Agent("erin")
    cancelled = _register_hanging(rt, "stubborn")
    program = ("import asyncio\ntry:\n    await asyncio.wait_for(tools.stubborn(), timeout=0.05)\n"
               "except asyncio.TimeoutError:\n    pass\nreturn (await tools.add(a=1, b=1))['sum']")
    with anyio.fail_after(5):
        result = await run(rt, program, agent=agent, call_id="w")
    assert result.value["result"] == 2 and cancelled == ["w:code:1"]
    settled = {e.data["sub_call_id"]: e.data["is_error"] for e in agent.events.events
               if e.type == "tool/code-dispatch"}
    assert settled == {"w:code:1": True, "w:code:2": False}


async def test_many_abandoned_calls_beyond_the_pool_all_settle_promptly(rt: ToolRuntime) -> None:
    """A program that gives up on 30 gathered calls of a hanging tool (the sub-lane runs 10 at a
    time): every started call is aborted, every queued one settles, and the run ends at once."""
    agent = Agent("flood")
    aborted = _register_hanging(rt, "hang", safe=True)
    program = ("import asyncio\ntry:\n"
               "    await asyncio.wait_for(asyncio.gather(*[tools.hang() for _ in range(30)]), timeout=0.2)\n"
               "except asyncio.TimeoutError:\n    pass\nreturn 'gave up'")
    with anyio.fail_after(10):
        result = await run(rt, program, agent=agent, call_id="f")
    assert result.value["result"] == "gave up"
    starts = [e.data["sub_call_id"] for e in agent.events.events if e.type == "tool/code-dispatch-start"]
    settles = [e.data["sub_call_id"] for e in agent.events.events if e.type == "tool/code-dispatch"]
    assert starts == settles == [f"f:code:{n}" for n in range(1, 31)][:len(starts)]
    assert 10 <= len(aborted) <= len(starts) <= 30
    assert all(e.data["is_error"] for e in agent.events.events if e.type == "tool/code-dispatch")


_tool_names = st.lists(
    st.text(alphabet=st.characters(categories=("Ll", "Lu", "Nd"), include_characters="_-.$ "),
            min_size=1, max_size=12).filter(lambda n: n != "run_code"),
    min_size=1, max_size=6, unique=True)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(names=_tool_names, probe=st.text(min_size=1, max_size=8))
async def test_property_declared_names_are_callable_and_nothing_else(
        code_runtime: PythonCodeRuntime, names: list[str], probe: str) -> None:
    """It lets a program call every tool the SDK declares, by subscript, and refuses any other name."""
    async with ToolRuntime("code", code_runtime=code_runtime) as runtime:
        for name in names:
            runtime.register(define_tool(name=name, description="d", parameters={}, output=_object_output(),
                                         execute=_return({"name": name})))
        sdk = next(s for s in runtime.prompt().sections if s.name == "tools:sdk").text
        assert all(json.dumps(name, ensure_ascii=False) in sdk or f"def {name}(" in sdk for name in names)
        program = ("out = []\nfor name in NAMES:\n    try:\n"
                   "        out.append((await tools[name]())['name'])\n"
                   "    except KeyError:\n        out.append(None)\nreturn out").replace(
            "NAMES", repr([*names, probe]))
        result = await run(runtime, program)
    expected = [*names, probe if probe in names else None]
    assert not result.is_error and result.value["result"] == expected


async def test_the_code_runtime_can_be_tied_to_the_tool_runtime() -> None:
    """It runs programs when entered with rt.enter_async_context, and closes with the runtime."""
    code_runtime = PythonCodeRuntime()
    with anyio.fail_after(60):
        async with ToolRuntime("code", code_runtime=code_runtime) as rt:
            for definition in demo_tools():
                rt.register(definition)
            await rt.enter_async_context(code_runtime)
            result = await rt.execute("run_code", {"code": "return (await tools.add(a=2, b=3))['sum']",
                                                   "description": "tied"})
            assert result.value == {"logs": [], "result": 5}
    with pytest.raises(SandboxClosedError):  # the runtime closed it on exit
        await code_runtime.sandbox.run("return 1", tool_names=(), call_tool=_no_tool)


async def _no_tool(name: str, args: Any) -> Any:
    raise AssertionError("no tool is called")
