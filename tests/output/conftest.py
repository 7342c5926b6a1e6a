"""Shared helpers for the tests of structured output, limits, budgets and permissions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from deepactors import AssistantMessage, ToolCall, ToolMessage, Usage
from deepactors.models import FunctionModel, ModelRequest


def subagent(name: str, model: Any, **extra: Any) -> dict[str, Any]:
    """A subagent spec whose description and prompt do not matter to the test."""
    return {"name": name, "description": name, "system_prompt": name, "model": model, **extra}


def fan_out(n: int, subagent_type: str = "worker") -> AssistantMessage:
    """One turn asking for ``n`` subagents at once."""
    return AssistantMessage(
        tool_calls=[
            ToolCall(name="task", args={"description": f"job {i}", "subagent_type": subagent_type})
            for i in range(n)
        ]
    )


def tool_results(request: ModelRequest) -> list[ToolMessage]:
    return [m for m in request.messages if isinstance(m, ToolMessage)]


async def lookup(key: str) -> str:
    """Look a key up.

    Args:
        key: The key.
    """
    return f"value of {key}"


def looping_model(calls: int, *, name: str = "worker", latency: float = 0.0) -> FunctionModel:
    """A model that calls ``lookup`` until it has made ``calls`` model calls, then answers."""

    def answer(request: ModelRequest) -> AssistantMessage:
        done = len(tool_results(request))
        if done + 1 >= calls:
            return AssistantMessage(content=f"finished after {done + 1} calls")
        return AssistantMessage(tool_calls=[ToolCall(name="lookup", args={"key": f"k{done}"})])

    return FunctionModel(answer, latency=latency, name=name)


class MaxTokensModel(FunctionModel):
    """A test model with an output limit per call (``SupportsMaxTokens``), reporting usage.

    It answers with ``fn(request)`` and reports, as usage, the full ``max_tokens``
    the call was made with (the worst case a budget reserves for) and
    ``input_share`` of the input estimate.
    """

    def __init__(
        self,
        fn: Callable[[ModelRequest], AssistantMessage],
        *,
        max_tokens: int,
        input_tokens: Callable[[ModelRequest], int] = lambda r: 10,
        name: str = "max-tokens-model",
    ) -> None:
        self.max_tokens = max_tokens
        self.seen_max_tokens: list[int] = []
        self.reported = Usage(requests=0)

        def with_usage(request: ModelRequest) -> AssistantMessage:
            limit = request.settings.get("max_tokens", self.max_tokens)
            self.seen_max_tokens.append(limit)
            usage = Usage(input_tokens=input_tokens(request), output_tokens=limit)
            self.reported = self.reported + usage
            return fn(request).model_copy(update={"usage": usage})

        super().__init__(with_usage, name=name)
