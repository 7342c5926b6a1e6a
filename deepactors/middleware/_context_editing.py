"""``ContextEditingMiddleware``: old tool results give way to a placeholder past a threshold."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from ..context import RunKey
from ..errors import ConfigurationError
from ..hooks import AgentMiddleware, ModelHandler
from ..messages import AssistantMessage, Message, ToolMessage
from ..models import ModelRequest
from ._tokens import TokenCounter, message_tokens

__all__ = ["DEFAULT_PLACEHOLDER", "ContextEditingMiddleware"]

DEFAULT_PLACEHOLDER = "[cleared: this tool result was removed to save context]"

# Counts from estimates only (no provider usage): usage measures the request as
# sent, after clearing, and a count that shrinks when results are cleared would
# bring them back on the next call.
_NO_USAGE = 1 << 62


@dataclass(slots=True)
class _Edits:
    """One run's edits: results cleared so far (they stay cleared), and where to look next."""

    counter: TokenCounter = field(default_factory=TokenCounter)
    cleared: dict[str, ToolMessage] = field(default_factory=dict)
    inputs: dict[str, tuple[frozenset[str], AssistantMessage]] = field(default_factory=dict)
    cleared_calls: set[str] = field(default_factory=set)
    next_index: int = 0


class ContextEditingMiddleware(AgentMiddleware):
    """Clear old tool results from what the model sees once the conversation is large.

    Anthropic's "context editing" and LangChain's ``ClearToolUsesEdit``: when the
    request is estimated above ``trigger`` tokens, every tool result except the
    newest ``keep`` (and those of ``exclude_tools``) is replaced by
    ``placeholder``, oldest first, until ``clear_at_least`` tokens are freed (0:
    all of them). A result once cleared stays cleared for the rest of the run, so
    the prompt prefix stays stable for caching. The state keeps every result
    whole; only the request changes. Not in the default stack (summarization is):
    add it for agents whose tool results are big and soon stale (web pages,
    search dumps).

    Args:
        trigger: Tokens above which results are cleared.
        keep: How many of the newest tool results always stay.
        clear_at_least: Stop once this many tokens are freed in one call (0: clear
            every eligible result).
        exclude_tools: Tools whose results are never cleared.
        placeholder: The text a cleared result is replaced by.
        clear_tool_inputs: Also empty the arguments of the calls whose results
            were cleared.
    """

    def __init__(
        self,
        *,
        trigger: int = 100_000,
        keep: int = 3,
        clear_at_least: int = 0,
        exclude_tools: Collection[str] = (),
        placeholder: str = DEFAULT_PLACEHOLDER,
        clear_tool_inputs: bool = False,
    ) -> None:
        if trigger < 1 or keep < 0 or clear_at_least < 0:
            raise ConfigurationError("trigger must be >= 1; keep and clear_at_least >= 0")
        self.trigger = trigger
        self.keep = keep
        self.clear_at_least = clear_at_least
        self.exclude_tools = frozenset(exclude_tools)
        self.placeholder = placeholder
        self.clear_tool_inputs = clear_tool_inputs
        self._key: RunKey[_Edits] = RunKey(f"{self.name}.edits", _Edits)

    async def wrap_model_call(
        self, request: ModelRequest, handler: ModelHandler
    ) -> AssistantMessage:
        """Send the request with old tool results cleared, when it is large."""
        run = request.run
        if run is None:
            return await handler(request)
        edits = run.local(self._key)
        messages = request.messages
        tokens = edits.counter.count(
            messages,
            usage_from=_NO_USAGE,
            system_prompt=request.system_prompt,
            tools=request.tools,
        )
        if tokens > self.trigger:
            self._clear_more(messages, edits)
        if not edits.cleared:
            return await handler(request)
        return await handler(request.replace(messages=self._edited(messages, edits)))

    def _clear_more(self, messages: Sequence[Message], edits: _Edits) -> None:
        # Looks only past the last result it cleared: O(new messages) per call.
        found = range(edits.next_index, len(messages))
        results = [i for i in found if isinstance(messages[i], ToolMessage)]
        if self.keep:
            results = results[: -self.keep] if len(results) > self.keep else []
        freed = 0
        for i in results:
            message = messages[i]
            assert isinstance(message, ToolMessage)
            edits.next_index = i + 1
            if message.name in self.exclude_tools or message.id in edits.cleared:
                continue
            edits.cleared[message.id] = message.model_copy(update={"content": self.placeholder})
            edits.cleared_calls.add(message.tool_call_id)
            freed += message_tokens(message)
            if self.clear_at_least and freed >= self.clear_at_least:
                break

    def _edited(self, messages: Sequence[Message], edits: _Edits) -> list[Message]:
        out: list[Message] = []
        for message in messages:
            if isinstance(message, ToolMessage):
                out.append(edits.cleared.get(message.id, message))
            elif self.clear_tool_inputs and isinstance(message, AssistantMessage):
                out.append(self._without_inputs(message, edits))
            else:
                out.append(message)
        return out

    def _without_inputs(self, message: AssistantMessage, edits: _Edits) -> AssistantMessage:
        wanted = frozenset(c.id for c in message.tool_calls if c.id in edits.cleared_calls)
        if not wanted:
            return message
        cached = edits.inputs.get(message.id)
        if cached is not None and cached[0] == wanted:
            return cached[1]
        calls = [
            c.model_copy(update={"args": {}}) if c.id in wanted else c for c in message.tool_calls
        ]
        short = message.model_copy(update={"tool_calls": calls})
        edits.inputs[message.id] = (wanted, short)
        return short
