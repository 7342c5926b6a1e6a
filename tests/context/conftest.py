"""Helpers for the context-management tests: a long-run model, request checks, history files."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import pytest

from deepactors import AssistantMessage, ToolCall
from deepactors.messages import Message, ToolMessage, UserMessage
from deepactors.middleware import approximate_tokens
from deepactors.models import ModelRequest

PAGE_CHARS = 2_000


async def fetch(page: int) -> str:
    """Fetch one page of the archive.

    Args:
        page: The page number.
    """
    return f"page {page}: " + "x" * (PAGE_CHARS - len(f"page {page}: "))


def is_summary_call(request: ModelRequest) -> bool:
    """The summarizer's call is the only one made without tools."""
    return not request.tools


class LongRun:
    """A model for long runs: ``turns`` calls of ``fetch``, then a final answer.

    Summary calls (no tools) are answered with a numbered summary. Every agent
    request is kept, with its size as the middleware estimates it.
    """

    def __init__(self, turns: int, *, answer: str = "all pages fetched") -> None:
        self.turns = turns
        self.answer = answer
        self.turn = 0
        self.requests: list[ModelRequest] = []
        self.summaries: list[ModelRequest] = []

    def __call__(self, request: ModelRequest) -> AssistantMessage | str:
        if is_summary_call(request):
            self.summaries.append(request)
            return f"SUMMARY {len(self.summaries)}: the agent fetched archive pages."
        self.requests.append(request)
        self.turn += 1
        if self.turn <= self.turns:
            return AssistantMessage(
                content=f"Fetching page {self.turn}.",
                tool_calls=[ToolCall(name="fetch", args={"page": self.turn})],
            )
        return self.answer

    @property
    def sizes(self) -> list[int]:
        return [request_tokens(r) for r in self.requests]


def request_tokens(request: ModelRequest) -> int:
    return approximate_tokens(
        request.messages, system_prompt=request.system_prompt, tools=request.tools
    )


def assert_pairs_intact(messages: Sequence[Message]) -> None:
    """No tool result without its call, and no call (but the newest turn's) without results."""
    calls: dict[str, int] = {}
    results: set[str] = set()
    last_assistant = -1
    for i, m in enumerate(messages):
        if isinstance(m, AssistantMessage):
            last_assistant = i
            for c in m.tool_calls:
                calls[c.id] = i
        elif isinstance(m, ToolMessage):
            assert m.tool_call_id in calls, f"result {m.tool_call_id} without its call"
            results.add(m.tool_call_id)
    for call_id, i in calls.items():
        if i != last_assistant:
            assert call_id in results, f"call {call_id} without its result"


def summary_text(message: Message) -> str | None:
    """The summary in a summary message, or None for any other message."""
    if not isinstance(message, UserMessage):
        return None
    found = re.search(r"<summary>\n(.*)\n</summary>", message.text, re.DOTALL)
    return found.group(1) if found else None


_HEADING = re.compile(r"^### (\d+)\. .* \[id=([^\]]+)\]$", re.MULTILINE)


def history_ids(text: str) -> list[str]:
    """The message ids in a history file, in order; checks the numbering is 1, 2, 3..."""
    found = _HEADING.findall(text)
    assert [int(n) for n, _ in found] == list(range(1, len(found) + 1))
    return [message_id for _, message_id in found]


def file_text(result: dict[str, Any], path: str) -> str:
    return str(result["files"][path].content)


@pytest.fixture(autouse=True)
def _no_blocking(blocking_detector: None) -> None:
    """Every test here runs under the blocking-call detector of tests/conftest.py."""
