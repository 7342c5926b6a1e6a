"""The default stack: deepagents' order, defaults replaceable by name, subagents included."""

from __future__ import annotations

import pytest

from deepactors import create_deep_agent
from deepactors.middleware import (
    AgentMiddleware,
    MemoryMiddleware,
    SubAgentMiddleware,
    SummarizationMiddleware,
)
from deepactors.models import FunctionModel
from deepactors.models.anthropic import AnthropicModel


class Audit(AgentMiddleware):
    """A user middleware (its name is its class name)."""


def names(stack: object) -> list[str]:
    return [mw.name for mw in stack]  # type: ignore[attr-defined]


def test_default_order_follows_deepagents() -> None:
    agent = create_deep_agent(
        AnthropicModel("claude-sonnet-5-5", api_key="k"),
        middleware=[Audit()],
        skills=["/skills/"],
        memory=["/AGENTS.md"],
    )
    assert names(agent.spec.middleware) == [
        "TodoListMiddleware",
        "FilesystemMiddleware",
        "SubAgentMiddleware",
        "SummarizationMiddleware",
        "PatchToolCallsMiddleware",
        "Audit",
        "SkillsMiddleware",
        "AnthropicPromptCachingMiddleware",
        "MemoryMiddleware",
        "ModelRetryMiddleware",
    ]


def test_a_default_is_replaced_by_name_in_place_and_gets_the_agent_model() -> None:
    model = FunctionModel(lambda r: "x", context_window=50_000)
    mine = SummarizationMiddleware(trigger=("fraction", 0.5), keep=("messages", 3))
    memory = MemoryMiddleware(["/team/AGENTS.md"])
    agent = create_deep_agent(model, middleware=[mine, memory], memory=["/AGENTS.md"])
    stack = list(agent.spec.middleware)
    assert stack[3] is mine
    assert mine.model is model
    assert mine.limits.trigger_tokens == 25_000
    assert stack[-2] is memory  # memory stays after the caching slot (dropped for this model)
    assert names(stack).count("MemoryMiddleware") == 1


def test_every_subagent_has_summarization_with_its_own_model() -> None:
    child_model = FunctionModel(lambda r: "c", context_window=10_000)
    agent = create_deep_agent(
        FunctionModel(lambda r: "p"),
        subagents=[
            {"name": "r", "description": "d", "system_prompt": "p", "model": child_model},
        ],
    )
    (subagents,) = [m for m in agent.spec.middleware if isinstance(m, SubAgentMiddleware)]
    for spec in subagents.specs.values():
        (summ,) = [m for m in spec.agent.middleware if isinstance(m, SummarizationMiddleware)]
        assert summ.model is spec.agent.model
        assert "SubAgentMiddleware" not in names(spec.agent.middleware)
    child = subagents.specs["r"].agent
    (summ,) = [m for m in child.middleware if isinstance(m, SummarizationMiddleware)]
    assert summ.limits.trigger_tokens == 8_500


def test_context_windows_of_claude_models() -> None:
    assert AnthropicModel("claude-sonnet-5-5", api_key="k").context_window == 1_000_000
    assert AnthropicModel("claude-opus-4-6", api_key="k").context_window == 1_000_000
    assert AnthropicModel("claude-haiku-4-5-20251001", api_key="k").context_window == 200_000
    assert AnthropicModel("claude-sonnet-4-5", api_key="k").context_window == 200_000
    assert AnthropicModel("claude-unknown-9", api_key="k").context_window == 200_000
    agent = create_deep_agent(AnthropicModel("claude-haiku-4-5", api_key="k"))
    (summ,) = [m for m in agent.spec.middleware if isinstance(m, SummarizationMiddleware)]
    assert summ.limits.trigger_tokens == 170_000
    assert summ.limits.keep_tokens == 20_000


@pytest.mark.parametrize("bad", [object(), "not middleware"])
def test_a_non_middleware_is_refused(bad: object) -> None:
    from deepactors.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="not a middleware"):
        create_deep_agent(FunctionModel(lambda r: "x"), middleware=[bad])  # type: ignore[list-item]
