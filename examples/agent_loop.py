"""A multi-turn agent loop on codemode, in code mode, speaking the OpenAI chat-completions format.

Each user message starts a `Turn`; the model is called with the prompt codemode assembles (`run_code` and
its SDK); every assistant message's tool calls run through `turn.run(...)`, whose `Step` the provider
adapter renders back: the tool results, then the contexts tools deferred (a child's image, a repeat
reminder) as user messages. A turn ends when the model answers without tool calls, or when a tool
concludes it (here the `finish` tool, called from inside a program).

Offline (the default) the model is scripted, but it answers with chat-completions JSON, so the loop runs
exactly the request and response code it runs against a real endpoint. To talk to any OpenAI-compatible
chat-completions endpoint instead, set both

    OPENAI_BASE_URL   e.g. https://api.openai.com/v1
    OPENAI_API_KEY    the key
    OPENAI_MODEL      optional, default gpt-4o-mini

Run it from any directory:  python examples/agent_loop.py
(it works on a temporary copy of examples/workspace, which it never changes).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import anyio
import anyio.to_thread

from codemode.runtime import (
    Agent,
    ProviderMessageError,
    ToolContext,
    ToolOutput,
    ToolRuntime,
    Turn,
    define_tool,
    text_block,
)
from codemode.tools import (
    OpenAIChat,
    PythonCodeRuntime,
    default_toolset,
    install_repeat_reminder,
    install_timeout_policy,
)

EXAMPLES = Path(__file__).resolve().parent
USER_TURNS = (
    "How many words are in each file of the workspace?",
    "Append the line 'Reviewed.' to docs/notes.md, then finish.",
)
MAX_STEPS = 8  # model calls per turn before the loop gives up on the turn


class ChatModel(Protocol):
    """Anything that answers a chat-completions request body with a chat-completions response."""

    def complete(self, body: Mapping[str, Any]) -> Mapping[str, Any]: ...


def finish_tool() -> Any:
    """`finish`: the model's way to end the turn from inside a program (it concludes the turn)."""

    async def execute(args: Any, ctx: ToolContext) -> Any:
        ctx.conclude_turn()
        return args["summary"]

    return define_tool(
        name="finish",
        description="Finish the user's request: give a one-line summary of what was done. Ends the turn.",
        parameters={"summary": {"type": "string", "required": True, "description": "What was done."}},
        output=ToolOutput(schema={"type": "string"}, render=lambda args, value: [text_block(value)]),
        execute=execute,
    )


# ----------------------------------------------------------------------------------------- the models


class OpenAICompatibleModel:
    """POST the body to ``{base_url}/chat/completions`` (stdlib only)."""

    def __init__(self, base_url: str, api_key: str, timeout_s: float = 120) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.api_key = api_key
        self.timeout_s = timeout_s

    def complete(self, body: Mapping[str, Any]) -> Mapping[str, Any]:
        request = urllib.request.Request(
            self.url, data=json.dumps(body).encode("utf-8"), method="POST",
            headers={"Authorization": f"Bearer {self.api_key}", "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                answer: Mapping[str, Any] = json.loads(response.read().decode("utf-8"))
                return answer
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode("utf-8", "replace")[:500]
            raise RuntimeError(f"{self.url} answered HTTP {exc.code}: {detail}") from None
        except (urllib.error.URLError, TimeoutError) as exc:
            raise RuntimeError(f"cannot reach {self.url}: {exc}") from None


COUNT_WORDS = """import asyncio
listing = await tools.list_files({"dir": "."})
texts = await asyncio.gather(*[tools.read_text({"path": path}) for path in listing["files"]])
return {text["path"]: len(text["text"].split()) for text in texts}
"""
REVIEW_NOTES = """notes = await tools.read_text({"path": "docs/notes.md"})
await tools.write_text({"path": "docs/notes.md", "text": notes["text"].rstrip("\\n") + "\\nReviewed.\\n"})
print(await tools.finish({"summary": "Appended 'Reviewed.' to docs/notes.md."}))
"""


class ScriptedModel:
    """A stand-in for an LLM that answers chat-completions requests from a script.

    It reads the request as a real endpoint would (the system prompt must carry the SDK, the tools must
    be exactly ``run_code``) and answers with chat-completions JSON: a ``run_code`` call for each user
    request, and a text answer built from the tool result it gets back.
    """

    def __init__(self) -> None:
        self.requests: list[Mapping[str, Any]] = []

    def complete(self, body: Mapping[str, Any]) -> Mapping[str, Any]:
        self.requests.append(body)
        system, *conversation = body["messages"]
        assert system["role"] == "system" and "## Writing code for run_code" in system["content"]
        assert [tool["function"]["name"] for tool in body["tools"]] == ["run_code"]
        last = conversation[-1]
        if last["role"] == "tool":
            counts = json.loads(last["content"])
            return self._reply("Word counts: " + ", ".join(f"{path} {n}" for path, n in counts.items()) + ".")
        request = last["content"]
        if "How many words" in request:
            return self._run_code(COUNT_WORDS, "Count the words of every file", len(conversation))
        if "Reviewed." in request:
            return self._run_code(REVIEW_NOTES, "Append a review line to the notes", len(conversation))
        return self._reply("I can count words and review notes.")

    @staticmethod
    def _reply(text: str) -> Mapping[str, Any]:
        return {"id": "chatcmpl-scripted", "object": "chat.completion", "model": "scripted", "choices": [
            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}]}

    @staticmethod
    def _run_code(code: str, description: str, step: int) -> Mapping[str, Any]:
        call = {"id": f"call_{step}", "type": "function", "function": {
            "name": "run_code", "arguments": json.dumps({"code": code, "description": description})}}
        return {"id": "chatcmpl-scripted", "object": "chat.completion", "model": "scripted", "choices": [
            {"index": 0, "finish_reason": "tool_calls",
             "message": {"role": "assistant", "content": None, "tool_calls": [call]}}]}


# ----------------------------------------------------------------------------------------- the loop


async def converse(rt: ToolRuntime, agent: Agent, model: ChatModel, user_turns: Sequence[str], *,
                   model_name: str, say: Callable[[str], None]) -> None:
    """Run the conversation: one Turn per user message, model steps until the turn ends."""
    adapter = OpenAIChat()
    history: list[dict[str, Any]] = []
    for text in user_turns:
        say(f"user: {text}")
        turn = Turn(rt, agent)
        turn.user_message(text)  # logs it and resets per-conversation policies (the repeat reminder)
        history += adapter.user_message(text)
        while not turn.over:
            if turn.steps == MAX_STEPS:
                turn.end("step-limit")
                say(f"(turn ended after {MAX_STEPS} steps)")
                break
            body = adapter.request(model=model_name, prompt=rt.prompt(agent), messages=history)
            reply = adapter.parse(await anyio.to_thread.run_sync(model.complete, body))
            history += reply.history
            if not reply.calls:
                say(f"assistant: {reply.text}")
                turn.end()
                break
            for call in reply.calls:
                say(f"assistant -> {call.name}: {_describe(call.arguments_text)}")
            step = await turn.run(reply.calls)
            for result in step.results:
                say(("tool error: " if result.is_error else "tool: ") + result.text)
            for message in step.messages:
                say(f"context from {message.source.get('plugin', message.source.get('kind'))}")
            history += adapter.render_step(step)  # a concluding step still sends its results back
            if step.concludes_turn:
                say("(the turn was concluded by a tool)")


def _describe(arguments_text: str) -> str:
    try:
        arguments = json.loads(arguments_text)
    except ValueError:
        return arguments_text[:80]
    if isinstance(arguments, dict) and isinstance(arguments.get("description"), str):
        return str(arguments["description"])
    return arguments_text[:80]


def model_from_environment() -> tuple[ChatModel, str]:
    """The OpenAI-compatible endpoint when OPENAI_BASE_URL and OPENAI_API_KEY are set, else the script."""
    base_url, api_key = os.environ.get("OPENAI_BASE_URL"), os.environ.get("OPENAI_API_KEY")
    if base_url and api_key:
        return OpenAICompatibleModel(base_url, api_key), os.environ.get("OPENAI_MODEL", "gpt-4o-mini")
    return ScriptedModel(), "scripted"


async def main(workspace: str | Path | None = None, *, model: ChatModel | None = None,
               model_name: str = "scripted", say: Callable[[str], None] = print) -> Agent:
    """Run the two example turns on ``workspace`` (a temporary copy of examples/workspace by default)
    and return the agent, whose event log records the conversation."""
    if model is None:
        model, model_name = model_from_environment()
    with tempfile.TemporaryDirectory(prefix="codemode-agent-loop-") as scratch:
        if workspace is None:
            workspace = Path(scratch) / "workspace"
            shutil.copytree(EXAMPLES / "workspace", workspace)
        async with PythonCodeRuntime() as code_runtime, ToolRuntime("code", code_runtime=code_runtime) as rt:
            for definition in (*default_toolset(workspace), finish_tool()):
                rt.register(definition)
            install_timeout_policy(rt)
            install_repeat_reminder(rt)
            agent = Agent("assistant")
            await converse(rt, agent, model, USER_TURNS, model_name=model_name, say=say)
    return agent


if __name__ == "__main__":
    try:
        anyio.run(main)
    except (RuntimeError, ProviderMessageError) as error:
        print(f"agent_loop: {error}", file=sys.stderr)
        sys.exit(1)
