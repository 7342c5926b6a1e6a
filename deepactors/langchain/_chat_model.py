"""Any ``langchain_core`` chat model as a deepactors :class:`~deepactors.models.ChatModel`.

``create_deep_agent(model=ChatOpenAI(...))`` wraps the chat model in
:class:`LangChainChatModel`: messages are converted both ways, the tools are
bound with ``bind_tools`` once per tool set (the bound runnable is kept, keyed by
the tools, so a run of a hundred turns binds once), answers stream as
:class:`~deepactors.models.StreamDelta` pieces, and ``usage_metadata`` becomes
:class:`~deepactors.messages.Usage`, with ``cost_usd`` at the prices of the
model's profile when deepactors knows them (as ``Budget(usd=)`` charges it).
``response_format=`` works through the tool strategy (a tool the model calls with
its answer), which every tool-calling model supports.

Event loops: on asyncio the model's own async API (``ainvoke``/``astream``) is
used. LangChain's async machinery is built on asyncio and cannot run on trio, so
there the model's sync API runs in a worker thread (as deepactors' sync tools
do): every LangChain chat model has one. A model whose sync API is missing
(``NotImplementedError``) works on asyncio only, and says so on trio.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar, final

import sniffio
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, SystemMessage
from langchain_core.runnables import Runnable

from .._core.threads import run_sync_in_thread
from ..errors import ConfigurationError, UnsupportedLoop
from ..messages import AssistantMessage, ThinkingBlock, ToolCall
from ..models import ModelRequest, StreamDelta, StreamPart
from ..models.profiles import profile_of
from ..tools import ProviderTool, Tool
from ._messages import from_langchain, to_langchain

__all__ = ["LangChainChatModel", "is_langchain_chat_model"]

T = TypeVar("T")

# Bound runnables kept per model: one per distinct tool set (an agent and each
# kind of subagent has its own), bounded so that a program building tool sets
# on the fly does not grow without end.
MAX_BOUND_TOOL_SETS = 64


def is_langchain_chat_model(obj: object) -> bool:
    """A ``langchain_core`` ``BaseChatModel``, told by its class (LangChain not imported)."""
    return any(
        cls.__name__ == "BaseChatModel" and cls.__module__.startswith("langchain_core.")
        for cls in type(obj).__mro__
    )


@final
class LangChainChatModel:
    """A LangChain chat model, answering deepactors' model requests.

    Args:
        model: Any ``langchain_core`` ``BaseChatModel`` (``ChatOpenAI``,
            ``ChatAnthropic``, ``init_chat_model(...)``, a fake for tests).

    Attributes:
        chat_model: The wrapped LangChain model.
    """

    def __init__(self, model: BaseChatModel) -> None:
        if not isinstance(model, BaseChatModel):
            raise ConfigurationError(f"not a LangChain chat model: {model!r}")
        self.chat_model = model
        self._bound: OrderedDict[tuple[Tool, ...], Runnable[Any, Any]] = OrderedDict()
        # Subagents share the model and may run their sync calls in threads on trio.
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"LangChainChatModel({self.chat_model!r})"

    @property
    def model_name(self) -> str:
        """The provider's model id when the chat model names one, else its type."""
        for attr in ("model_name", "model", "model_id"):
            value = getattr(self.chat_model, attr, None)
            if isinstance(value, str) and value:
                return value
        return str(self.chat_model._llm_type)

    @property
    def context_window(self) -> int | None:
        """``max_input_tokens`` of the chat model's LangChain profile, when it has one
        (summarization sizes itself from it)."""
        profile = getattr(self.chat_model, "profile", None)
        window = profile.get("max_input_tokens") if isinstance(profile, Mapping) else None
        return window if isinstance(window, int) and window > 0 else None

    def runnable_for(self, tools: Sequence[Tool]) -> Runnable[Any, Any]:
        """The chat model with ``tools`` bound, made once per tool set and kept.

        A model that cannot bind tools (``bind_tools`` not implemented, as in
        LangChain's fake models) is used unbound.
        """
        key = tuple(tools)
        if not key:
            return self.chat_model
        with self._lock:
            bound = self._bound.get(key)
            if bound is not None:
                self._bound.move_to_end(key)
                return bound
        specs = [
            dict(t.spec)  # the provider's own tool, as bind_tools takes it
            if isinstance(t, ProviderTool)
            else {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters,
                },
            }
            for t in key
        ]
        try:
            bound = self.chat_model.bind_tools(specs)
        except NotImplementedError:
            bound = self.chat_model
        with self._lock:
            self._bound[key] = bound
            while len(self._bound) > MAX_BOUND_TOOL_SETS:
                self._bound.popitem(last=False)
        return bound

    async def generate(self, request: ModelRequest) -> AssistantMessage:
        """Answer one request with the chat model's ``ainvoke`` (``invoke`` on trio)."""
        runnable = self.runnable_for(request.tools)
        messages = _lc_messages(request)
        if sniffio.current_async_library() == "asyncio":
            answer = await runnable.ainvoke(messages)
        else:
            answer = await self._in_thread(functools.partial(runnable.invoke, messages))
        return self._assistant(answer)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamPart]:
        """Answer piece by piece (``astream``; ``stream`` in a worker thread on trio)."""
        runnable = self.runnable_for(request.tools)
        messages = _lc_messages(request)
        full: AIMessageChunk | None = None
        if sniffio.current_async_library() == "asyncio":
            async for chunk in runnable.astream(messages):
                full = chunk if full is None else full + chunk
                for delta in _deltas(chunk):
                    yield delta
        else:
            chunks: Iterator[Any] = await self._in_thread(
                functools.partial(runnable.stream, messages)
            )
            try:
                while True:
                    chunk = await self._in_thread(functools.partial(next, chunks, None))
                    if chunk is None:
                        break
                    full = chunk if full is None else full + chunk
                    for delta in _deltas(chunk):
                        yield delta
            finally:
                close = getattr(chunks, "close", None)
                if close is not None:
                    close()
        yield self._assistant(full if full is not None else AIMessage(content=""))

    async def _in_thread(self, call: Callable[[], T]) -> T:
        try:
            return await run_sync_in_thread(call, name=f"langchain:{self.model_name}")
        except NotImplementedError as exc:
            raise UnsupportedLoop(
                f"LangChain chat model {type(self.chat_model).__name__} has no sync API, "
                "and LangChain's async API runs only on asyncio: run this agent on asyncio "
                f"({exc})"
            ) from exc

    def _assistant(self, answer: object) -> AssistantMessage:
        if isinstance(answer, AIMessageChunk):
            data = answer.model_dump()
            data.pop("tool_call_chunks", None)
            data.pop("chunk_position", None)
            answer = AIMessage(**{k: v for k, v in data.items() if k != "type"})
        if not isinstance(answer, AIMessage):
            raise ConfigurationError(
                f"LangChain chat model answered with {type(answer).__name__}, not an AIMessage"
            )
        message = from_langchain(answer.model_copy(update={"content": _content(answer.content)}))
        assert isinstance(message, AssistantMessage)
        meta = answer.response_metadata or {}
        updates: dict[str, object] = {}
        if message.model is None:
            updates["model"] = meta.get("model_name") or meta.get("model") or self.model_name
        if message.stop_reason is None:
            reason = meta.get("stop_reason") or meta.get("finish_reason")
            if reason is None:
                reason = "tool_use" if message.tool_calls else "end_turn"
            updates["stop_reason"] = str(reason)
        usage = message.usage
        if usage is not None and usage.cost_usd is None:
            # Priced as deepactors' own models price theirs (and as a Budget(usd=)
            # charges the call): at the model's profile's prices, when known.
            profile = profile_of(self)
            if profile is not None and profile.prices is not None:
                updates["usage"] = usage.model_copy(update={"cost_usd": profile.prices.cost(usage)})
        if any(not c.id for c in message.tool_calls):
            # Some providers (and fakes) give no call ids; a result answers a call by id.
            updates["tool_calls"] = [
                c if c.id else ToolCall(name=c.name, args=c.args, error=c.error)
                for c in message.tool_calls
            ]
        return message.model_copy(update=updates) if updates else message


def _lc_messages(request: ModelRequest) -> list[BaseMessage]:
    messages: list[BaseMessage] = []
    if request.system_prompt:
        messages.append(SystemMessage(content=request.system_prompt))
    messages.extend(to_langchain(m) for m in request.messages)
    return messages


def _deltas(chunk: object) -> Iterator[StreamDelta]:
    content = getattr(chunk, "content", "")
    if isinstance(content, str):
        if content:
            yield StreamDelta(kind="text", text=content)
        return
    for part in content:
        if isinstance(part, str):
            yield StreamDelta(kind="text", text=part)
        elif isinstance(part, dict):
            index = part.get("index", 0)
            index = index if isinstance(index, int) else 0
            if part.get("type") == "text" and part.get("text"):
                yield StreamDelta(kind="text", text=str(part["text"]), index=index)
            elif part.get("type") in ("thinking", "reasoning"):
                text = part.get("thinking") or part.get("reasoning") or ""
                if text:
                    yield StreamDelta(kind="thinking", text=str(text), index=index)


def _content(content: str | list[str | dict[str, object]]) -> str | list[dict[str, object]]:
    """Content blocks deepactors keeps: text and thinking. Others (a provider's
    ``tool_use`` blocks, citations, ...) are dropped: the calls are in ``tool_calls``."""
    if isinstance(content, str):
        return content
    kept: list[dict[str, object]] = []
    for part in content:
        if isinstance(part, str):
            kept.append({"type": "text", "text": part})
        elif isinstance(part, dict) and part.get("type") == "text":
            kept.append({"type": "text", "text": str(part.get("text", ""))})
        elif isinstance(part, dict) and part.get("type") == "thinking":
            thinking = ThinkingBlock(
                thinking=str(part.get("thinking", "")), signature=str(part.get("signature", ""))
            )
            kept.append(thinking.model_dump())
    return kept


# The models registry's hooks (deepactors.models.LANGCHAIN_ADAPTER / _RESOLVER).
# One adapter per chat model object, so an agent and the subagents given the same
# object share its bound tools; bounded, since it keeps the objects alive.
_ADAPTED: OrderedDict[int, tuple[object, LangChainChatModel]] = OrderedDict()
_ADAPTED_LOCK = threading.Lock()
MAX_ADAPTED_MODELS = 256


def adapt_model(obj: object) -> LangChainChatModel | None:
    """``model=<a LangChain chat model>``: the adapter for it (the same one each time).

    Returns None for objects that are not LangChain chat models.
    """
    if not isinstance(obj, BaseChatModel):
        return None
    with _ADAPTED_LOCK:
        held = _ADAPTED.get(id(obj))
        if held is not None and held[0] is obj:
            _ADAPTED.move_to_end(id(obj))
            return held[1]
        adapter = LangChainChatModel(obj)
        _ADAPTED[id(obj)] = (obj, adapter)
        while len(_ADAPTED) > MAX_ADAPTED_MODELS:
            _ADAPTED.popitem(last=False)
        return adapter


def resolve_model_string(spec: str) -> LangChainChatModel | None:
    """``model="google_genai:gemini-3-pro"``: LangChain's ``init_chat_model``, wrapped.

    Returns None when ``init_chat_model`` does not know the provider.

    Raises:
        ConfigurationError: The ``langchain`` package, or the provider's
            integration package, is not installed (the error names it).
    """
    try:
        from langchain.chat_models import init_chat_model
    except ImportError as exc:
        raise ConfigurationError(
            f"model {spec!r}: LangChain's init_chat_model needs the langchain package "
            f"(pip install langchain and the provider's langchain-* package) ({exc})"
        ) from None
    try:
        chat_model = init_chat_model(spec)
    except ImportError as exc:
        raise ConfigurationError(f"model {spec!r} needs a LangChain integration: {exc}") from None
    except ValueError as exc:
        text = str(exc)
        if "model provider" in text or "model_provider" in text:
            return None  # init_chat_model does not know this provider either
        # Known, but it could not be made (a missing API key, a bad option).
        raise ConfigurationError(f"model {spec!r}: {text.splitlines()[0]}") from None
    adapted = adapt_model(chat_model)
    if adapted is None:
        return None
    return adapted
