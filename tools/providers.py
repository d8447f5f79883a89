"""Provider adapters: the offered tools, the model's tool calls and their results in each provider's format.

codemode speaks one format inside (``{"name", "description", "parameters"}`` tools, :class:`ToolCallRequest`
calls with raw JSON argument text, :class:`ToolResult` results, user messages from
:class:`~codemode.runtime.Step`); a model provider speaks its own. An adapter translates both ways, and
nothing else: it sends no request (bring your own HTTP client or SDK).

* :class:`OpenAIChat` - OpenAI chat completions and every OpenAI-compatible server: ``tools`` as
  ``{"type": "function", "function": {...}}``, calls from ``message.tool_calls``, results as
  ``role: "tool"`` messages.
* :class:`OpenAIResponses` - the OpenAI Responses API: flat function tools, ``function_call`` output items,
  results as ``function_call_output`` items.
* :class:`AnthropicMessages` - the Anthropic Messages API: tools with ``input_schema``, ``tool_use``
  blocks, results as ``tool_result`` blocks (``is_error`` set for failures) in one user message.

Each has ``tools(prompt)``, ``request(model=, prompt=, messages=)`` (the request body),
``parse(response) -> ModelReply``, ``user_message(text)`` and ``render_step(step)`` (the messages that
go back: every call's result, then the step's contexts as user messages). A model reply whose *structure*
is unreadable (a tool call without an id or a name) raises
:class:`~codemode.runtime.errors.ProviderMessageError` naming the place; *arguments* are never the adapter's
to judge: malformed argument JSON, or an argument that is not an object, goes to the runtime, which
answers that call alone with an ``INVALID_ARGS`` error result the model can read and correct.

Images: a content block ``{"type": "image", "data": <base64>, "mimeType": <media type>}`` (the MCP shape;
``mime_type`` and ``media_type`` are accepted too) or ``{"type": "image", "url": ...}`` becomes an image
wherever the format carries one: Anthropic tool results and messages, Responses function outputs and
messages, chat-completions user messages. Chat-completions tool messages carry text only, so an image in
a tool result is sent in a user message right after the tool messages. Other non-text blocks become
``[<type> content]``.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Final

from codemode.runtime import Prompt, ProviderMessageError, Step, ToolCallRequest, ToolResult, UserMessage

__all__ = (
    "ADAPTERS",
    "AnthropicMessages",
    "ModelReply",
    "OpenAIChat",
    "OpenAIResponses",
    "ProviderAdapter",
)

_OPENAI_NAME: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")
_ANTHROPIC_NAME: Final = re.compile(r"[A-Za-z0-9_-]{1,128}")


@dataclass(frozen=True, slots=True)
class ModelReply:
    """One model reply, read: what to keep in the conversation, its text and its tool calls.

    ``history`` is what to append to the conversation for this reply (the assistant message, or the
    Responses output items, reasoning included), ``text`` the reply's text (``""`` when it has none),
    ``calls`` its tool calls in model order, ``stop_reason`` the provider's own word for why it stopped.
    """

    history: tuple[dict[str, Any], ...]
    text: str
    calls: tuple[ToolCallRequest, ...]
    stop_reason: str | None


# ------------------------------------------------------------------------------------------ helpers


@dataclass(frozen=True, slots=True)
class _Image:
    """An image block's payload: base64 ``data`` with its ``media_type``, or a ``url``."""

    media_type: str
    data: str | None = None
    url: str | None = None

    @property
    def data_url(self) -> str:
        """The ``url``, or a ``data:`` URL of the base64 payload."""
        return self.url if self.url is not None else f"data:{self.media_type};base64,{self.data}"

    @staticmethod
    def of(block: Mapping[str, Any]) -> _Image | None:
        media = block.get("mimeType") or block.get("mime_type") or block.get("media_type")
        media_type = media if isinstance(media, str) and media else "image/png"
        data, url = block.get("data"), block.get("url")
        if isinstance(data, str) and data:
            return _Image(media_type, data=data)
        if isinstance(url, str) and url:
            return _Image(media_type, url=url)
        return None


_Part = str | _Image  # a content part: text, or an image


def _parts(content: Sequence[Any]) -> list[_Part]:
    """Content blocks as text and image parts (adjacent texts joined by newlines; other blocks, and images
    without a payload, as ``[<type> content]``)."""
    parts: list[_Part] = []
    for block in content:
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind == "image" and (image := _Image.of(block)) is not None:
            parts.append(image)
            continue
        text = block["text"] if kind == "text" and isinstance(block.get("text"), str) else f"[{kind} content]"
        if parts and isinstance(parts[-1], str):
            parts[-1] = parts[-1] + "\n" + text
        else:
            parts.append(text)
    return parts


def _arguments_text(value: Any, *, encoded: bool) -> str:
    """A provider's arguments as raw JSON text for the runtime.

    OpenAI sends JSON *text* (``encoded``), kept as sent; Anthropic sends the JSON *value*, which is dumped
    (so a string input becomes a JSON string, not program text). An OpenAI-compatible server that sends
    a value instead of text gets it dumped too. Whatever comes out, the runtime judges it: bad JSON or a
    non-object fails that call alone (``INVALID_ARGS``); missing arguments are ``{}``.
    """
    if value is None:
        return ""
    if isinstance(value, str) and encoded:
        return value
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


def _field(container: Mapping[str, Any], key: str, path: str) -> Any:
    if not isinstance(container, Mapping):
        raise ProviderMessageError(path, f"expected a JSON object, got {type(container).__name__}")
    if key not in container:
        raise ProviderMessageError(f"{path}.{key}", "is missing")
    return container[key]


def _string(container: Mapping[str, Any], key: str, path: str) -> str:
    value = _field(container, key, path)
    if not isinstance(value, str) or not value:
        raise ProviderMessageError(f"{path}.{key}", f"expected a non-empty string, got {value!r}")
    return value


def _list(value: Any, path: str) -> list[Any]:
    if not isinstance(value, list):
        raise ProviderMessageError(path, f"expected a list, got {type(value).__name__}")
    return value


def _check_name(name: str, pattern: re.Pattern[str], provider: str, index: int) -> None:
    if not pattern.fullmatch(name):
        raise ProviderMessageError(
            f"tools[{index}].name",
            f"{provider} accepts tool names matching {pattern.pattern}, not {name!r}; rename the tool "
            "or offer it through run_code (code mode)")


def _offered(prompt: Prompt | Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return list(prompt.tools if isinstance(prompt, Prompt) else prompt)


def _object_schema(parameters: Any) -> dict[str, Any]:
    schema = dict(parameters) if isinstance(parameters, Mapping) else {}
    schema.setdefault("type", "object")
    return schema


# ------------------------------------------------------------------------------------------ adapters


class ProviderAdapter:
    """The shared shape of an adapter (see the module docstring); use a concrete subclass."""

    #: The adapter's name (``"openai-chat"``, ``"openai-responses"``, ``"anthropic"``).
    name: ClassVar[str] = ""

    def tools(self, prompt: Prompt | Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """The offered tools (``rt.prompt(agent)`` or its ``tools``) in the provider's tool format."""
        raise NotImplementedError

    def request(self, *, model: str, prompt: Prompt, messages: Sequence[Mapping[str, Any]],
                **options: Any) -> dict[str, Any]:
        """The request body for ``model``: the prompt's sections as the system prompt, its tools, the
        conversation ``messages`` so far and any provider ``options`` (``max_tokens``, ...)."""
        raise NotImplementedError

    def parse(self, response: Mapping[str, Any]) -> ModelReply:
        """Read one (non-streamed) response; raises ProviderMessageError for an unreadable structure."""
        raise NotImplementedError

    def user_message(self, content: str | UserMessage) -> list[dict[str, Any]]:
        """The conversation entries for a user message (the user's words, or a delivered context)."""
        raise NotImplementedError

    def render_results(self, calls: Sequence[ToolCallRequest],
                       results: Sequence[ToolResult]) -> list[dict[str, Any]]:
        """The conversation entries carrying each call's result, in model order."""
        raise NotImplementedError

    def render_step(self, step: Step) -> list[dict[str, Any]]:
        """Everything a step sends back: the results, then the step's contexts as user messages."""
        entries = self.render_results(step.calls, step.results)
        for message in step.messages:
            entries.extend(self.user_message(message))
        return entries


def _paired(calls: Sequence[ToolCallRequest], results: Sequence[ToolResult]) -> list[tuple[str, ToolResult]]:
    if len(calls) != len(results):
        raise ValueError(f"one result per call is needed ({len(calls)} calls, {len(results)} results)")
    return [(call.call_id, result) for call, result in zip(calls, results, strict=True)]


def _content_of(message: str | UserMessage) -> Sequence[Any]:
    return [{"type": "text", "text": message}] if isinstance(message, str) else message.content


def _text_of(content: Any) -> str:
    """The text of a provider's message content (a string, or a list of parts with ``text``)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content
                       if isinstance(part, Mapping) and isinstance(part.get("text"), str))
    return ""


class OpenAIChat(ProviderAdapter):
    """OpenAI chat completions (``POST /chat/completions``) and OpenAI-compatible servers."""

    name = "openai-chat"

    def tools(self, prompt: Prompt | Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """``[{"type": "function", "function": {"name", "description", "parameters"}}, ...]``."""
        found = []
        for index, tool in enumerate(_offered(prompt)):
            _check_name(tool["name"], _OPENAI_NAME, "OpenAI", index)
            found.append({"type": "function", "function": {
                "name": tool["name"], "description": tool["description"],
                "parameters": _object_schema(tool["parameters"])}})
        return found

    def request(self, *, model: str, prompt: Prompt, messages: Sequence[Mapping[str, Any]],
                **options: Any) -> dict[str, Any]:
        """``{"model", "messages": [system, *messages], "tools"?, **options}``."""
        system = prompt.text()
        body: dict[str, Any] = {"model": model, "messages": [
            *([{"role": "system", "content": system}] if system else []), *map(dict, messages)]}
        tools = self.tools(prompt)
        if tools:
            body["tools"] = tools
        body.update(options)
        return body

    def parse(self, response: Mapping[str, Any]) -> ModelReply:
        """Read a ``chat.completion`` (its first choice) or a bare assistant message.

        ``arguments`` is passed on as sent (a JSON string); servers that send an object get it dumped.
        """
        stop: Any = None
        if isinstance(response, Mapping) and "choices" in response:
            choices = _list(response["choices"], "choices")
            if not choices:
                raise ProviderMessageError("choices", "is empty: the response has no message")
            message = _field(choices[0], "message", "choices[0]")
            path, stop = "choices[0].message", choices[0].get("finish_reason")
        else:
            message, path = response, "message"
        if not isinstance(message, Mapping):
            raise ProviderMessageError(path, f"expected a JSON object, got {type(message).__name__}")
        calls: list[ToolCallRequest] = []
        raw_calls = _list(message.get("tool_calls") or [], f"{path}.tool_calls")
        for index, item in enumerate(raw_calls):
            where = f"{path}.tool_calls[{index}]"
            call_id = _string(item, "id", where)
            kind = item.get("type", "function")
            if kind != "function":
                raise ProviderMessageError(f"{where}.type",
                                           f"only function tool calls are supported, not {kind!r}")
            function = _field(item, "function", where)
            name = _string(function, "name", f"{where}.function")
            calls.append(ToolCallRequest(call_id, name,
                                         _arguments_text(function.get("arguments"), encoded=True)))
        kept: dict[str, Any] = {"role": "assistant", "content": copy.deepcopy(message.get("content"))}
        if raw_calls:
            kept["tool_calls"] = copy.deepcopy(raw_calls)
        return ModelReply((kept,), _text_of(message.get("content")), tuple(calls),
                          stop if isinstance(stop, str) else None)

    @staticmethod
    def _part(part: _Part) -> dict[str, Any]:
        if isinstance(part, str):
            return {"type": "text", "text": part}
        return {"type": "image_url", "image_url": {"url": part.data_url}}

    def user_message(self, content: str | UserMessage) -> list[dict[str, Any]]:
        """``{"role": "user", "content": text}``, or content parts with ``image_url`` (data) URLs."""
        parts = _parts(_content_of(content))
        if all(isinstance(part, str) for part in parts):
            return [{"role": "user", "content": "\n".join(str(part) for part in parts)}]
        return [{"role": "user", "content": [self._part(part) for part in parts]}]

    def render_results(self, calls: Sequence[ToolCallRequest],
                       results: Sequence[ToolResult]) -> list[dict[str, Any]]:
        """One ``role: "tool"`` message per call (a failure's content reads ``Error: <message>``); images
        follow in one user message, since tool messages carry text only."""
        entries: list[dict[str, Any]] = []
        images: list[dict[str, Any]] = []
        for call_id, result in _paired(calls, results):
            parts = _parts(result.content)
            text = "\n".join(part if isinstance(part, str) else "[image attached in the next message]"
                             for part in parts)
            entries.append({"role": "tool", "tool_call_id": call_id, "content": text})
            pictures = [self._part(part) for part in parts if isinstance(part, _Image)]
            if pictures:
                images += [{"type": "text", "text": f"Images from tool call {call_id}:"}, *pictures]
        if images:
            entries.append({"role": "user", "content": images})
        return entries


class OpenAIResponses(ProviderAdapter):
    """The OpenAI Responses API (``POST /responses``), stateless: the caller keeps the input items."""

    name = "openai-responses"

    def tools(self, prompt: Prompt | Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """``[{"type": "function", "name", "description", "parameters"}, ...]``."""
        found = []
        for index, tool in enumerate(_offered(prompt)):
            _check_name(tool["name"], _OPENAI_NAME, "OpenAI", index)
            found.append({"type": "function", "name": tool["name"], "description": tool["description"],
                          "parameters": _object_schema(tool["parameters"])})
        return found

    def request(self, *, model: str, prompt: Prompt, messages: Sequence[Mapping[str, Any]],
                **options: Any) -> dict[str, Any]:
        """``{"model", "instructions"?, "input": messages, "tools"?, **options}``."""
        body: dict[str, Any] = {"model": model, "input": [dict(item) for item in messages]}
        system = prompt.text()
        if system:
            body["instructions"] = system
        tools = self.tools(prompt)
        if tools:
            body["tools"] = tools
        body.update(options)
        return body

    def parse(self, response: Mapping[str, Any]) -> ModelReply:
        """Read a ``response`` object: ``message`` items give the text, ``function_call`` items the calls.

        Every output item is kept for the next request's input (reasoning items included, as reasoning
        models require).
        """
        output = _list(_field(response, "output", "response"), "output")
        texts: list[str] = []
        calls: list[ToolCallRequest] = []
        for index, item in enumerate(output):
            where = f"output[{index}]"
            kind = _field(item, "type", where)
            if kind == "message":
                texts.extend(str(part.get("text", "")) for part in item.get("content") or []
                             if isinstance(part, Mapping) and part.get("type") == "output_text")
            elif kind == "function_call":
                call_id = _string(item, "call_id", where)
                name = _string(item, "name", where)
                calls.append(ToolCallRequest(call_id, name,
                                             _arguments_text(item.get("arguments"), encoded=True)))
        status = response.get("status")
        return ModelReply(tuple(copy.deepcopy(output)), "".join(texts), tuple(calls),
                          status if isinstance(status, str) else None)

    @staticmethod
    def _part(part: _Part) -> dict[str, Any]:
        if isinstance(part, str):
            return {"type": "input_text", "text": part}
        return {"type": "input_image", "image_url": part.data_url, "detail": "auto"}

    def user_message(self, content: str | UserMessage) -> list[dict[str, Any]]:
        """``{"role": "user", "content": [input_text / input_image parts]}``."""
        return [{"role": "user", "content": [self._part(part) for part in _parts(_content_of(content))]}]

    def render_results(self, calls: Sequence[ToolCallRequest],
                       results: Sequence[ToolResult]) -> list[dict[str, Any]]:
        """One ``function_call_output`` item per call: a string, or input_text/input_image parts when the
        result carries an image."""
        entries: list[dict[str, Any]] = []
        for call_id, result in _paired(calls, results):
            parts = _parts(result.content)
            output: Any
            if any(isinstance(part, _Image) for part in parts):
                output = [self._part(part) for part in parts]
            else:
                output = "\n".join(str(part) for part in parts)
            entries.append({"type": "function_call_output", "call_id": call_id, "output": output})
        return entries


class AnthropicMessages(ProviderAdapter):
    """The Anthropic Messages API (``POST /v1/messages``)."""

    name = "anthropic"

    def tools(self, prompt: Prompt | Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """``[{"name", "description", "input_schema"}, ...]``."""
        found = []
        for index, tool in enumerate(_offered(prompt)):
            _check_name(tool["name"], _ANTHROPIC_NAME, "Anthropic", index)
            found.append({"name": tool["name"], "description": tool["description"],
                          "input_schema": _object_schema(tool["parameters"])})
        return found

    def request(self, *, model: str, prompt: Prompt, messages: Sequence[Mapping[str, Any]],
                **options: Any) -> dict[str, Any]:
        """``{"model", "max_tokens", "system"?, "messages", "tools"?, **options}`` (``max_tokens`` is
        required by the API: 4096 unless given)."""
        body: dict[str, Any] = {"model": model, "max_tokens": 4096,
                                "messages": [dict(message) for message in messages]}
        system = prompt.text()
        if system:
            body["system"] = system
        tools = self.tools(prompt)
        if tools:
            body["tools"] = tools
        body.update(options)
        return body

    def parse(self, response: Mapping[str, Any]) -> ModelReply:
        """Read a ``message`` object: ``text`` blocks give the text, ``tool_use`` blocks the calls."""
        content = _list(_field(response, "content", "message"), "content")
        texts: list[str] = []
        calls: list[ToolCallRequest] = []
        for index, block in enumerate(content):
            where = f"content[{index}]"
            kind = _field(block, "type", where)
            if kind == "text":
                texts.append(str(block.get("text", "")))
            elif kind == "tool_use":
                call_id = _string(block, "id", where)
                name = _string(block, "name", where)
                arguments = _arguments_text(block.get("input"), encoded=False)
                calls.append(ToolCallRequest(call_id, name, arguments))
        stop = response.get("stop_reason")
        kept = {"role": "assistant", "content": copy.deepcopy(content)}
        return ModelReply((kept,), "".join(texts), tuple(calls), stop if isinstance(stop, str) else None)

    @staticmethod
    def _blocks(content: Sequence[Any]) -> list[dict[str, Any]]:
        blocks: list[dict[str, Any]] = []
        for part in _parts(content):
            if isinstance(part, str):
                blocks.append({"type": "text", "text": part})
            elif part.url is not None:
                blocks.append({"type": "image", "source": {"type": "url", "url": part.url}})
            else:
                blocks.append({"type": "image", "source": {"type": "base64", "media_type": part.media_type,
                                                           "data": part.data}})
        return blocks

    def user_message(self, content: str | UserMessage) -> list[dict[str, Any]]:
        """``{"role": "user", "content": text}``, or text and image blocks."""
        if isinstance(content, str):
            return [{"role": "user", "content": content}]
        return [{"role": "user", "content": self._blocks(content.content)}]

    def render_results(self, calls: Sequence[ToolCallRequest],
                       results: Sequence[ToolResult]) -> list[dict[str, Any]]:
        """ONE user message of ``tool_result`` blocks (text and image content; ``is_error`` for failures):
        Anthropic wants every result of an assistant message in the next user message, results first."""
        blocks: list[dict[str, Any]] = []
        for call_id, result in _paired(calls, results):
            block: dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id}
            content = self._blocks(result.content)
            if content:
                block["content"] = content
            block["is_error"] = result.is_error
            blocks.append(block)
        return [{"role": "user", "content": blocks}] if blocks else []

    def render_step(self, step: Step) -> list[dict[str, Any]]:
        """The results' user message with the step's contexts appended to it as text and image blocks
        (after the ``tool_result`` blocks, as the API requires)."""
        extra = [block for message in step.messages for block in self._blocks(message.content)]
        entries = self.render_results(step.calls, step.results)
        if not entries:
            return [{"role": "user", "content": extra}] if extra else []
        entries[0]["content"].extend(extra)
        return entries


#: The adapters by name.
ADAPTERS: Final[Mapping[str, type[ProviderAdapter]]] = {
    adapter.name: adapter for adapter in (OpenAIChat, OpenAIResponses, AnthropicMessages)}
