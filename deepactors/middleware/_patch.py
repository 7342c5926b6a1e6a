"""Repairs a history whose tool calls lost their results (a run cancelled mid-step)."""

from __future__ import annotations

from ..context import RunContext
from ..hooks import AgentMiddleware, HookResult
from ..messages import AssistantMessage, Message, ToolMessage
from ..state import REMOVE_ALL_MESSAGES, RemoveMessage, State

__all__ = ["PatchToolCallsMiddleware"]

CANCELLED_TEXT = (
    "This tool call was cancelled before it produced a result (the run was interrupted). "
    "Call it again if you still need it."
)


class PatchToolCallsMiddleware(AgentMiddleware):
    """Gives every dangling tool call a "cancelled" result before the model sees it.

    Providers reject a history in which a tool call has no result. A call is
    dangling when a later user or assistant message follows it without its result.
    Calls of the newest assistant message with nothing but tool results after it
    are not dangling: the loop runs them (that is how a stopped or interrupted run
    continues).
    """

    async def before_agent(self, state: State, run: RunContext) -> HookResult:
        messages = state.messages
        answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
        # The newest assistant message with only tool results after it is still in
        # progress (a resumed or interrupted step): the loop will run its calls.
        in_progress = len(messages) - 1
        while in_progress >= 0 and isinstance(messages[in_progress], ToolMessage):
            in_progress -= 1
        patched: list[Message] = []
        changed = False
        for i, m in enumerate(messages):
            patched.append(m)
            if not isinstance(m, AssistantMessage) or i == in_progress:
                continue
            for call in m.tool_calls:
                if call.id not in answered:
                    changed = True
                    patched.append(
                        ToolMessage(
                            tool_call_id=call.id,
                            name=call.name,
                            content=CANCELLED_TEXT,
                            status="error",
                        )
                    )
        if not changed:
            return None
        return {"messages": [RemoveMessage(REMOVE_ALL_MESSAGES), *patched]}
