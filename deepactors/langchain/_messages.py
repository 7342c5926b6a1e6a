"""deepactors messages as ``langchain_core`` message objects, and back.

Both directions go through LangChain's message dicts (:mod:`deepactors.langchain.views`),
the one place that knows how each field maps; this module only builds the
objects. Imported only when ``langchain-core`` is installed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from ..messages import MESSAGE_TYPES, AssistantMessage, Message
from .views import message_from_lc, message_to_lc

__all__ = ["from_langchain", "lc_objects", "to_langchain", "to_langchain_chunk"]

_CLASSES: dict[str, type[BaseMessage]] = {
    "human": HumanMessage,
    "ai": AIMessage,
    "tool": ToolMessage,
    "system": SystemMessage,
}


def to_langchain(message: Message) -> BaseMessage:
    """A deepactors message as the ``langchain_core`` message of the same role.

    Tool calls, usage, the model name and the stop reason are kept (as
    ``tool_calls``, ``usage_metadata`` and ``response_metadata``); so is the id.
    """
    data = message_to_lc(message)
    cls = _CLASSES[data.pop("type")]
    if data.get("usage_metadata") is None:
        data.pop("usage_metadata", None)
    return cls(**data)


def to_langchain_chunk(message: AssistantMessage) -> AIMessageChunk:
    """A piece of a streamed answer as LangChain's ``AIMessageChunk``."""
    data = message_to_lc(message)
    del data["type"]
    if data.get("usage_metadata") is None:
        data.pop("usage_metadata", None)
    return AIMessageChunk(**data)


def from_langchain(message: BaseMessage | Mapping[str, object]) -> Message:
    """A ``langchain_core`` message (or message dict) as a deepactors message.

    Raises:
        InputError: Not a message deepactors can represent; the error names the field.
    """
    if isinstance(message, BaseMessage):
        data = message.model_dump()
        if isinstance(message, AIMessageChunk):
            data["type"] = "ai"
        return message_from_lc(data)
    return message_from_lc(message)


def lc_objects(value: Any, *, chunks: bool = False) -> Any:
    """``value`` with every deepactors message in it (at any depth) made a LangChain one.

    Dicts, lists and tuples are rebuilt; anything else is kept as is. With
    ``chunks``, assistant messages become ``AIMessageChunk`` (the ``messages``
    stream mode's pieces).
    """
    if isinstance(value, MESSAGE_TYPES):
        if chunks and isinstance(value, AssistantMessage):
            return to_langchain_chunk(value)
        return to_langchain(value)
    # Only plain containers are rebuilt: a subclass (an interrupt's PendingRequest,
    # a named tuple) is a value of its own and stays what it is.
    if type(value) is dict:
        return {k: lc_objects(v, chunks=chunks) for k, v in value.items()}
    if type(value) is list:
        return [lc_objects(v, chunks=chunks) for v in value]
    if type(value) is tuple:
        return tuple(lc_objects(v, chunks=chunks) for v in value)
    return value


def to_langchain_all(messages: Iterable[Message]) -> list[BaseMessage]:
    """:func:`to_langchain` over a list."""
    return [to_langchain(m) for m in messages]


def from_langchain_all(messages: Sequence[BaseMessage]) -> list[Message]:
    """:func:`from_langchain` over a list."""
    return [from_langchain(m) for m in messages]
