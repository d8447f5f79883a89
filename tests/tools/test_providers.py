"""Provider adapters, on recorded provider-format replies (tests/tools/fixtures/providers/, no network):
offered tools, request bodies, tool calls read into ToolCallRequests, results rendered back, a round trip
per format."""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from codemode.runtime import (
    Agent,
    ProviderMessageError,
    ToolCallRequest,
    ToolContext,
    ToolOutput,
    ToolRuntime,
    Turn,
    define_tool,
    text_block,
)
from codemode.tools import AnthropicMessages, OpenAIChat, OpenAIResponses, ProviderAdapter
from codemode.tools.demo import demo_tools
from codemode.tools.providers import ADAPTERS
from codemode.tools.run_code import CODE_MODE_PLUGIN, PythonCodeRuntime

pytestmark = pytest.mark.anyio

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "providers"
FORMATS = ("openai_chat", "openai_responses", "anthropic")
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
DATA_URL = f"data:image/png;base64,{PNG}"
BAD_JSON = ("Error: invalid arguments: the argument text is not valid JSON "
            "(Expecting value: line 1 column 12 (char 11))")
NOT_OBJECT = 'Error: invalid arguments: "arguments" must be an object'


def adapter_for(fmt: str) -> ProviderAdapter:
    kinds = {"openai_chat": OpenAIChat, "openai_responses": OpenAIResponses, "anthropic": AnthropicMessages}
    return kinds[fmt]()


def fixture(fmt: str, name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((FIXTURES / f"{fmt}.{name}.json").read_text(encoding="utf-8"))
    return loaded


def _snapshot_tool() -> Any:
    async def execute(args: Any, ctx: ToolContext) -> Any:
        return {"caption": "a tiny picture"}

    render = [text_block("a tiny picture"), {"type": "image", "data": PNG, "mimeType": "image/png"}]
    return define_tool(name="snapshot", description="Take a snapshot.", parameters={},
                       output=ToolOutput(schema={"type": "object"}, render=lambda args, value: render),
                       execute=execute)


def _finish_tool() -> Any:
    async def execute(args: Any, ctx: ToolContext) -> Any:
        ctx.conclude_turn()
        return "finished"

    return define_tool(name="finish", description="End the turn.", parameters={},
                       output=ToolOutput(schema={"type": "string"}, render=lambda a, v: [text_block(v)]),
                       execute=execute)


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def native() -> AsyncIterator[ToolRuntime]:
    async with ToolRuntime() as rt:
        for definition in (*demo_tools(), _snapshot_tool()):
            rt.register(definition)
        yield rt


@pytest.fixture(scope="module")
async def code_runtime() -> AsyncIterator[PythonCodeRuntime]:
    async with PythonCodeRuntime() as runtime:
        yield runtime


@pytest.fixture
async def code(code_runtime: PythonCodeRuntime) -> AsyncIterator[ToolRuntime]:
    async with ToolRuntime("code", code_runtime=code_runtime) as rt:
        for definition in (*demo_tools(), _snapshot_tool(), _finish_tool()):
            rt.register(definition)
        yield rt


# -- offered tools and request bodies -------------------------------------------------------------


ADD_PARAMETERS = {"type": "object", "required": ["a", "b"], "properties": {
    "a": {"type": "number", "description": "The first addend."},
    "b": {"type": "number", "description": "The second addend."}}}
ADD_DESCRIPTION = "Add two numbers and return their sum as {sum}."


@pytest.mark.parametrize(("fmt", "expected"), [
    ("openai_chat", {"type": "function", "function": {
        "name": "add", "description": ADD_DESCRIPTION, "parameters": ADD_PARAMETERS}}),
    ("openai_responses", {"type": "function", "name": "add", "description": ADD_DESCRIPTION,
                          "parameters": ADD_PARAMETERS}),
    ("anthropic", {"name": "add", "description": ADD_DESCRIPTION, "input_schema": ADD_PARAMETERS}),
])
async def test_offered_tools_in_each_format(native: ToolRuntime, code: ToolRuntime, fmt: str,
                                            expected: dict[str, Any]) -> None:
    """It turns rt.prompt(agent).tools into the provider's tool shape, in wire order; code mode offers
    run_code alone."""
    adapter = adapter_for(fmt)
    offered = adapter.tools(native.prompt(Agent("a")))
    assert offered[0] == expected
    assert len(offered) == len(native.prompt().tools)
    (run_code,) = adapter.tools(code.prompt(Agent("a")).tools)
    assert json.dumps(run_code).count('"run_code"') == 1
    assert ADAPTERS[adapter.name] is type(adapter)


async def test_request_bodies_place_the_system_prompt_where_each_api_wants_it(code: ToolRuntime) -> None:
    """It puts the prompt's sections in a system message, ``instructions`` or ``system``."""
    prompt = code.prompt(Agent("a"))
    system = prompt.text()
    assert "## Writing code for run_code" in system
    chat = OpenAIChat().request(model="m", prompt=prompt, messages=OpenAIChat().user_message("hi"))
    assert chat["messages"] == [{"role": "system", "content": system}, {"role": "user", "content": "hi"}]
    assert [tool["function"]["name"] for tool in chat["tools"]] == ["run_code"]
    responses = OpenAIResponses().request(model="m", prompt=prompt, messages=[], temperature=0)
    assert (responses["instructions"], responses["input"], responses["temperature"]) == (system, [], 0)
    anthropic = AnthropicMessages().request(model="m", prompt=prompt, messages=[])
    assert (anthropic["system"], anthropic["max_tokens"]) == (system, 4096)
    shorter = AnthropicMessages().request(model="m", prompt=prompt, messages=[], max_tokens=64)
    assert shorter["max_tokens"] == 64


@pytest.mark.parametrize("fmt", FORMATS)
async def test_tool_names_a_provider_refuses_are_caught_before_sending(fmt: str) -> None:
    """It names the tool and the rule instead of letting the provider answer 400."""
    with pytest.raises(ProviderMessageError, match=r"tools\[0\]\.name: .*'bad name!'") as caught:
        adapter_for(fmt).tools([{"name": "bad name!", "description": "", "parameters": {}}])
    assert caught.value.code == "INVALID_PROVIDER_MESSAGE"
    assert adapter_for(fmt).tools([{"name": "ok", "description": "", "parameters": {}}]) != []


# -- a round trip per format: native tool calls ---------------------------------------------------

EXPECTED_NATIVE: dict[str, Callable[[list[str]], list[dict[str, Any]]]] = {
    "openai_chat": lambda ids: [
        {"role": "tool", "tool_call_id": ids[0], "content": "5"},
        {"role": "tool", "tool_call_id": ids[1], "content": "Error: disk full"},
        {"role": "tool", "tool_call_id": ids[2], "content": BAD_JSON},
    ],
    "openai_responses": lambda ids: [
        {"type": "function_call_output", "call_id": ids[0], "output": "5"},
        {"type": "function_call_output", "call_id": ids[1], "output": "Error: disk full"},
        {"type": "function_call_output", "call_id": ids[2], "output": BAD_JSON},
    ],
    "anthropic": lambda ids: [{"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": ids[0], "content": [{"type": "text", "text": "5"}],
         "is_error": False},
        {"type": "tool_result", "tool_use_id": ids[1],
         "content": [{"type": "text", "text": "Error: disk full"}], "is_error": True},
        {"type": "tool_result", "tool_use_id": ids[2], "content": [{"type": "text", "text": NOT_OBJECT}],
         "is_error": True},
    ]}],
}


@pytest.mark.parametrize("fmt", FORMATS)
async def test_native_round_trip(native: ToolRuntime, fmt: str) -> None:
    """It reads the recorded tool calls, runs them (a success, a tool failure and malformed arguments,
    which fail only their own call), renders the results back in the provider's format, and reads the
    final answer."""
    adapter = adapter_for(fmt)
    agent = Agent("a")
    turn = Turn(native, agent)
    history = [*adapter.user_message("Add 2 and 3, then try the fail tool.")]
    turn.user_message("Add 2 and 3, then try the fail tool.")
    reply = adapter.parse(fixture(fmt, "tool_calls"))
    assert [call.name for call in reply.calls] == ["add", "fail", "add"]
    assert reply.stop_reason in {"tool_calls", "completed", "tool_use"}
    with anyio.fail_after(10):
        step = await turn.run(reply.calls)
    assert [result.code for result in step.results] == [None, "TOOL_FAILED", "INVALID_ARGS"]
    rendered = adapter.render_step(step)
    assert rendered == EXPECTED_NATIVE[fmt]([call.call_id for call in reply.calls])
    history += [*reply.history, *rendered]
    json.dumps(history)  # the conversation stays plain JSON, ready for the next request
    final = adapter.parse(fixture(fmt, "final"))
    assert (final.text, final.calls) == ("2 + 3 = 5. The fail tool reported: disk full.", ())
    turn.end()
    assert [event.type for event in agent.events][-1] == "turn/end"


@pytest.mark.parametrize("fmt", FORMATS)
async def test_the_assistant_reply_is_kept_for_the_next_request(fmt: str) -> None:
    """It keeps the assistant's message (chat: role, content, tool_calls; Anthropic: every block;
    Responses: every output item, reasoning included) for the conversation."""
    raw = fixture(fmt, "tool_calls")
    reply = adapter_for(fmt).parse(raw)
    if fmt == "openai_chat":
        message = raw["choices"][0]["message"]
        assert reply.history == ({"role": "assistant", "content": None, "tool_calls": message["tool_calls"]},)
    elif fmt == "openai_responses":
        assert reply.history == tuple(raw["output"])
        assert reply.history[0]["type"] == "reasoning"
    else:
        assert reply.history == ({"role": "assistant", "content": raw["content"]},)
        assert reply.text == "I'll add the numbers and try the failing tool."
    reply.history[0]["mutated"] = True
    assert "mutated" not in json.dumps(raw)  # a detached copy


# -- a round trip per format: a run_code program with an image and a conclusion -------------------

EXPECTED_CONTEXT: dict[str, list[dict[str, Any]]] = {
    "openai_chat": [{"role": "user", "content": [
        {"type": "text", "text": "a tiny picture"}, {"type": "image_url", "image_url": {"url": DATA_URL}}]}],
    "openai_responses": [{"role": "user", "content": [
        {"type": "input_text", "text": "a tiny picture"},
        {"type": "input_image", "image_url": DATA_URL, "detail": "auto"}]}],
    "anthropic": [
        {"type": "text", "text": "a tiny picture"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}],
}


@pytest.mark.parametrize("fmt", FORMATS)
async def test_run_code_round_trip(code: ToolRuntime, fmt: str) -> None:
    """It runs the recorded run_code call: the program's output is the tool result, the child's image
    follows as a user message, and the child's conclusion ends the turn."""
    adapter = adapter_for(fmt)
    agent = Agent("a")
    turn = Turn(code, agent)
    turn.user_message("Take a snapshot.")
    reply = adapter.parse(fixture(fmt, "run_code"))
    assert reply.text == "I'll take the snapshot in one program."
    with anyio.fail_after(30):
        step = await turn.run(reply.calls)
    assert (step.results[0].is_error, step.results[0].text) == (False, "a tiny picture\ndone")
    assert (step.concludes_turn, turn.over) == (True, True)
    (message,) = step.messages
    assert message.source["plugin"] == CODE_MODE_PLUGIN
    rendered = adapter.render_step(step)
    call_id = reply.calls[0].call_id
    if fmt == "openai_chat":
        assert rendered == [{"role": "tool", "tool_call_id": call_id, "content": "a tiny picture\ndone"},
                            *EXPECTED_CONTEXT[fmt]]
    elif fmt == "openai_responses":
        assert rendered == [{"type": "function_call_output", "call_id": call_id,
                             "output": "a tiny picture\ndone"}, *EXPECTED_CONTEXT[fmt]]
    else:
        assert rendered == [{"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": call_id,
             "content": [{"type": "text", "text": "a tiny picture\ndone"}], "is_error": False},
            *EXPECTED_CONTEXT[fmt]]}]
    assert [event.data.get("reason") for event in agent.events if event.type == "turn/end"] == ["concluded"]


# -- images in tool results -----------------------------------------------------------------------


async def test_images_in_tool_results_go_where_each_format_carries_them(native: ToolRuntime) -> None:
    """It sends an image result as tool_result image (Anthropic), input_image output (Responses), and as a
    user message after the text-only tool messages (chat)."""
    calls = [ToolCallRequest("c1", "snapshot", "{}"), ToolCallRequest("c2", "add", '{"a": 1, "b": 1}')]
    results = await native.execute_tool_calls(calls)
    assert OpenAIChat().render_results(calls, results) == [
        {"role": "tool", "tool_call_id": "c1",
         "content": "a tiny picture\n[image attached in the next message]"},
        {"role": "tool", "tool_call_id": "c2", "content": "2"},
        {"role": "user", "content": [{"type": "text", "text": "Images from tool call c1:"},
                                     {"type": "image_url", "image_url": {"url": DATA_URL}}]},
    ]
    assert OpenAIResponses().render_results(calls, results)[0] == {
        "type": "function_call_output", "call_id": "c1",
        "output": [{"type": "input_text", "text": "a tiny picture"},
                   {"type": "input_image", "image_url": DATA_URL, "detail": "auto"}]}
    (message,) = AnthropicMessages().render_results(calls, results)
    assert message["content"][0] == {"type": "tool_result", "tool_use_id": "c1", "is_error": False,
                                     "content": EXPECTED_CONTEXT["anthropic"]}
    with pytest.raises(ValueError, match="one result per call"):
        OpenAIChat().render_results(calls, results[:1])


@pytest.mark.parametrize(("block", "chat_part", "anthropic_block"), [
    ({"type": "image", "url": "https://example.com/a.png"},
     {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
     {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}),
    ({"type": "image", "data": PNG, "media_type": "image/jpeg"},
     {"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{PNG}"}},
     {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": PNG}}),
    ({"type": "image"}, {"type": "text", "text": "x\n[image content]"},
     {"type": "text", "text": "x\n[image content]"}),
    ({"type": "audio", "data": "AAAA"}, {"type": "text", "text": "x\n[audio content]"},
     {"type": "text", "text": "x\n[audio content]"}),
])
def test_content_blocks_map_to_parts(block: dict[str, Any], chat_part: dict[str, Any],
                                     anthropic_block: dict[str, Any]) -> None:
    """It maps url and base64 images (any media-type spelling) and names blocks it cannot carry."""
    from codemode.runtime import UserMessage

    message = UserMessage.from_context({"content": [{"type": "text", "text": "x"}, block], "source": {}})
    chat = OpenAIChat().user_message(message)[0]["content"]
    anthropic = AnthropicMessages().user_message(message)[0]["content"]
    assert (chat if isinstance(chat, str) else chat[-1]) == (chat_part["text"] if chat_part["type"] == "text"
                                                             else chat_part)
    assert anthropic[-1] == anthropic_block


# -- what a reply may look like -------------------------------------------------------------------


@pytest.mark.parametrize(("fmt", "arguments", "expected"), [
    ("openai_chat", {"a": 1}, '{"a": 1}'),  # some compatible servers send an object
    ("openai_chat", None, ""),
    ("openai_responses", "", ""),
    ("anthropic", {"a": 1}, '{"a": 1}'),
    ("anthropic", "a=1", '"a=1"'),
    ("anthropic", [1, 2], "[1, 2]"),
])
def test_arguments_reach_the_runtime_as_json_text(fmt: str, arguments: Any, expected: str) -> None:
    """It passes arguments on for the runtime to judge: strings as sent, anything else as JSON."""
    raw = copy.deepcopy(fixture(fmt, "tool_calls"))
    if fmt == "openai_chat":
        raw["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = arguments
    elif fmt == "openai_responses":
        raw["output"][1]["arguments"] = arguments
    else:
        raw["content"][1]["input"] = arguments
    assert adapter_for(fmt).parse(raw).calls[0].arguments_text == expected


def _drop(path: list[Any]) -> Callable[[Any], None]:
    def damage(raw: Any) -> None:
        node = raw
        for key in path[:-1]:
            node = node[key]
        del node[path[-1]]
    return damage


def _set(path: list[Any], value: Any) -> Callable[[Any], None]:
    def damage(raw: Any) -> None:
        node = raw
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
    return damage


@pytest.mark.parametrize(("fmt", "damage", "where"), [
    ("openai_chat", _drop(["choices", 0, "message", "tool_calls", 1, "id"]),
     "choices[0].message.tool_calls[1].id: is missing"),
    ("openai_chat", _set(["choices", 0, "message", "tool_calls", 0, "function", "name"], ""),
     "choices[0].message.tool_calls[0].function.name: expected a non-empty string"),
    ("openai_chat", _set(["choices", 0, "message", "tool_calls", 0, "type"], "custom"),
     "choices[0].message.tool_calls[0].type: only function tool calls are supported"),
    ("openai_chat", _set(["choices", 0, "message", "tool_calls"], {"id": "x"}),
     "choices[0].message.tool_calls: expected a list"),
    ("openai_chat", _set(["choices"], []), "choices: is empty"),
    ("openai_chat", _set(["choices", 0, "message"], "text"), "choices[0].message: expected a JSON object"),
    ("openai_responses", _drop(["output", 2, "call_id"]), "output[2].call_id: is missing"),
    ("openai_responses", _set(["output", 1, "name"], 7), "output[1].name: expected a non-empty string"),
    ("openai_responses", _drop(["output"]), "response.output: is missing"),
    ("openai_responses", _set(["output", 0], "junk"), "output[0]: expected a JSON object"),
    ("anthropic", _drop(["content", 2, "id"]), "content[2].id: is missing"),
    ("anthropic", _set(["content", 1, "name"], None), "content[1].name: expected a non-empty string"),
    ("anthropic", _set(["content"], "text"), "content: expected a list"),
])
def test_an_unreadable_reply_is_a_clear_error(fmt: str, damage: Callable[[Any], None], where: str) -> None:
    """It names the place of a structural problem (no id, no name, wrong shape) and never crashes."""
    raw = copy.deepcopy(fixture(fmt, "tool_calls"))
    damage(raw)
    with pytest.raises(ProviderMessageError) as caught:
        adapter_for(fmt).parse(raw)
    assert str(caught.value).startswith(where)
    assert caught.value.code == "INVALID_PROVIDER_MESSAGE"


def test_a_bare_chat_message_and_text_content_parts_are_read() -> None:
    """It accepts the assistant message alone and content given as parts (some compatible servers)."""
    reply = OpenAIChat().parse({"role": "assistant", "content": [{"type": "text", "text": "hi "},
                                                                  {"type": "text", "text": "there"}]})
    assert (reply.text, reply.calls, reply.stop_reason) == ("hi there", (), None)
