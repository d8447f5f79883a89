"""Presentation modes and the one collapse predicate: the conformance cases of spec 6.4, adapted.

A fake code runtime stands in for ``codemode.tools.run_code``: its ``run_code`` body returns a fixed value (or
dispatches one child call), and its SDK lists the declared tool names.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codemode.runtime import (
    RUN_CODE,
    Agent,
    CancelSource,
    CodeRuntimeMissingError,
    ConfigError,
    Mode,
    PresentationError,
    PromptError,
    ReservedNameError,
    Scope,
    ToolCall,
    ToolContext,
    ToolDefinition,
    ToolOutput,
    ToolResult,
    ToolRuntime,
    UnknownLanguageError,
    collapses,
    define_tool,
)
from codemode.runtime.lowlevel import signpost_message
from codemode.runtime.prompt import CODE_ONLY_RULE, UNLISTED_TOOLS

from .helpers import echo_tool

pytestmark = pytest.mark.anyio

RUN_CODE_OUTPUT = {"type": "object", "additionalProperties": False,
                   "properties": {"logs": {"type": "array", "items": {"type": "string"}}, "result": {}},
                   "required": ["logs"]}


def _render_run(args: Any, value: Any) -> list[dict[str, Any]]:
    if "result" not in value and not value["logs"]:
        return [{"type": "text", "text": "(run_code completed with no output)"}]
    return [{"type": "text", "text": repr(value.get("result"))}]


class FakeCodeRuntime:
    """A code runtime whose program is either ``return 1``-like or ``call <tool> <text>``."""

    def __init__(self, language: str = "python") -> None:
        self.language = language
        self.built = 0

    def run_code_definition(self, runtime: ToolRuntime) -> ToolDefinition:
        self.built += 1

        async def execute(args: Any, ctx: ToolContext) -> Any:
            words = args["code"].split()
            if words[:1] == ["call"]:
                child = await ctx.runtime.execute(words[1], {"text": words[2]},
                                                  call_id=f"{ctx.call_id}:code:1",
                                                  root_call_id=ctx.root_call_id, agent=ctx.agent,
                                                  parent=ctx.token, cancel=ctx.cancel)
                return {"logs": [], "result": child.to_json()}
            return {"logs": []}

        return define_tool(
            name=RUN_CODE,
            description=("Execute a Python program against the available tools. Pass `code` (the body of an "
                         "async function; use `return <value>`) and a short `description`."),
            parameters={"code": {"type": "string", "required": True,
                                 "description": "The program: the body of an async Python function."},
                        "description": {"type": "string", "required": True}},
            output=ToolOutput(schema=RUN_CODE_OUTPUT, render=_render_run),
            execute=execute,
        )

    def render_sdk(self, definitions: Sequence[ToolDefinition]) -> str:
        lines = ["Call tools from inside the program with top-level `await`.", "class Tools(Protocol):"]
        lines += [f"    async def {d.name}(self, args: dict) -> dict: ..." for d in definitions]
        return "\n".join(lines)


def make(mode: str = "native", *, runtime: Any = "fake", tools: Sequence[str] = ("echo",),
         **options: Any) -> ToolRuntime:
    code_runtime = FakeCodeRuntime() if runtime == "fake" else runtime
    rt = ToolRuntime(mode, code_runtime=code_runtime, **options)
    for name in tools:
        rt.register(echo_tool(name, prefix=f"{name}:"))
    return rt


def sdk_text(rt: ToolRuntime, scope: Scope | None = None) -> str | None:
    section = rt.prompt(scope).section("tools:sdk")
    return None if section is None else section.text


async def call(rt: ToolRuntime, name: str, args: Any, **kw: Any) -> ToolResult:
    with anyio.fail_after(5):
        return await rt.execute(name, args, **kw)


RUN = {"code": "return 1", "description": "Return one"}

# ------------------------------------------------------------------------------------- assembly / wire


def test_case_01_native_without_runtime_offers_tools_and_no_sdk() -> None:
    """It offers [echo] in a native deployment without a code runtime and has no tools:sdk section."""
    prompt = make(runtime=None).prompt()
    assert prompt.tool_names == ("echo",)
    assert prompt.section("tools:sdk") is None
    assert prompt.section("tools:code-only") is None


def test_case_02_code_offers_only_run_code_and_sdk_declares_echo() -> None:
    """It offers [run_code] in code mode; the SDK declares echo and not run_code."""
    rt = make("code")
    assert rt.prompt().tool_names == ("run_code",)
    text = sdk_text(rt)
    assert text is not None and "async def echo(" in text and "run_code" not in text


def test_case_03_code_only_rule_precedes_tool_guidance_and_sdk() -> None:
    """It places tools:code-only (99) with the rule before tool:echo (100) and tools:sdk (150)."""
    rt = make("code")
    rt.add_section("tool:echo", order=100, text="How to use echo.")
    names = [s.name for s in rt.prompt().sections]
    assert names == ["tools:code-only", "tool:echo", "tools:sdk"]
    rule = rt.prompt().section("tools:code-only")
    assert rule is not None and "`run_code` is the only tool you can call directly" in rule.text


def test_case_04_both_has_an_empty_code_only_section() -> None:
    """It keeps tools:code-only listed but empty in both mode, and offers echo."""
    prompt = make("both").prompt()
    section = prompt.section("tools:code-only")
    assert section is not None and section.text == ""
    assert "echo" in prompt.tool_names
    assert "run_code is" not in prompt.text()


def test_case_05_both_offers_tools_and_run_code_with_sdk() -> None:
    """It offers [echo, run_code] (lexicographic) and the SDK in both mode."""
    rt = make("both")
    assert rt.prompt().tool_names == ("echo", "run_code")
    assert "async def echo(" in (sdk_text(rt) or "")


@pytest.mark.parametrize(("mode", "restricted", "lifted"), [
    ("code", ("run_code",), ("run_code",)),
    ("both", ("echo", "run_code"), ("echo", "hidden", "run_code")),
])
def test_case_06_allow_restriction_shapes_wire_sdk_and_bindings(mode: str, restricted: tuple[str, ...],
                                                                lifted: tuple[str, ...]) -> None:
    """It applies an allow-restriction to the wire list, the SDK and the program bindings alike."""
    rt = make(mode, tools=("echo", "hidden"))
    agent = Agent("a")
    lift = rt.restrict(agent, allow=["echo"])
    assert rt.prompt(agent).tool_names == restricted
    text = sdk_text(rt, agent) or ""
    assert "async def echo(" in text and "hidden" not in text
    assert {d.name for d in rt.code_visible(agent)} == {"echo"}
    lift()
    assert rt.prompt(agent).tool_names == lifted


@pytest.mark.parametrize(("mode", "wire"), [("code", ("run_code",)), ("both", ("kept", "run_code"))])
def test_case_07_deny_restriction_shapes_wire_sdk_and_bindings(mode: str, wire: tuple[str, ...]) -> None:
    """It applies a deny-restriction to the wire list, the SDK and the bindings alike."""
    rt = make(mode, tools=("kept", "denied"))
    agent = Agent("a")
    rt.restrict(agent, deny=["denied"])
    assert rt.prompt(agent).tool_names == wire
    assert "denied" not in (sdk_text(rt, agent) or "")
    assert {d.name for d in rt.code_visible(agent)} == {"kept"}


@pytest.mark.parametrize("mode", ["code", "both"])
async def test_case_08_run_code_is_reserved_shared_and_runs(mode: str) -> None:
    """It reserves run_code, shares one definition across scopes, and runs a trivial program."""
    fake = FakeCodeRuntime()
    rt = make(mode, runtime=fake)
    agent = Agent("a")
    with pytest.raises(ReservedNameError, match="is reserved"):
        rt.register(echo_tool(RUN_CODE))
    with pytest.raises(ReservedNameError, match="is reserved"):
        rt.register(echo_tool(RUN_CODE), scope=agent)
    for filters in ({"allow": [RUN_CODE]}, {"deny": [RUN_CODE]}):
        with pytest.raises(ReservedNameError, match="reserved Code Mode transport"):
            rt.restrict(agent, **filters)
    rt.register(echo_tool("scoped_tool"), scope=agent)
    wire = rt.prompt(agent).tools
    assert [t["name"] for t in wire].count(RUN_CODE) == 1
    description = next(t for t in wire if t["name"] == RUN_CODE)["description"]
    assert description.startswith("Execute a Python program")
    assert "scoped_tool" in (sdk_text(rt, agent) or "")
    assert rt.get(RUN_CODE, agent) is rt.get(RUN_CODE)
    assert fake.built == 1
    result = await call(rt, RUN_CODE, RUN, agent=agent)
    assert result.text == "(run_code completed with no output)"


@pytest.mark.parametrize(("mode", "order"), [("code", ("run_code",)), ("both", ("run_code", "echo"))])
def test_case_09_tool_order_with_the_unlisted_marker(mode: str, order: tuple[str, ...]) -> None:
    """It puts listed names first and the rest at the <unlisted-tools> marker."""
    assert make(mode).prompt(tool_order=[RUN_CODE, UNLISTED_TOOLS]).tool_names == order


def test_case_10_bindings_never_contain_run_code() -> None:
    """It leaves run_code out of what a program can call."""
    rt = make("both")
    assert RUN_CODE not in {d.name for d in rt.code_visible()}
    assert RUN_CODE in {d.name for d in rt.definitions()}


def test_case_11_sdk_text_is_byte_identical_across_assemblies() -> None:
    """It renders the same SDK text twice for an unchanged tool set."""
    rt = make("code", tools=("b", "a", "c"))
    assert sdk_text(rt) == sdk_text(rt)
    assert rt.prompt().to_json() == rt.prompt().to_json()


def test_case_12_code_without_runtime_rejects_every_assembly() -> None:
    """It refuses to assemble a code-mode prompt without a code runtime."""
    rt = make("code", runtime=None)
    for _ in range(2):
        with pytest.raises(CodeRuntimeMissingError, match='mode "code" requires a code runtime'):
            rt.prompt()


def test_case_13_unknown_runtime_language_rejects_assembly() -> None:
    """It refuses a code runtime whose language has no SDK renderer."""
    rt = make("code", runtime=FakeCodeRuntime("ruby"))
    with pytest.raises(UnknownLanguageError, match='no SDK renderer registered for runtime language "ruby"'):
        rt.prompt()


def test_case_14_python_runtime_sdk_is_the_runtimes_rendering() -> None:
    """It uses the code runtime's SDK rendering of the visible set (minus run_code) verbatim."""
    fake = FakeCodeRuntime()
    rt = make("code", runtime=fake)
    assert sdk_text(rt) == fake.render_sdk(rt.code_visible())
    assert "class Tools(Protocol):" in (sdk_text(rt) or "")
    assert "top-level `await`" in (sdk_text(rt) or "")


def test_case_15_both_with_python_runtime() -> None:
    """It shows the Python SDK, the runtime's run_code description, and still offers echo."""
    rt = make("both")
    definition = rt.get(RUN_CODE)
    assert definition is not None and "Execute a Python program" in definition.description
    assert "echo" in rt.prompt().tool_names
    assert sdk_text(rt)


def test_case_16_other_languages_are_not_presented() -> None:
    """It rejects a TypeScript runtime: this project presents Python programs only (known: python)."""
    with pytest.raises(UnknownLanguageError, match=r'language "typescript" \(known: "python"\)'):
        make("code", runtime=FakeCodeRuntime("typescript")).prompt()


def test_case_17_run_code_definition_comes_from_the_runtime_lazily() -> None:
    """It builds run_code from the runtime once, on first need, with the runtime's texts."""
    fake = FakeCodeRuntime()
    rt = make("code", runtime=fake)
    assert fake.built == 0
    definition = rt.get(RUN_CODE)
    rt.prompt()
    assert fake.built == 1
    assert definition is not None
    assert "`return <value>`" in definition.description and "`description`" in definition.description
    assert "TypeScript" not in definition.description
    code_param = definition.parameters["properties"]["code"]["description"]
    assert code_param == "The program: the body of an async Python function."


async def test_case_18_unknown_language_run_code_fails_when_called() -> None:
    """It keeps run_code readable under an unknown language but fails a call with the language error."""
    rt = make("code", runtime=FakeCodeRuntime("ruby"))
    assert rt.get(RUN_CODE) is not None
    result = await call(rt, RUN_CODE, RUN)
    assert result.code == "UNKNOWN_CODE_LANGUAGE"
    assert 'runtime language "ruby" (known: "python")' in result.text


async def test_case_19_no_runtime_run_code_is_readable_and_fails_clearly() -> None:
    """It offers a readable Python-flavoured run_code stand-in that fails with the runtime error."""
    rt = make("code", runtime=None)
    definition = rt.get(RUN_CODE)
    assert definition is not None and "Execute a Python program" in definition.description
    result = await call(rt, RUN_CODE, RUN)
    assert result.code == "CODE_RUNTIME_REQUIRED"
    assert 'mode "code" requires a code runtime' in result.text


def test_case_20_tool_order_naming_a_collapsed_tool_fails() -> None:
    """It rejects a tool_order entry that is not offered in this mode."""
    with pytest.raises(PromptError, match='tool_order lists unregistered tool "echo"; known tools: run_code'):
        make("code").prompt(tool_order=["echo", UNLISTED_TOOLS])


async def test_case_21_a_closed_runtime_offers_nothing() -> None:
    """It assembles no tools and no sections once the runtime has been closed."""
    rt = make("code")
    async with rt:
        assert rt.prompt().tool_names == ("run_code",)
    prompt = rt.prompt()
    assert prompt.tools == () and prompt.section("tools:sdk") is None


@pytest.mark.parametrize("mode", ["code", "both"])
def test_case_22_a_scoped_section_shadows_the_generated_sdk(mode: str) -> None:
    """It shows a scope's own tools:sdk section there and the generated one elsewhere."""
    rt = make(mode)
    agent = Agent("a")
    rt.add_section("tools:sdk", order=150, text="scoped sdk", scope=agent)
    assert sdk_text(rt, agent) == "scoped sdk"
    assert "async def echo(" in (sdk_text(rt) or "")


@pytest.mark.parametrize("mode", ["code", "both"])
def test_case_23_an_assemble_hook_is_authoritative(mode: str) -> None:
    """It lets an on_assemble hook remove tools:sdk and run_code."""
    rt = make(mode)

    def strip(prompt: Any, scope: Any) -> Any:
        return type(prompt)(tuple(t for t in prompt.tools if t["name"] != RUN_CODE),
                            tuple(s for s in prompt.sections if s.name != "tools:sdk"))

    dispose = rt.on_assemble(strip)
    assert RUN_CODE not in rt.prompt().tool_names
    assert rt.prompt().section("tools:sdk") is None
    dispose()
    assert RUN_CODE in rt.prompt().tool_names


# ------------------------------------------------------------------------------------- execution


async def test_case_24_collapsed_direct_call_gets_the_signpost() -> None:
    """It rejects a model-level call of a collapsed tool with UNKNOWN_TOOL and the routing message."""
    rt = make("code", tools=("write",))
    result = await call(rt, "write", {"text": "x"})
    assert result.code == "UNKNOWN_TOOL"
    assert result.error is not None and result.error.message == signpost_message("write")
    assert result.error.message == ('unknown tool "write": only `run_code` is callable directly; call '
                                    "`write` from inside a `run_code` program instead")
    assert result.text == "Error: " + result.error.message


async def test_case_25_collapsed_call_with_a_pre_aborted_signal() -> None:
    """It reports ABORTED_BEFORE_DISPATCH for a collapsed call whose caller already cancelled."""
    rt = make("code", tools=("write",))
    source = CancelSource()
    source.cancel()
    assert (await call(rt, "write", {"text": "x"}, cancel=source.signal)).code == "ABORTED_BEFORE_DISPATCH"


def test_case_26_max_parallel_sub_calls_validation_and_default() -> None:
    """It requires a positive integer sub-call cap, defaulting to 10; code mode defines run_code."""
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ConfigError, match="max_parallel_sub_calls must be a positive integer"):
            ToolRuntime(max_parallel_sub_calls=bad)  # type: ignore[arg-type]
    rt = ToolRuntime("code")
    assert rt.max_parallel_sub_calls == 10
    assert rt.get(RUN_CODE) is not None


def test_case_27_default_construction_is_native() -> None:
    """It defaults to native: no run_code, no tools:sdk."""
    rt = ToolRuntime()
    assert rt.mode is Mode.NATIVE
    assert rt.get(RUN_CODE) is None
    assert rt.prompt().section("tools:sdk") is None


async def test_case_28_sub_dispatches_execute_native_tools_in_code_mode() -> None:
    """It executes a child call (parent token set) of a collapsed tool normally."""
    rt = make("code")
    agent = Agent("a")
    result = await call(rt, RUN_CODE, {"code": "call echo hi", "description": "Echo"}, call_id="r1",
                        agent=agent)
    assert result.is_error is False
    child = result.value["result"]
    assert child["is_error"] is False and child["value"] == {"text": "echo:hi"}


# ------------------------------------------------------------------------------------- per-agent presentation


async def test_case_29_agent_presented_as_code_in_a_native_deployment() -> None:
    """It collapses an agent presented as code while the global view stays native."""
    calls: list[Any] = []
    rt = ToolRuntime(code_runtime=FakeCodeRuntime())
    rt.register(echo_tool(calls=calls))
    agent = Agent("coder")
    rt.present_as(agent, "code")
    assert rt.prompt(agent).tool_names == ("run_code",)
    assert "async def echo(" in (sdk_text(rt, agent) or "")
    assert (await call(rt, "echo", {"text": "x"}, agent=agent)).code == "UNKNOWN_TOOL"
    assert calls == []
    assert rt.prompt().tool_names == ("echo",)
    assert rt.prompt().section("tools:sdk") is None


async def test_case_30_presentation_is_inherited_from_a_standing_scope() -> None:
    """It gives agents bound under a code preset the code presentation, and not their siblings."""
    rt = make()
    preset = Scope("preset")
    rt.present_as(preset, "code")
    joined, loner = Agent("joined", preset), Agent("loner")
    assert rt.get(RUN_CODE, joined) is not None
    assert rt.prompt(joined).tool_names == ("run_code",)
    assert rt.execution_mode("echo", {"text": "x"}, joined) == "exclusive"
    assert (await call(rt, "echo", {"text": "x"}, agent=joined)).code == "UNKNOWN_TOOL"
    assert rt.get(RUN_CODE, loner) is None
    assert rt.prompt(loner).tool_names == ("echo",)
    assert (await call(rt, "echo", {"text": "loner"}, agent=loner)).value == {"text": "echo:loner"}


def test_case_31_run_code_is_visible_only_to_the_coded_agent() -> None:
    """It defines run_code for the coded agent only."""
    rt = make()
    coded, other = Agent("coded"), Agent("other")
    rt.present_as(coded, "code")
    assert rt.get(RUN_CODE, coded) is not None
    assert rt.get(RUN_CODE, other) is None
    assert rt.get(RUN_CODE) is None


def test_case_32_native_agent_in_a_code_deployment() -> None:
    """It offers a native agent its tools and keeps the global tools:sdk section listed but empty."""
    rt = make("code")
    agent = Agent("native")
    rt.present_as(agent, "native")
    assert rt.prompt(agent).tool_names == ("echo",)
    assert sdk_text(rt, agent) == ""


def test_case_33_disposing_the_presentation_restores_native() -> None:
    """It removes the code presentation and its sections when the declaration is disposed."""
    rt = make()
    agent = Agent("a")
    dispose = rt.present_as(agent, "code")
    assert sdk_text(rt, agent)
    dispose()
    dispose()
    assert rt.prompt(agent).tool_names == ("echo",)
    assert rt.prompt(agent).section("tools:sdk") is None


def test_case_34_one_presentation_per_scope() -> None:
    """It rejects a second present_as in the same scope."""
    rt = make()
    agent = Agent("a")
    rt.present_as(agent, "code")
    with pytest.raises(PresentationError, match='conflicts with "code" already declared'):
        rt.present_as(agent, "both")


def test_case_35_present_as_requires_a_scope() -> None:
    """It rejects a runtime-wide present_as."""
    with pytest.raises(PresentationError, match="requires a scope"):
        make().present_as(None, "code")


def test_case_36_run_code_is_reserved_in_a_native_deployment() -> None:
    """It refuses to register run_code even when nothing presents it."""
    with pytest.raises(ReservedNameError, match="is reserved"):
        make().register(echo_tool(RUN_CODE))


async def test_case_37_the_agents_effective_mode_is_named() -> None:
    """It names the agent's own mode ("both"), not the deployment's, in the missing-runtime error."""
    rt = make(runtime=None)
    agent = Agent("a")
    rt.present_as(agent, "both")
    with pytest.raises(CodeRuntimeMissingError, match='mode "both" requires a code runtime'):
        rt.prompt(agent)
    result = await call(rt, RUN_CODE, RUN, agent=agent)
    assert 'mode "both" requires a code runtime' in result.text


# ------------------------------------------------------------------------------------- truth table


@pytest.mark.parametrize(("mode", "name", "code"), [
    ("both", "echo", None),
    ("native", "echo", None),
    ("code", RUN_CODE, None),
    ("both", RUN_CODE, None),
    ("native", RUN_CODE, "UNKNOWN_TOOL"),
    ("code", "echo", "UNKNOWN_TOOL"),
])
async def test_truth_table_direct_calls(mode: str, name: str, code: str | None) -> None:
    """It executes or rejects direct calls exactly as the predicate says."""
    rt = make(mode)
    args = RUN if name == RUN_CODE else {"text": "x"}
    assert (await call(rt, name, args)).code == code


async def test_truth_table_unregistered_name_in_code_mode_keeps_the_plain_path() -> None:
    """It gives an unregistered name the bare unknown-tool error after pre-execute saw it."""
    rt = make("code")
    seen: list[str] = []

    async def pre(call_: ToolCall, call_next: Any) -> Any:
        seen.append(call_.name)
        return await call_next()

    rt.on_pre_execute(pre)
    result = await call(rt, "ghost", {})
    assert result.error is not None and result.error.message == 'unknown tool "ghost"'
    assert seen == ["ghost"]


async def test_truth_table_collapsed_call_with_bad_arguments_reports_the_arguments() -> None:
    """It reports the argument error, not UNKNOWN_TOOL, for a collapsed call with lossy arguments."""
    result = await call(make("code"), "echo", {"text": float("nan")})
    assert result.code == "INVALID_ARGS"


def test_truth_table_collapsed_call_is_exclusive() -> None:
    """It classifies a collapsed call as exclusive."""
    rt = make("code")
    assert rt.execution_mode("echo", {"text": "x"}) == "exclusive"
    assert make("both").execution_mode("echo", {"text": "x"}) == "parallel"


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(["native", "code", "both"]), st.sampled_from([None, "native", "code", "both"]),
       st.sampled_from(["echo", RUN_CODE]), st.booleans())
def test_one_predicate_drives_prompt_and_executor(default: str, override: str | None, name: str,
                                                  nested: bool) -> None:
    """It derives the wire list, the code-only rule and the executor's rejection from one predicate."""
    rt = make(default)
    agent = Agent("a")
    if override is not None:
        rt.present_as(agent, override)
    effective = Mode(override or default)
    expected = not nested and name != RUN_CODE and effective is Mode.CODE
    assert rt.collapses(name, agent, nested) is expected
    assert collapses(name, effective, nested) is expected
    prompt = rt.prompt(agent)
    visible = {d.name for d in rt.definitions(agent)}
    if name in visible and not nested:
        assert (name in prompt.tool_names) is not expected
        parent = None
        execution = rt.stages.create(name, RUN if name == RUN_CODE else {"text": "x"}, agent=agent,
                                     parent=parent)
        rejected = execution.final is not None and execution.final.code == "UNKNOWN_TOOL"
        assert rejected is expected
    rule = prompt.section("tools:code-only")
    assert (rule is not None and rule.text == CODE_ONLY_RULE) is (effective is Mode.CODE)


async def test_changing_the_presentation_changes_prompt_and_executor_together() -> None:
    """It flips prompt and executor in lock-step when the predicate's input (the mode) changes."""
    rt = make()
    agent = Agent("a")
    assert "echo" in rt.prompt(agent).tool_names
    assert (await call(rt, "echo", {"text": "x"}, agent=agent)).is_error is False
    dispose = rt.present_as(agent, "code")
    assert "echo" not in rt.prompt(agent).tool_names
    assert (await call(rt, "echo", {"text": "x"}, agent=agent)).code == "UNKNOWN_TOOL"
    dispose()
    assert "echo" in rt.prompt(agent).tool_names
    assert (await call(rt, "echo", {"text": "x"}, agent=agent)).is_error is False


def test_invalid_mode_is_a_config_error() -> None:
    """It rejects an unknown mode name with a clear message."""
    with pytest.raises(ConfigError, match='mode must be "native", "code" or "both"'):
        ToolRuntime("hybrid")
    with pytest.raises(ConfigError):
        make().present_as(Agent("a"), "hybrid")


# ------------------------------------------------------------------------------------- the code binding


@pytest.mark.anyio
async def test_a_prompt_binds_its_code_runtime_and_run_code_checks_it() -> None:
    """A program sent under a prompt that another runtime rendered fails with CODE_RUNTIME_CHANGED;
    assembling the prompt again binds the new runtime (spec 13.1)."""
    rt = make("code")
    agent = Agent("coder")
    first = rt.code_runtime
    text = sdk_text(rt, agent)
    binding = rt.code_binding(agent)
    assert text is not None and binding is not None
    assert binding.language == "python" and binding.runtime is first
    assert binding.sdk_sha256 == hashlib.sha256(text.encode("utf-8")).hexdigest()
    assert not (await call(rt, "run_code", RUN, agent=agent)).is_error

    second = FakeCodeRuntime()
    rt.code_runtime = second
    stale = await call(rt, "run_code", RUN, agent=agent)
    assert stale.is_error and stale.error is not None and stale.error.code == "CODE_RUNTIME_CHANGED"
    assert "assemble the prompt again" in stale.error.message and second.built == 1

    sdk_text(rt, agent)
    assert not (await call(rt, "run_code", RUN, agent=agent)).is_error
    assert rt.code_binding(agent) is not None and rt.code_binding(agent).runtime is second  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_a_replaced_code_runtime_runs_programs_sent_without_a_prompt() -> None:
    """Without an assembled prompt nothing is bound, and run_code uses the runtime in place now."""
    rt = make("code")
    assert not (await call(rt, "run_code", RUN)).is_error
    second = FakeCodeRuntime()
    rt.code_runtime = second
    assert not (await call(rt, "run_code", RUN)).is_error
    assert second.built == 1 and rt.code_binding(None) is None


@pytest.mark.anyio
async def test_an_agent_without_a_prompt_of_its_own_is_held_to_the_default_binding() -> None:
    """A scope falls back to the runtime default's binding; its own prompt then takes over."""
    rt = make("code")
    agent = Agent("late")
    sdk_text(rt)  # the default prompt
    rt.code_runtime = FakeCodeRuntime()
    result = await call(rt, "run_code", RUN, agent=agent)
    assert result.error is not None and result.error.code == "CODE_RUNTIME_CHANGED"
    sdk_text(rt, agent)
    assert not (await call(rt, "run_code", RUN, agent=agent)).is_error


def test_replacing_the_code_runtime_is_a_tool_change_and_is_checked() -> None:
    """A new code runtime notifies change listeners (run_code changed); the same one does not; a
    malformed one is refused as at construction."""
    rt = make("code")
    seen: list[str] = []
    rt.on_change(lambda: seen.append("changed"))
    rt.code_runtime = rt.code_runtime
    assert seen == []
    rt.code_runtime = FakeCodeRuntime()
    assert seen == ["changed"]
    with pytest.raises(ConfigError, match="code_runtime must provide"):
        rt.code_runtime = object()  # type: ignore[assignment]
    assert seen == ["changed"]
