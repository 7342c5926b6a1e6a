"""The ``compact_conversation`` tool: the model asks for a summary before its next turn.

deepagents' ``SummarizationToolMiddleware``: here an option of
:class:`~deepactors.middleware.SummarizationMiddleware` (``compact_tool=True``).
The tool only sets a flag in the summarization channel; the middleware
summarizes at the next model call, as it would at its trigger.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from ..context import RunKey, ToolRuntime
from ..tools import Command, Tool, tool
from ._summary_policy import Limits

__all__ = ["SUMMARY_CHANNEL", "compact_tool_for"]

SUMMARY_CHANNEL = "summarization"
"""The private state channel holding where the summary cuts in (JSON, checkpointed)."""


class _Measured(Protocol):
    """What the middleware measured at the run's last model call."""

    tokens: int
    messages: int


def compact_tool_for(key: RunKey[_Measured], limits: Callable[[], Limits]) -> Tool:
    """The tool for one middleware: ``key`` finds its per-run measurements."""

    async def compact_conversation(runtime: ToolRuntime) -> Command | str:
        """Summarize the older part of this conversation now, to free up context.

        Use it between tasks, or before a long step, when the conversation is
        long. The older messages are replaced by a summary before your next turn;
        their full text stays readable in the conversation history file.
        """
        measured: _Measured = runtime.run.local(key)
        if not limits().eligible(measured.tokens, measured.messages):
            return (
                f"Not compacted: the conversation is still short (about {measured.tokens} "
                "tokens). Compacting becomes available at half the summarization threshold."
            )
        return Command(
            update={SUMMARY_CHANNEL: {"compact": True}},
            result="The older messages will be summarized before your next turn.",
        )

    return tool(compact_conversation)
