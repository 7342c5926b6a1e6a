"""What the tree tracer's spans say: attributes in the GenAI conventions.

The tree tracer (:mod:`._tree`) decides when a span starts and ends and under
which parent; every attribute and span event it writes is made here: an agent's
(``invoke_agent``), a model call's (``chat``: what was asked, then what came
back), a tool call's (``execute_tool``), the notes on them (retries, fallbacks,
summaries, budgets), usage and cost, and the content recorded when asked.
"""

from __future__ import annotations

import functools
import importlib.metadata
import json

from opentelemetry.trace import Span, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from ..events import (
    BudgetExhausted,
    ContextSummarized,
    ModelFallback,
    ModelRetry,
)
from ..messages import AssistantMessage, ToolCall, Usage

__all__ = [
    "MAX_TEXT",
    "agent_attributes",
    "assistant_parts",
    "budget_event",
    "chat_attributes",
    "fail",
    "fallback_event",
    "json_text",
    "package_version",
    "response_attributes",
    "retry_event",
    "summary_event",
    "tool_attributes",
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


def usage_attributes(usage: Usage) -> dict[str, AttributeValue]:
    attributes: dict[str, AttributeValue] = {
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


def json_text(value: object) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except ValueError:  # a circular value: said, not raised from a tracer
        text = repr(value)
    return text[:MAX_TEXT]


def user_text(text: str) -> str:
    parts = [{"type": "text", "content": text[:MAX_TEXT]}]
    return json.dumps([{"role": "user", "parts": parts}], ensure_ascii=False)


def assistant_parts(message: AssistantMessage) -> str:
    parts: list[dict[str, object]] = []
    if message.text:
        parts.append({"type": "text", "content": message.text[:MAX_TEXT]})
    for call in message.tool_calls:
        parts.append(
            {"type": "tool_call", "id": call.id, "name": call.name, "arguments": call.args}
        )
    entry: dict[str, object] = {"role": "assistant", "parts": parts}
    if message.stop_reason:
        entry["finish_reason"] = message.stop_reason
    return json_text([entry])


def agent_attributes(
    name: str, agent_id: str, *, thread_id: str | None, run_id: str, root: bool
) -> dict[str, AttributeValue]:
    """An ``invoke_agent`` span's attributes (``root``: the run's top actor)."""
    attributes: dict[str, AttributeValue] = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": name,
        "gen_ai.agent.id": agent_id,
    }
    if thread_id is not None:
        attributes["gen_ai.conversation.id"] = thread_id
    if root:
        # What is the same for the whole tree is said once, on its root
        # (every attribute is a cost per span, and a subagent has 7).
        attributes["deepactors.run_id"] = run_id
        if thread_id is not None:
            # LangSmith files a span's langsmith.metadata.* as its run's
            # metadata, and groups root runs into threads by metadata thread_id.
            attributes["langsmith.metadata.thread_id"] = thread_id
    return attributes


def chat_attributes(model: str, provider: str | None) -> dict[str, AttributeValue]:
    """A ``chat`` span's attributes known when the call starts: the model's name,
    and who serves it when known."""
    attributes: dict[str, AttributeValue] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": model,
    }
    if provider:
        attributes["gen_ai.provider.name"] = provider
    return attributes


def response_attributes(
    attributes: dict[str, AttributeValue], message: AssistantMessage, *, capture: bool
) -> None:
    """Add a ``chat`` span's attributes from the answer to ``attributes`` (``capture``:
    its content too): into the dictionary the span is made with, not one more."""
    if message.model:
        attributes["gen_ai.response.model"] = message.model
    if message.stop_reason:
        attributes["gen_ai.response.finish_reasons"] = (message.stop_reason,)
    if message.usage is not None:
        attributes.update(usage_attributes(message.usage))
    if capture:
        attributes["gen_ai.output.messages"] = assistant_parts(message)


def tool_attributes(call: ToolCall, *, capture: bool) -> dict[str, AttributeValue]:
    """An ``execute_tool`` span's attributes (``capture``: its arguments too)."""
    attributes: dict[str, AttributeValue] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": call.name,
        "gen_ai.tool.call.id": call.id,
        "gen_ai.tool.type": "function",
    }
    if capture:
        attributes["gen_ai.tool.call.arguments"] = json_text(call.args)
    return attributes


def retry_event(event: ModelRetry) -> tuple[str, dict[str, AttributeValue]]:
    """The ``retry`` span event of a model call: its name and attributes."""
    return (
        "retry",
        {
            "deepactors.attempt": event.attempt,
            "deepactors.delay": event.delay,
            "error.type": event.error.split(":", 1)[0],
            "deepactors.error": event.error[:MAX_TEXT],
        },
    )


def fallback_event(event: ModelFallback) -> tuple[str, dict[str, AttributeValue]]:
    """The ``fallback`` span event of a model call: its name and attributes."""
    return (
        "fallback",
        {
            "deepactors.failed_model": event.failed,
            "deepactors.next_model": event.next,
            "deepactors.error": event.error[:MAX_TEXT],
        },
    )


def summary_event(event: ContextSummarized) -> dict[str, AttributeValue]:
    """The attributes of an agent span's ``summarize`` event."""
    return {
        "deepactors.reason": event.reason,
        "deepactors.messages_dropped": event.messages_dropped,
        "deepactors.tokens_before": event.tokens_before,
        "deepactors.tokens_after": event.tokens_after,
    }


def budget_event(event: BudgetExhausted) -> dict[str, AttributeValue]:
    """The attributes of an agent span's ``budget_exhausted`` event."""
    return {
        "deepactors.resource": event.resource,
        "deepactors.limit": float(event.limit),
        "deepactors.spent": float(event.spent),
    }
