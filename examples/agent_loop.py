"""Plugging codemode into an agent loop: build the prompt, let the model answer, execute its tool calls.

`call_model` stands in for your LLM client (OpenAI, Anthropic, a local model...): it receives the system
prompt and the offered tool schemas and returns tool calls as (call id, name, JSON arguments text). Here
it is scripted so that the example runs offline; replace it with a real client call.

Run it with:  python examples/agent_loop.py
"""

from __future__ import annotations

import json

import anyio

from codemode.runtime import Agent, ToolCallRequest, ToolRuntime
from codemode.tools import PythonCodeRuntime, default_toolset


def call_model(system_prompt: str, tools: list[dict[str, object]], user: str) -> list[tuple[str, str, str]]:
    """A scripted stand-in for an LLM: it 'decides' to answer with one run_code program."""
    assert [tool["name"] for tool in tools] == ["run_code"]  # code mode offers run_code only
    program = (
        "import asyncio\n"
        "listing = await tools.list_files({'dir': '.'})\n"
        "texts = await asyncio.gather(*[tools.read_text({'path': p}) for p in listing['files']])\n"
        "return {t['path']: len(t['text'].split()) for t in texts}\n"
    )
    return [("call-1", "run_code", json.dumps({"code": program, "description": "Count words per file"}))]


async def main(workspace: str = "examples/workspace") -> str:
    async with PythonCodeRuntime() as code_runtime, ToolRuntime("code", code_runtime=code_runtime) as rt:
        for definition in default_toolset(workspace):
            rt.register(definition)
        agent = Agent("assistant")
        prompt = rt.prompt(agent)  # the same data `codemode prompt --mode code --json` prints
        system_prompt = "\n\n".join(section.text for section in prompt.sections if section.text)
        calls = call_model(system_prompt, prompt.tools, "How many words are in each file?")
        results = await rt.execute_tool_calls([ToolCallRequest(*call) for call in calls], agent=agent)
        # Each result's text goes back to the model as the tool result of its call id.
        return "\n".join(result.text for result in results)


if __name__ == "__main__":
    print(anyio.run(main))
