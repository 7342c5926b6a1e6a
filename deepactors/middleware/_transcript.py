"""Messages as readable text: the offloaded history file and the summarizer's input.

The history file is Markdown the agent can page through with ``read_file`` and
search with ``grep``. Each summary appends one section; each message is a
``### <n>. <role> [id=<message id>]`` heading (numbered across the whole
thread) followed by its text, tool calls with their full arguments, and tool
results as they were.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from .._core.stamps import utc_stamp
from ..messages import (
    AssistantMessage,
    ImageBlock,
    Message,
    SystemMessage,
    TextBlock,
    ToolMessage,
    UserMessage,
)

__all__ = ["clip", "history_section", "render_message", "summary_excerpt", "turn_groups"]


def _content(message: Message) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content:
        if isinstance(block, TextBlock):
            parts.append(block.text)
        elif isinstance(block, ImageBlock):
            parts.append("[image]")
    return "\n".join(parts)


def _heading(message: Message) -> str:
    match message:
        case ToolMessage(name=name, tool_call_id=call_id, status=status):
            error = " (error)" if status == "error" else ""
            return f"tool {name} [call {call_id}]{error}"
        case AssistantMessage():
            return "assistant"
        case UserMessage():
            return "user"
        case SystemMessage():
            return "system"
    return message.role  # pragma: no cover - the union is closed


def render_message(message: Message, number: int | None = None) -> str:
    """One message as a Markdown block: a heading with its id, then its content."""
    label = f"{number}. " if number is not None else ""
    lines = [f"### {label}{_heading(message)} [id={message.id}]"]
    text = _content(message)
    if text:
        lines.append(text)
    if isinstance(message, AssistantMessage):
        for call in message.tool_calls:
            args = json.dumps(call.args, ensure_ascii=False, default=str)
            lines.append(f"-> tool call `{call.name}` [call {call.id}]: {args}")
    return "\n".join(lines)


def history_section(messages: Sequence[Message], *, first_number: int) -> str:
    """The text one summary appends to the history file (ends with a blank line)."""
    last = first_number + len(messages) - 1
    when = utc_stamp()
    parts = [f"## Messages {first_number}-{last} (summarized at {when})\n"]
    for i, message in enumerate(messages):
        parts.append(render_message(message, first_number + i) + "\n")
    return "\n".join(parts) + "\n"


def clip(text: str, limit: int, *, where: str | None = None) -> str:
    """``text`` cut in the middle to at most about ``limit`` characters, saying so."""
    if len(text) <= limit:
        return text
    keep = max(limit // 2, 1)
    gone = len(text) - 2 * keep
    see = f"; the whole text is in {where}" if where else ""
    return f"{text[:keep]}\n[... {gone} characters left out here{see} ...]\n{text[-keep:]}"


def turn_groups(messages: Sequence[Message]) -> list[list[Message]]:
    """Messages grouped so that a tool call and its results are never apart.

    An assistant message starts a group that takes the tool results after it;
    any other message is a group of its own.
    """
    groups: list[list[Message]] = []
    for message in messages:
        if isinstance(message, ToolMessage) and groups:
            groups[-1].append(message)
        else:
            groups.append([message])
    return groups


def summary_excerpt(
    messages: Sequence[Message], *, budget_chars: int, history_file: str | None
) -> tuple[str, int]:
    """The newest whole turns of ``messages`` that fit ``budget_chars``, as text.

    Each message is first clipped to an eighth of the budget (so one huge tool
    result cannot crowd out the rest); then turns are taken from the newest
    back while they fit. The newest turn is always included, clipped further if
    it alone is too big.

    Returns:
        The excerpt, and how many messages it leaves out (the oldest ones).
    """
    per_message = max(budget_chars // 8, 200)
    rendered = [
        [clip(render_message(m), per_message, where=history_file) for m in group]
        for group in turn_groups(messages)
    ]
    chosen: list[list[str]] = []
    used = 0
    for group in reversed(rendered):
        size = sum(len(text) + 2 for text in group)
        if used + size > budget_chars:
            if not chosen:
                share = max(budget_chars // max(len(group), 1) - 2, 100)
                chosen.append([clip(text, share, where=history_file) for text in group])
            break
        chosen.append(group)
        used += size
    chosen.reverse()
    omitted = len(messages) - sum(len(group) for group in chosen)
    return "\n\n".join(text for group in chosen for text in group), omitted
