"""Span attributes in the GenAI conventions, for the tree tracer (:mod:`._tree`)."""

from __future__ import annotations

import functools
import importlib.metadata
import json
from typing import Any

from opentelemetry.trace import Span, Status, StatusCode

from ..messages import AssistantMessage, Usage

__all__ = [
    "MAX_TEXT",
    "assistant_parts",
    "fail",
    "json_text",
    "package_version",
    "usage_attributes",
    "user_text",
]

MAX_TEXT = 8192  # of a content attribute: enough to read, not a copy of a whole file


@functools.cache
def package_version() -> str | None:
    # Read from the installed distribution's files: once, not per run.
    try:
        return importlib.metadata.version("deepactors")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree
        return None


def fail(span: Span, description: str, *, error_type: str = "cancelled") -> None:
    span.set_status(Status(StatusCode.ERROR, description[:MAX_TEXT]))
    span.set_attribute("error.type", error_type)


def usage_attributes(usage: Usage) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "gen_ai.usage.input_tokens": usage.input_tokens,
        "gen_ai.usage.output_tokens": usage.output_tokens,
    }
    if usage.cache_read_tokens:
        attributes["gen_ai.usage.cache_read.input_tokens"] = usage.cache_read_tokens
    if usage.cache_write_tokens:
        attributes["gen_ai.usage.cache_creation.input_tokens"] = usage.cache_write_tokens
    if usage.cost_usd is not None:
        attributes["deepactors.cost_usd"] = usage.cost_usd
    if usage.requests != 1:
        attributes["deepactors.model_calls"] = usage.requests
    return attributes


def json_text(value: Any) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except ValueError:  # a circular value: said, not raised from a tracer
        text = repr(value)
    return text[:MAX_TEXT]


def user_text(text: str) -> str:
    parts = [{"type": "text", "content": text[:MAX_TEXT]}]
    return json.dumps([{"role": "user", "parts": parts}], ensure_ascii=False)


def assistant_parts(message: AssistantMessage) -> str:
    parts: list[dict[str, Any]] = []
    if message.text:
        parts.append({"type": "text", "content": message.text[:MAX_TEXT]})
    for call in message.tool_calls:
        parts.append(
            {"type": "tool_call", "id": call.id, "name": call.name, "arguments": call.args}
        )
    entry: dict[str, Any] = {"role": "assistant", "parts": parts}
    if message.stop_reason:
        entry["finish_reason"] = message.stop_reason
    return json_text([entry])
