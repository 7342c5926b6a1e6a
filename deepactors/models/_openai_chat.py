"""The Chat Completions API: requests from our messages, messages from its answers.

Works on plain dicts for requests and on the SDK's answer objects by attribute
(no ``to_dict`` per chunk), and tolerates what OpenAI-compatible servers leave
out: usage, ids, the index of a streamed tool call, the finish reason.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncGenerator, Sequence
from typing import TYPE_CHECKING, Any

from deepactors.messages import (
    AssistantMessage,
    ContentBlock,
    ImageBlock,
    Message,
    SystemMessage,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    ToolMessage,
    Usage,
)

from ._base import StreamDelta
from ._openai_common import image_url, new_call_id, parse_args, stop_reason, usage_of
from ._openai_errors import error_from_code
from .profiles import ModelProfile

if TYPE_CHECKING:
    from deepactors.tools import Tool

__all__ = [
    "ChatAccumulator",
    "chunks_of",
    "message_from_chat",
    "messages_to_chat",
    "tools_to_chat",
]

JSON = dict[str, Any]


# -- requests ---------------------------------------------------------------------


def tools_to_chat(tools: Sequence[Tool]) -> list[JSON]:
    """Function tool definitions."""
    return [
        dict(spec)  # a ProviderTool: the provider's own tool, as given
        if (spec := getattr(t, "spec", None)) is not None
        else {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
        }
        for t in tools
    ]


def messages_to_chat(system_prompt: str | None, messages: Sequence[Message]) -> list[JSON]:
    """The conversation as Chat Completions messages.

    The system prompt goes first; system messages stay where they are (the API
    takes them anywhere). An assistant turn sends its text and its tool calls
    (arguments as JSON text); thinking is not sent back (the API has no place for
    it). A tool result's images, which a ``tool`` message cannot hold, follow the
    turn's results in a user message.
    """
    out: list[JSON] = []
    if system_prompt:
        out.append({"role": "system", "content": system_prompt})
    pending_images: list[JSON] = []
    for message in messages:
        if pending_images and not isinstance(message, ToolMessage):
            out.append({"role": "user", "content": pending_images})
            pending_images = []
        if isinstance(message, ToolMessage):
            text, images = _tool_content(message)
            out.append({"role": "tool", "tool_call_id": message.tool_call_id, "content": text})
            pending_images += images
        elif isinstance(message, AssistantMessage):
            out.append(_assistant(message))
        elif isinstance(message, SystemMessage):
            if message.text:
                out.append({"role": "system", "content": message.text})
        else:
            out.append({"role": "user", "content": _user_content(message.content)})
    if pending_images:
        out.append({"role": "user", "content": pending_images})
    return out


def _assistant(message: AssistantMessage) -> JSON:
    text = message.text
    turn: JSON = {"role": "assistant", "content": text or None}
    if message.tool_calls:
        turn["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(call.args)},
            }
            for call in message.tool_calls
        ]
    elif not text:
        turn["content"] = ""
    return turn


def _user_content(content: str | list[ContentBlock]) -> str | list[JSON]:
    if isinstance(content, str):
        return content
    parts: list[JSON] = []
    for block in content:
        if isinstance(block, TextBlock):
            parts.append({"type": "text", "text": block.text})
        elif isinstance(block, ImageBlock) and (url := image_url(block)) is not None:
            parts.append({"type": "image_url", "image_url": {"url": url}})
    return parts or ""


def _tool_content(message: ToolMessage) -> tuple[str, list[JSON]]:
    content = message.content
    if isinstance(content, str):
        text, images = content, []
    else:
        text = "".join(b.text for b in content if isinstance(b, TextBlock))
        images = [
            {"type": "image_url", "image_url": {"url": url}}
            for b in content
            if isinstance(b, ImageBlock) and (url := image_url(b)) is not None
        ]
    if message.status == "error" and not text.startswith("Error"):
        text = f"Error: {text}"
    return text, images


# -- answers ----------------------------------------------------------------------


def _usage(usage: object, profile: ModelProfile | None) -> Usage | None:
    if usage is None:
        return None
    details = getattr(usage, "prompt_tokens_details", None)
    cached = (getattr(details, "cached_tokens", None) or 0) if details is not None else 0
    written = (getattr(details, "cache_write_tokens", None) or 0) if details is not None else 0
    return usage_of(
        getattr(usage, "prompt_tokens", None) or 0,
        cached,
        written,
        getattr(usage, "completion_tokens", None) or 0,
        profile,
    )


def _reasoning_text(obj: object) -> str | None:
    # vLLM, DeepSeek and others: ``reasoning_content``; OpenRouter and Ollama: ``reasoning``.
    for name in ("reasoning_content", "reasoning"):
        value = getattr(obj, name, None)
        if isinstance(value, str) and value:
            return value
    return None


def message_from_chat(completion: Any, profile: ModelProfile | None) -> AssistantMessage:
    """An :class:`AssistantMessage` from a ``ChatCompletion`` (its first choice)."""
    choices = completion.choices or []
    usage = _usage(completion.usage, profile)
    if not choices:
        return AssistantMessage(
            content="", usage=usage, stop_reason="end_turn", model=completion.model
        )
    choice = choices[0]
    msg = choice.message
    calls = [
        _call(tc.id, getattr(tc.function, "name", None), getattr(tc.function, "arguments", None))
        for tc in (msg.tool_calls or [])
        if getattr(tc, "function", None) is not None
    ]
    refusal = getattr(msg, "refusal", None)
    text = msg.content or refusal or ""
    reason = stop_reason(choice.finish_reason, has_calls=bool(calls))
    if refusal and not msg.content:
        reason = "refusal"
    thinking = _reasoning_text(msg)
    content: str | list[ContentBlock] = text
    if thinking:
        content = _with_thinking(thinking, text)
    return AssistantMessage(
        content=content, tool_calls=calls, usage=usage, stop_reason=reason, model=completion.model
    )


def _with_thinking(thinking: str, text: str) -> list[ContentBlock]:
    blocks: list[ContentBlock] = [ThinkingBlock(thinking=thinking)]
    if text:
        blocks.append(TextBlock(text=text))
    return blocks


def _call(call_id: str | None, name: str | None, raw: str | None) -> ToolCall:
    args, error = parse_args(raw)
    return ToolCall(id=call_id or new_call_id(), name=name or "", args=args, error=error)


class _PendingCall:
    __slots__ = ("id", "name", "parts")

    def __init__(self, call_id: str | None) -> None:
        self.id = call_id
        self.name = ""
        self.parts: list[str] = []


class ChatAccumulator:
    """Builds the final message from ``ChatCompletionChunk`` objects, and says which are deltas."""

    def __init__(self, profile: ModelProfile | None) -> None:
        self.profile = profile
        self.text: list[str] = []
        self.thinking: list[str] = []
        self.refusal: list[str] = []
        self.calls: dict[int, _PendingCall] = {}
        self.finish_reason: str | None = None
        self.usage: object = None
        self.model: str | None = None

    def feed(self, chunk: Any) -> list[StreamDelta]:
        """Take one chunk; return the deltas it carries (usually one or none)."""
        if chunk.usage is not None:
            # Sent on the last chunk (stream_options.include_usage); some servers
            # send running totals on every chunk: the last one counts.
            self.usage = chunk.usage
        if chunk.model:
            self.model = chunk.model
        out: list[StreamDelta] = []
        for choice in chunk.choices or ():
            if getattr(choice, "index", 0):
                continue  # n > 1 is never asked for; stray choices are ignored
            if choice.finish_reason:
                self.finish_reason = choice.finish_reason
            delta = choice.delta
            if delta is None:
                continue
            if delta.content:
                self.text.append(delta.content)
                out.append(StreamDelta(kind="text", text=delta.content))
            if getattr(delta, "refusal", None):
                self.refusal.append(delta.refusal)
                out.append(StreamDelta(kind="text", text=delta.refusal))
            thinking = _reasoning_text(delta)
            if thinking:
                self.thinking.append(thinking)
                out.append(StreamDelta(kind="thinking", text=thinking))
            for tc in delta.tool_calls or ():
                out += self._tool_delta(tc)
        return out

    def _tool_delta(self, tc: Any) -> list[StreamDelta]:
        index = tc.index
        if index is None:
            # Some servers send no index: an id names a new call (or an earlier
            # one again); no id continues the newest.
            index = next((i for i, c in self.calls.items() if tc.id and c.id == tc.id), None)
            if index is None:
                index = len(self.calls) if tc.id or not self.calls else max(self.calls)
        call = self.calls.get(index)
        if call is None:
            call = self.calls[index] = _PendingCall(tc.id)
        elif tc.id and not call.id:
            call.id = tc.id
        function = tc.function
        if function is None:
            return []
        # A name is sent once by OpenAI; some servers repeat it on every chunk.
        if function.name and not call.name.endswith(function.name):
            call.name += function.name
        if function.arguments:
            call.parts.append(function.arguments)
            return [StreamDelta(kind="tool_input", text=function.arguments, index=index + 1)]
        return []

    def result(self) -> AssistantMessage:
        """The whole message, once the stream has ended."""
        calls = [_call(c.id, c.name, "".join(c.parts)) for _, c in sorted(self.calls.items())]
        text = "".join(self.text)
        refusal = "".join(self.refusal)
        reason = stop_reason(self.finish_reason, has_calls=bool(calls))
        if refusal and not text:
            text, reason = refusal, "refusal"
        content: str | list[ContentBlock] = text
        if self.thinking:
            content = _with_thinking("".join(self.thinking), text)
        return AssistantMessage(
            content=content,
            tool_calls=calls,
            usage=_usage(self.usage, self.profile),
            stop_reason=reason,
            model=self.model,
        )


async def chunks_of(stream: Any, provider: str) -> AsyncGenerator[Any, None]:
    """The chunks of a Chat Completions stream, its events read to the end.

    The SDK's own iteration stops at ``[DONE]`` without closing the event reader
    it made, which trio then reports as an async generator left unfinished; the
    events are read here instead (under ``aclosing``), and turned into chunks
    the way the SDK does.
    """
    process = getattr(stream._client, "_process_response_data", None)
    if process is None or not hasattr(stream, "_iter_events"):  # pragma: no cover
        # Another SDK version: its own iteration (trio may then warn at [DONE]).
        async for chunk in stream:
            yield chunk
        return
    events = stream._iter_events()
    async with contextlib.aclosing(events):
        async for sse in events:
            if sse.data.startswith("[DONE]"):
                continue  # read on to the end of the body: the connection is reused
            data = sse.json()
            if isinstance(data, dict) and data.get("error"):
                error = data["error"]
                detail = error.get("message", str(error)) if isinstance(error, dict) else str(error)
                code = error.get("code") if isinstance(error, dict) else None
                raise error_from_code(str(code or ""), str(detail), provider=provider)
            yield process(data=data, cast_to=stream._cast_to, response=stream.response)
