"""Deterministic LangChain chat models for the compatibility tests (our own code).

:class:`GenericFakeChatModel` extends ``langchain_core``'s fake of that name with
what deepagents' test suite relies on: ``bind_tools`` (counted, so a test can see
tools bound once per tool set), tool calls kept when streaming, and
``stream_delimiter`` (content split on a pattern, the pattern dropped, as in
deepagents' ``tests/unit_tests/chat_model.py``).
"""

from __future__ import annotations

import re
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models.fake_chat_models import (
    GenericFakeChatModel as _LangChainFake,
)
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool

from deepactors.models import register_model_adapter

__all__ = ["AsyncOnlyChatModel", "GenericFakeChatModel", "RuleChatModel"]

# The models registry tries its LangChain adapter for classes defined in
# ``langchain*`` modules; these fakes live here, so they are registered too.
register_model_adapter(__name__, "deepactors.langchain:adapt_model")

_bind_lock = threading.Lock()


class GenericFakeChatModel(_LangChainFake):
    """Replays ``messages`` (an iterator of ``AIMessage`` or str), one per call.

    Attributes:
        stream_delimiter: A regular expression to split streamed content on.
        bind_calls: How many times ``bind_tools`` was called.
        bound_tools: The tool names of each ``bind_tools`` call.
        seen: The messages of each call.
    """

    stream_delimiter: str | None = None
    bind_calls: int = 0
    bound_tools: list[list[str]] = []  # noqa: RUF012 - a pydantic field, per instance
    seen: list[list[BaseMessage]] = []  # noqa: RUF012

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[Any, AIMessage]:
        with _bind_lock:
            self.bind_calls += 1
            self.bound_tools.append([_tool_name(t) for t in tools])
        return self.bind(tools=list(tools), **kwargs)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.seen.append(list(messages))
        message = next(self.messages)
        answer = AIMessage(content=message) if isinstance(message, str) else message
        return ChatResult(generations=[ChatGeneration(message=answer)])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        answer = self._generate(messages, stop=stop, **kwargs).generations[0].message
        assert isinstance(answer, AIMessage)
        content = answer.content if isinstance(answer.content, str) else ""
        pieces = [content]
        if content and self.stream_delimiter is not None:
            pieces = [p for p in re.split(self.stream_delimiter, content) if p]
        elif content:
            pieces = [p for p in re.split(r"(\s)", content) if p]
        pieces = pieces or [""]
        for i, piece in enumerate(pieces):
            last = i == len(pieces) - 1
            chunk = AIMessageChunk(
                content=piece,
                id=answer.id,
                tool_calls=answer.tool_calls if last else [],
                usage_metadata=answer.usage_metadata if last else None,
                response_metadata=answer.response_metadata if last else {},
            )
            if run_manager is not None:
                run_manager.on_llm_new_token(piece, chunk=ChatGenerationChunk(message=chunk))
            yield ChatGenerationChunk(message=chunk)

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        for chunk in self._stream(messages, stop=stop, **kwargs):
            if run_manager is not None:
                await run_manager.on_llm_new_token(str(chunk.message.content), chunk=chunk)
            yield chunk


class AsyncOnlyChatModel(GenericFakeChatModel):
    """A model with only LangChain's async API: usable on asyncio, refused on trio."""

    def _generate(self, *args: Any, **kwargs: Any) -> ChatResult:
        raise NotImplementedError("this model has only an async API")

    def _stream(self, *args: Any, **kwargs: Any) -> Iterator[ChatGenerationChunk]:
        raise NotImplementedError("this model has only an async API")

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return GenericFakeChatModel._generate(self, messages, stop=stop, **kwargs)

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        for chunk in GenericFakeChatModel._stream(self, messages, stop=stop, **kwargs):
            yield chunk


def _tool_name(spec: Any) -> str:
    if isinstance(spec, dict):
        function = spec.get("function", spec)
        return str(function.get("name"))
    return str(getattr(spec, "name", getattr(spec, "__name__", spec)))


class RuleChatModel(GenericFakeChatModel):
    """Answers with ``rule(messages)``: for tests whose model serves several agents
    (a parent and the subagents that inherit its model) and must answer each.

    ``messages`` is unused (an empty iterator); ``rule`` gets the call's messages
    (system prompt first) and returns an ``AIMessage``.
    """

    rule: Callable[[list[BaseMessage]], AIMessage]

    def __init__(self, rule: Callable[[list[BaseMessage]], AIMessage], **kwargs: Any) -> None:
        super().__init__(messages=iter(()), rule=rule, **kwargs)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.seen.append(list(messages))
        return ChatResult(generations=[ChatGeneration(message=self.rule(list(messages)))])
