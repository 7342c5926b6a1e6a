"""Conversion between deepactors messages and the Anthropic Messages API's JSON.

Everything here works on plain JSON-shaped dicts, so the same code serves the
plain and the streaming answer, and the request body can be checked byte for
byte in tests.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

import anthropic

from deepactors.messages import (
    AssistantMessage,
    ContentBlock,
    ImageBlock,
    Message,
    RedactedThinkingBlock,
    SystemMessage,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    ToolMessage,
    Usage,
)
from deepactors.models._openai_common import REASONING_MARK
from deepactors.models.cache import CACHE_SETTING, MAX_CACHE_BREAKPOINTS, CacheSettings
from deepactors.models.profiles import ModelPrices

if TYPE_CHECKING:
    from deepactors.tools import Tool

__all__ = [
    "CACHE_SETTING",
    "EMPTY_USER_TEXT",
    "MAX_CACHE_BREAKPOINTS",
    "CacheSettings",
    "apply_cache_breakpoints",
    "message_from_api",
    "messages_to_api",
    "output_format_to_api",
    "parse_tool_input",
    "supports_structured_output",
    "system_option_to_api",
    "system_to_api",
    "tools_to_api",
    "usage_from_api",
]

JSON = dict[str, Any]

EMPTY_USER_TEXT = "(empty message)"
"""The text sent for a user turn that has nothing to send (see :func:`messages_to_api`)."""


# ---------------------------------------------------------------------------
# Requests


def system_to_api(system_prompt: str | None, messages: Sequence[Message]) -> list[JSON]:
    """The ``system`` blocks: the prompt, then any ``SystemMessage`` in the conversation.

    The API has no system role inside ``messages``, so system messages found there
    are moved up, in order, after the request's system prompt.
    """
    texts = [system_prompt] if system_prompt else []
    texts += [m.text for m in messages if isinstance(m, SystemMessage)]
    return [{"type": "text", "text": text} for text in texts if _has_text(text)]


def system_option_to_api(system: str | Sequence[JSON] | None) -> list[JSON]:
    """A ``system`` request option (a string or a list of blocks) as ``system`` blocks."""
    if system is None:
        return []
    if isinstance(system, str):
        return [{"type": "text", "text": system}] if _has_text(system) else []
    return list(system)


def tools_to_api(tools: Sequence[Tool]) -> list[JSON]:
    """Tool definitions as the API wants them (``input_schema`` is the JSON schema)."""
    return [
        dict(spec)  # a ProviderTool: the provider's own tool, as given
        if (spec := getattr(t, "spec", None)) is not None
        else {"name": t.name, "description": t.description, "input_schema": t.parameters}
        for t in tools
    ]


_NO_STRUCTURED_OUTPUT: Final = (
    "claude-2",
    "claude-instant",
    "claude-3",
    "claude-opus-4-0",
    "claude-opus-4-1",
    "claude-opus-4-2025",
    "claude-sonnet-4-0",
    "claude-sonnet-4-2025",
)
"""Model id prefixes of models without structured outputs (those before Claude 4.5)."""


def supports_structured_output(model_id: str) -> bool:
    """Whether the model takes ``output_config.format`` (a JSON schema for its answer)."""
    return not model_id.startswith(_NO_STRUCTURED_OUTPUT)


def output_format_to_api(schema: Mapping[str, object]) -> JSON:
    """``output_config.format`` for a JSON schema: made strict as the API requires
    (every object closed, unsupported keywords moved into descriptions) by the
    SDK's ``transform_schema``; made once per schema, copied into each body."""
    return copy.deepcopy(_strict_format(json.dumps(schema, sort_keys=True)))


@functools.lru_cache(maxsize=64)
def _strict_format(schema_json: str) -> JSON:
    return {"type": "json_schema", "schema": anthropic.transform_schema(json.loads(schema_json))}


def messages_to_api(messages: Sequence[Message]) -> list[JSON]:
    """The conversation as API turns.

    * Consecutive tool results (one turn's parallel calls) and any user message
      after them merge into one ``user`` turn, ``tool_result`` blocks first, as
      the API requires.
    * An assistant message becomes its content blocks (thinking blocks verbatim,
      with their signatures) followed by one ``tool_use`` block per call.
    * Text that is empty or only whitespace is dropped everywhere (assistant and
      user content, tool results): the API rejects such a block with a 400 ("text
      content blocks must contain non-whitespace text"), and Claude itself often
      writes ``"\n\n"`` before a tool call, which would otherwise wedge the thread.
    * An assistant message left with no content (no tool calls either) is dropped;
      the user turns around it merge into one, which the API accepts.
    * A user message left with no content merges into the user turn before it
      when there is one (its tool results); standing alone it becomes the text
      :data:`EMPTY_USER_TEXT`, so that the conversation still starts with a user
      turn and does not end on an assistant turn (which would ask the model to
      continue its own answer instead of replying).
    """
    turns: list[JSON] = []
    for message in messages:
        if isinstance(message, SystemMessage):
            continue
        if isinstance(message, AssistantMessage):
            role, blocks = "assistant", _assistant_blocks(message)
        elif isinstance(message, ToolMessage):
            role, blocks = "user", [_tool_result_block(message)]
        else:
            role, blocks = "user", _content_blocks(message.content, role="user")
            if not blocks and not (turns and turns[-1]["role"] == "user"):
                blocks = [{"type": "text", "text": EMPTY_USER_TEXT}]
        if not blocks:
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    for turn in turns:
        if turn["role"] == "user":
            # Stable: tool results keep their order, and so does the other content.
            turn["content"].sort(key=lambda block: block["type"] != "tool_result")
    return turns


def _assistant_blocks(message: AssistantMessage) -> list[JSON]:
    blocks = _content_blocks(message.content, role="assistant")
    blocks += [
        # A call whose arguments could not be parsed still has to be answered by id;
        # its (empty) args keep the turn valid for the API.
        {"type": "tool_use", "id": call.id, "name": call.name, "input": dict(call.args)}
        for call in message.tool_calls
    ]
    return blocks


def _tool_result_block(message: ToolMessage) -> JSON:
    block: JSON = {"type": "tool_result", "tool_use_id": message.tool_call_id}
    if isinstance(message.content, str):
        if _has_text(message.content):
            block["content"] = message.content
    else:
        # As user content: text and images only, which is what a tool result may hold.
        inner = _content_blocks(message.content, role="user")
        if inner:
            block["content"] = inner
    if message.status == "error":
        block["is_error"] = True
    return block


def _content_blocks(content: str | Sequence[ContentBlock], *, role: str) -> list[JSON]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if _has_text(content) else []
    out: list[JSON] = []
    for block in content:
        if isinstance(block, TextBlock):
            if _has_text(block.text):
                out.append({"type": "text", "text": block.text})
        elif isinstance(block, ImageBlock):
            if role == "user":
                out.append({"type": "image", "source": dict(block.source)})
        elif isinstance(block, ThinkingBlock):
            # Thinking belongs to the assistant turn that produced it; the API wants it
            # back unchanged (signature included) when that turn used tools. An OpenAI
            # reasoning item (a fallback model's) is no Claude thinking: left out.
            if role == "assistant" and not block.signature.startswith(REASONING_MARK):
                out.append(
                    {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
                )
        elif isinstance(block, RedactedThinkingBlock) and role == "assistant":
            out.append({"type": "redacted_thinking", "data": block.data})
    return out


def _has_text(text: str) -> bool:
    """Whether the API accepts ``text`` as a text block: not empty, not only whitespace."""
    return bool(text) and not text.isspace()


def apply_cache_breakpoints(body: JSON, cache: CacheSettings, *, already_used: int = 0) -> int:
    """Mark ``cache_control`` on the tools, the system prompt and the newest user turns.

    Changes ``body`` in place (its ``tools``, ``system`` and ``messages`` must be
    this module's fresh lists). Never uses more than ``MAX_CACHE_BREAKPOINTS``
    together with ``already_used``; the order of priority is tools, system, then
    messages from the newest back, because a breakpoint caches everything before
    it and the tools and the system prompt come first in the API's prefix.

    Returns:
        How many breakpoints were placed.
    """
    control: JSON = {"type": "ephemeral"}
    if cache.get("ttl", "5m") != "5m":
        control["ttl"] = cache["ttl"]
    budget = MAX_CACHE_BREAKPOINTS - already_used
    placed = 0
    targets: list[JSON] = []
    tools = body.get("tools")
    if cache.get("tools", True) and tools:
        targets.append(tools[-1])
    system = body.get("system")
    if cache.get("system", True) and system:
        targets.append(system[-1])
    wanted = cache.get("messages", 2)
    for turn in reversed(body.get("messages", [])):
        if wanted <= 0:
            break
        if turn["role"] == "user" and turn["content"]:
            targets.append(turn["content"][-1])
            wanted -= 1
    for target in targets[: max(budget, 0)]:
        target["cache_control"] = dict(control)
        placed += 1
    return placed


# ---------------------------------------------------------------------------
# Answers


def parse_tool_input(raw: str) -> tuple[dict[str, Any], str | None]:
    """The arguments of a streamed tool call from its JSON text.

    Returns:
        ``(args, None)``, or ``({}, reason)`` when the text is not a JSON object
        (cut off by ``max_tokens``, or not an object at all).
    """
    if not raw.strip():
        return {}, None
    try:
        value = json.loads(raw)
    except ValueError as exc:
        return {}, f"the tool input is not valid JSON ({exc}): {raw[:200]!r}"
    return _check_tool_input(value)


def _check_tool_input(value: object) -> tuple[dict[str, Any], str | None]:
    if isinstance(value, dict):
        return value, None
    return {}, f"the tool input must be a JSON object, not {type(value).__name__}: {value!r:.200}"


def usage_from_api(usage: Mapping[str, Any] | None, prices: ModelPrices | None = None) -> Usage:
    """Our :class:`Usage` from the API's usage record (cache counts may be null),
    with its cost when the model's ``prices`` are known."""
    usage = usage or {}
    counted = Usage(
        input_tokens=usage.get("input_tokens") or 0,
        output_tokens=usage.get("output_tokens") or 0,
        cache_read_tokens=usage.get("cache_read_input_tokens") or 0,
        cache_write_tokens=usage.get("cache_creation_input_tokens") or 0,
    )
    if prices is None:
        return counted
    return counted.model_copy(update={"cost_usd": prices.cost(counted)})


def message_from_api(
    data: Mapping[str, Any], prices: ModelPrices | None = None
) -> AssistantMessage:
    """An :class:`AssistantMessage` from the API's message JSON.

    Text and thinking blocks become content (a plain string when there is only
    text); ``tool_use`` blocks become tool calls, in order. A tool input that is
    not a JSON object becomes a call with ``error`` set, which the agent loop
    answers with an error result instead of running the tool. Block types this
    adapter does not know (server tools, ...) are left out.
    """
    content: list[ContentBlock] = []
    calls: list[ToolCall] = []
    for block in data.get("content") or []:
        kind = block.get("type")
        if kind == "text":
            content.append(TextBlock(text=block.get("text", "")))
        elif kind == "thinking":
            content.append(
                ThinkingBlock(
                    thinking=block.get("thinking", ""), signature=block.get("signature") or ""
                )
            )
        elif kind == "redacted_thinking":
            content.append(RedactedThinkingBlock(data=block.get("data", "")))
        elif kind == "tool_use":
            error = block.get("_input_error")
            if error is None:
                args, error = _check_tool_input(block.get("input", {}))
            else:
                args = {}
            calls.append(
                ToolCall(id=block["id"], name=block.get("name", ""), args=args, error=error)
            )
    texts = [b for b in content if isinstance(b, TextBlock)]
    simple: str | list[ContentBlock]
    if len(texts) == len(content) and len(content) <= 1:
        simple = texts[0].text if texts else ""
    else:
        simple = content
    return AssistantMessage(
        content=simple,
        tool_calls=calls,
        usage=usage_from_api(data.get("usage"), prices),
        stop_reason=data.get("stop_reason"),
        model=data.get("model"),
    )
