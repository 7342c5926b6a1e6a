"""What the Chat Completions and the Responses adapters share, SDK-free.

Tool arguments parsed leniently, images as URLs, strict JSON schemas, usage with
its cost, and the way reasoning items ride in a
:class:`~deepactors.messages.ThinkingBlock` across turns.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Mapping
from typing import Any, Final

from deepactors.errors import ModelAPIError
from deepactors.messages import ContentBlock, ImageBlock, TextBlock, ThinkingBlock, Usage, new_id

from .profiles import ModelProfile

__all__ = [
    "REASONING_MARK",
    "image_url",
    "json_view",
    "new_call_id",
    "parse_args",
    "reasoning_block",
    "reasoning_item",
    "stop_reason",
    "strict_schema",
    "text_of",
    "usage_of",
]

JSON = dict[str, Any]

REASONING_MARK: Final = "openai-reasoning:"
"""How the signature of a ThinkingBlock made from a Responses API reasoning item starts.

The rest is the item's JSON (id, summary, encrypted content): sent back as it
came on the next turn, which is how reasoning is kept across turns without
``store``. Other providers' adapters skip blocks with this mark, and this one
skips thinking blocks without it (another provider's)."""


def new_call_id() -> str:
    """An id for a tool call whose server sent none (some OpenAI-compatible servers)."""
    return "call_" + new_id()


def parse_args(raw: str | None) -> tuple[dict[str, Any], str | None]:
    """Tool-call arguments from their JSON text: ``(args, None)`` or ``({}, why not)``.

    Empty text is no arguments (servers send ``""`` for a tool without parameters).
    """
    if raw is None or not raw.strip():
        return {}, None
    try:
        value = json.loads(raw)
    except ValueError as exc:
        return {}, f"the tool arguments are not valid JSON ({exc}): {raw[:200]!r}"
    if isinstance(value, dict):
        return value, None
    return (
        {},
        f"the tool arguments must be a JSON object, not {type(value).__name__}: {value!r:.200}",
    )


def image_url(block: ImageBlock) -> str | None:
    """An image as the URL the APIs take: a ``data:`` URL for base64 data, else its URL."""
    source = block.source
    kind = source.get("type")
    if kind == "base64" and "data" in source:
        return f"data:{source.get('media_type', 'image/png')};base64,{source['data']}"
    return source.get("url")


def text_of(content: str | list[ContentBlock]) -> str:
    """The text of a content value (text blocks joined)."""
    if isinstance(content, str):
        return content
    return "".join(b.text for b in content if isinstance(b, TextBlock))


def strict_schema(schema: Mapping[str, object]) -> JSON:
    """``schema`` as the APIs' strict mode wants it (every object closed, every
    property required), made once per schema and copied into each body."""
    return copy.deepcopy(_strict(json.dumps(schema)))  # key order kept: it is the output order


@functools.lru_cache(maxsize=64)
def _strict(schema_json: str) -> JSON:
    schema = json.loads(schema_json)
    try:
        from openai.lib._pydantic import _ensure_strict_json_schema
    except ImportError:  # pragma: no cover - an SDK that moved it: send it as it is
        return {"schema": schema, "strict": False}
    try:
        return {"schema": _ensure_strict_json_schema(schema, path=(), root=schema), "strict": True}
    except (TypeError, ValueError):
        return {"schema": json.loads(schema_json), "strict": False}


def usage_of(
    prompt: int, cached: int, written: int, output: int, profile: ModelProfile | None
) -> Usage:
    """Our usage record, priced by ``profile`` (cost None when its prices are unknown).

    OpenAI counts cached (and cache-written) tokens inside the prompt's tokens;
    ours are apart, as Claude's are.
    """
    usage = Usage(
        input_tokens=max(prompt - cached - written, 0),
        output_tokens=output,
        cache_read_tokens=cached,
        cache_write_tokens=written,
    )
    if profile is None or profile.prices is None:
        return usage
    return usage.model_copy(update={"cost_usd": profile.prices.cost(usage)})


def stop_reason(reason: str | None, *, has_calls: bool) -> str:
    """The OpenAI finish reason in the vocabulary the rest of deepactors reads.

    ``stop`` -> ``end_turn``, ``tool_calls`` -> ``tool_use``, ``length`` ->
    ``max_tokens``, ``content_filter`` -> ``refusal``; a missing one (some
    OpenAI-compatible servers) is ``tool_use`` when the answer has tool calls.
    """
    if reason is None or reason == "":
        return "tool_use" if has_calls else "end_turn"
    return _STOP.get(reason, reason)


_STOP: Final = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
    "max_output_tokens": "max_tokens",
}


def reasoning_block(item: Mapping[str, Any]) -> ThinkingBlock:
    """A Responses API reasoning item as a thinking block that carries it whole."""
    summary = item.get("summary") or []
    text = "\n\n".join(part.get("text", "") for part in summary if isinstance(part, Mapping))
    kept = {k: item[k] for k in ("id", "summary", "encrypted_content") if item.get(k) is not None}
    kept["type"] = "reasoning"
    return ThinkingBlock(thinking=text, signature=REASONING_MARK + json.dumps(kept))


def reasoning_item(block: ThinkingBlock) -> JSON | None:
    """The reasoning item a thinking block carries, or None (another provider's block)."""
    if not block.signature.startswith(REASONING_MARK):
        return None
    try:
        item = json.loads(block.signature[len(REASONING_MARK) :])
    except ValueError:
        return None
    if not isinstance(item, dict):
        return None
    item.setdefault("summary", [])
    return item


class _View:
    """A JSON object read by attribute (``view.choices[0].message``), as the SDK's
    models are: a key the answer left out reads as None, as the SDK's optional
    fields do. Made lazily, one level at a time."""

    __slots__ = ("_data",)

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # not a JSON field: copy, pickle and the like ask
            raise AttributeError(name)
        return _wrap(self._data.get(name))


def _wrap(value: Any) -> Any:
    if type(value) is dict:
        return _View(value)
    if type(value) is list:
        return [_wrap(item) for item in value]
    return value


def json_view(raw: bytes) -> Any:
    """An answer's JSON body, read by attribute like the SDK's own objects.

    Raises:
        ModelAPIError: The body is not a JSON object.
    """
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise ModelAPIError(f"the server answered with invalid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise ModelAPIError(f"the server answered with JSON that is no object: {raw[:200]!r}")
    return _View(data)
