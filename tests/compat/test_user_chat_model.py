"""A chat model class of the user's own, subclassing LangChain's BaseChatModel,
is adapted like LangChain's own: no registration needed."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from deepactors import create_deep_agent
from deepactors.langchain import LangChainChatModel

pytestmark = pytest.mark.anyio


class EchoChatModel(BaseChatModel):
    """Answers with the last message's text (defined here, not in a langchain module)."""

    @property
    def _llm_type(self) -> str:
        return "echo"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: Any = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        text = f"echo: {messages[-1].content}"
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=text))])


async def test_a_users_own_base_chat_model_subclass_is_a_model() -> None:
    assert not EchoChatModel.__module__.startswith("langchain")
    agent = create_deep_agent(model=EchoChatModel())
    assert isinstance(agent.model, LangChainChatModel)
    result = await agent.ainvoke("hi")
    assert result["messages"][-1].text == "echo: hi"
