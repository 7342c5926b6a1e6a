"""The Responses API: input items from our messages, messages from its responses.

Reasoning items come back as :class:`~deepactors.messages.ThinkingBlock` values that
carry the whole item (see ``_openai_common.REASONING_MARK``) and are sent back
in place on the next turn, with their encrypted content: reasoning is kept
across turns although nothing is stored on OpenAI's side (``store`` is false).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from deepactors.errors import ModelConnectionError
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
from ._openai_common import (
    image_url,
    new_call_id,
    parse_args,
    reasoning_block,
    reasoning_item,
    usage_of,
)
from ._openai_errors import error_from_code
from .profiles import ModelProfile

if TYPE_CHECKING:
    from deepactors.tools import Tool

__all__ = [
    "ResponsesAccumulator",
    "input_to_responses",
    "message_from_response",
    "tools_to_responses",
]

JSON = dict[str, Any]


# -- requests ---------------------------------------------------------------------


def tools_to_responses(tools: Sequence[Tool]) -> list[JSON]:
    """Function tool definitions (flat, unlike Chat Completions')."""
    return [
        dict(spec)  # a ProviderTool: the provider's own tool, as given
        if (spec := getattr(t, "spec", None)) is not None
        else {
            "type": "function",
            "name": t.name,
            "description": t.description,
            "parameters": t.parameters,
            # Not strict: our tools' schemas are not all closed and fully required.
            "strict": False,
        }
        for t in tools
    ]


def input_to_responses(messages: Sequence[Message]) -> list[JSON]:
    """The conversation as input items (the system prompt goes in ``instructions``)."""
    items: list[JSON] = []
    for message in messages:
        if isinstance(message, AssistantMessage):
            items += _assistant_items(message)
        elif isinstance(message, ToolMessage):
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": message.tool_call_id,
                    "output": _tool_output(message),
                }
            )
        elif isinstance(message, SystemMessage):
            if message.text:
                items.append({"role": "system", "content": message.text})
        else:
            items.append({"role": "user", "content": _input_content(message.content)})
    return items


def _assistant_items(message: AssistantMessage) -> list[JSON]:
    items: list[JSON] = []
    content = message.content
    if isinstance(content, str):
        if content:
            items.append({"role": "assistant", "content": content})
    else:
        for block in content:
            if isinstance(block, ThinkingBlock):
                item = reasoning_item(block)
                if item is not None:
                    items.append(item)
            elif isinstance(block, TextBlock) and block.text:
                items.append({"role": "assistant", "content": block.text})
    for call in message.tool_calls:
        items.append(
            {
                "type": "function_call",
                "call_id": call.id,
                "name": call.name,
                "arguments": json.dumps(call.args),
            }
        )
    return items


def _input_content(content: str | list[ContentBlock]) -> str | list[JSON]:
    if isinstance(content, str):
        return content
    parts: list[JSON] = []
    for block in content:
        if isinstance(block, TextBlock):
            parts.append({"type": "input_text", "text": block.text})
        elif isinstance(block, ImageBlock) and (url := image_url(block)) is not None:
            parts.append({"type": "input_image", "image_url": url, "detail": "auto"})
    return parts or ""


def _tool_output(message: ToolMessage) -> str | list[JSON]:
    content = message.content
    prefix = "Error: " if message.status == "error" else ""
    if isinstance(content, str):
        return prefix + content if not content.startswith("Error") else content
    parts: list[JSON] = []
    for block in content:
        if isinstance(block, TextBlock):
            parts.append({"type": "input_text", "text": block.text})
        elif isinstance(block, ImageBlock) and (url := image_url(block)) is not None:
            parts.append({"type": "input_image", "image_url": url, "detail": "auto"})
    if prefix:
        parts.insert(0, {"type": "input_text", "text": prefix})
    return parts


# -- answers ----------------------------------------------------------------------


def _usage(usage: object, profile: ModelProfile | None) -> Usage | None:
    if usage is None:
        return None
    details = getattr(usage, "input_tokens_details", None)
    cached = (getattr(details, "cached_tokens", None) or 0) if details is not None else 0
    written = (getattr(details, "cache_write_tokens", None) or 0) if details is not None else 0
    return usage_of(
        getattr(usage, "input_tokens", None) or 0,
        cached,
        written,
        getattr(usage, "output_tokens", None) or 0,
        profile,
    )


def _reasoning(item: object) -> ThinkingBlock:
    summary = [
        {"type": "summary_text", "text": getattr(part, "text", "")}
        for part in (getattr(item, "summary", None) or ())
    ]
    data: JSON = {"id": getattr(item, "id", None), "summary": summary}
    encrypted = getattr(item, "encrypted_content", None)
    if encrypted is not None:
        data["encrypted_content"] = encrypted
    return reasoning_block(data)


def message_from_response(response: Any, profile: ModelProfile | None) -> AssistantMessage:
    """An :class:`AssistantMessage` from a ``Response``.

    Raises:
        ModelAPIError: The response failed (its error, mapped as an HTTP error would be).
    """
    status = getattr(response, "status", None)
    if status == "failed":
        error = getattr(response, "error", None)
        raise error_from_code(
            getattr(error, "code", None) or "server_error",
            getattr(error, "message", None) or "the response failed",
        )
    content: list[ContentBlock] = []
    calls: list[ToolCall] = []
    refused = False
    for item in response.output or ():
        kind = getattr(item, "type", None)
        if kind == "message":
            for part in item.content or ():
                part_type = getattr(part, "type", None)
                if part_type == "output_text":
                    content.append(TextBlock(text=part.text))
                elif part_type == "refusal":
                    content.append(TextBlock(text=part.refusal))
                    refused = True
        elif kind == "function_call":
            args, error = parse_args(item.arguments)
            calls.append(
                ToolCall(
                    id=item.call_id or new_call_id(), name=item.name or "", args=args, error=error
                )
            )
        elif kind == "reasoning":
            content.append(_reasoning(item))
    reason = "tool_use" if calls else "end_turn"
    if refused and not calls:
        reason = "refusal"
    incomplete = getattr(response, "incomplete_details", None)
    if status == "incomplete" and incomplete is not None:
        why = getattr(incomplete, "reason", None)
        reason = "max_tokens" if why == "max_output_tokens" else "refusal"
    texts = [b for b in content if isinstance(b, TextBlock)]
    simple: str | list[ContentBlock] = content
    if len(texts) == len(content) and len(content) <= 1:
        simple = texts[0].text if texts else ""
    return AssistantMessage(
        content=simple,
        tool_calls=calls,
        usage=_usage(getattr(response, "usage", None), profile),
        stop_reason=reason,
        model=getattr(response, "model", None),
    )


class ResponsesAccumulator:
    """Turns Responses stream events into deltas, and keeps the final response."""

    def __init__(self, profile: ModelProfile | None) -> None:
        self.profile = profile
        self.response: Any = None
        self.items: dict[int, object] = {}

    def feed(self, event: Any) -> StreamDelta | None:
        """Take one event; return its delta, if it is one.

        Raises:
            ModelAPIError: The stream reported an error or a failed response.
        """
        kind = getattr(event, "type", None)
        if kind == "response.output_text.delta" or kind == "response.refusal.delta":
            delta = event.delta
            return StreamDelta(kind="text", text=delta, index=event.output_index) if delta else None
        if kind == "response.function_call_arguments.delta":
            delta = event.delta
            if delta:
                return StreamDelta(kind="tool_input", text=delta, index=event.output_index)
            return None
        if kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            delta = event.delta
            return (
                StreamDelta(kind="thinking", text=delta, index=event.output_index)
                if delta
                else None
            )
        if kind == "response.output_item.done":
            self.items[event.output_index] = event.item
        elif kind in ("response.completed", "response.incomplete", "response.failed"):
            self.response = event.response
        elif kind == "error":
            raise error_from_code(
                getattr(event, "code", None) or "server_error",
                getattr(event, "message", None) or "error event in the stream",
            )
        return None

    def result(self) -> AssistantMessage:
        """The whole message, once the stream has ended.

        Raises:
            ModelConnectionError: The stream ended before its final response.
        """
        response = self.response
        if response is None:
            raise ModelConnectionError("the Responses API stream ended before response.completed")
        if not response.output and self.items:
            # Some servers send the items only as they finish, not in the final event.
            response.output = [self.items[i] for i in sorted(self.items)]
        return message_from_response(response, self.profile)
