"""Message and content types: pydantic models that round-trip through JSON.

The four roles are ``system``, ``user``, ``assistant`` and ``tool``. Messages are
frozen values: a parent's history may be shared with snapshots and checkpoints, so
nothing may change one in place. Plain ``{"role": "user", "content": "..."}`` dicts
are accepted wherever a message is, and validated by :func:`to_message`.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from .errors import InputError

__all__ = [
    "AssistantMessage",
    "Content",
    "ContentBlock",
    "ImageBlock",
    "Message",
    "MessageLike",
    "RedactedThinkingBlock",
    "SystemMessage",
    "TextBlock",
    "ThinkingBlock",
    "ToolCall",
    "ToolMessage",
    "Usage",
    "UserMessage",
    "content_text",
    "new_id",
    "to_message",
    "to_messages",
]


# A random per-process prefix plus a counter: unique across processes (and
# restarts) like a uuid4, without a system call per id on the hot path.
_ID_PREFIX = os.urandom(8).hex()
_ID_COUNTER = itertools.count(1)


def new_id() -> str:
    """A fresh id, unique across processes: 16 random hex digits and a counter."""
    return f"{_ID_PREFIX}{next(_ID_COUNTER):08x}"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TextBlock(_Frozen):
    """Plain text."""

    type: Literal["text"] = "text"
    text: str


class ImageBlock(_Frozen):
    """An image, either ``{"type": "base64", "media_type": ..., "data": ...}`` or a URL."""

    type: Literal["image"] = "image"
    source: dict[str, str]


class ThinkingBlock(_Frozen):
    """A model's visible reasoning, with the signature the provider needs back verbatim."""

    type: Literal["thinking"] = "thinking"
    thinking: str
    signature: str = ""


class RedactedThinkingBlock(_Frozen):
    """Reasoning the provider encrypted; passed back unchanged on the next turn."""

    type: Literal["redacted_thinking"] = "redacted_thinking"
    data: str


ContentBlock: TypeAlias = Annotated[
    TextBlock | ImageBlock | ThinkingBlock | RedactedThinkingBlock, Field(discriminator="type")
]
Content: TypeAlias = str | list[ContentBlock]


def content_text(content: Content) -> str:
    """The text of a content value: the string itself, or its text blocks joined."""
    if isinstance(content, str):
        return content
    return "".join(block.text for block in content if isinstance(block, TextBlock))


class ToolCall(_Frozen):
    """One tool call requested by the model.

    Attributes:
        id: The provider's id for the call; a tool result answers it by this id.
        name: The tool to run.
        args: The arguments, as the model gave them (validated only when the tool runs).
        error: Set when the model's arguments could not even be parsed (for example
            invalid JSON); the call then gets an error result without running.
    """

    id: str = Field(default_factory=lambda: "call_" + new_id())
    name: str
    args: dict[str, Any] = Field(default_factory=dict)
    error: str | None = None

    # LangChain's tool calls are dicts: code written for it reads tc["name"] and
    # tc.get("args"), so a call reads as {"name", "args", "id", "type": "tool_call"}.
    def __getitem__(self, key: str) -> Any:
        if key == "type":
            return "tool_call"
        if key in _CALL_KEYS:
            return getattr(self, key)
        raise KeyError(key)

    def get(self, key: str, default: Any = None) -> Any:
        """``tc.get("args")``, as on LangChain's tool call dicts."""
        try:
            return self[key]
        except KeyError:
            return default

    def __contains__(self, key: object) -> bool:
        return key == "type" or key in _CALL_KEYS


_CALL_KEYS = frozenset({"id", "name", "args"})


class Usage(_Frozen):
    """Token counts of one model call, or a sum of several (``a + b``).

    Attributes:
        cost_usd: What the call cost in US dollars, from its model's prices
            (:mod:`deepactors.models.profiles`); None when they are unknown. A sum
            counts the calls whose cost is known.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    requests: int = 1
    cost_usd: float | None = None

    def __add__(self, other: Usage) -> Usage:
        cost = self.cost_usd
        if other.cost_usd is not None:
            cost = other.cost_usd if cost is None else cost + other.cost_usd
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            requests=self.requests + other.requests,
            cost_usd=cost,
        )

    @property
    def total_tokens(self) -> int:
        """Input, output and cache tokens together."""
        return (
            self.input_tokens
            + self.output_tokens
            + self.cache_read_tokens
            + self.cache_write_tokens
        )


class _Message(_Frozen):
    id: str = Field(default_factory=new_id)

    if TYPE_CHECKING:  # every message kind declares them (a field each, in its order)
        role: str
        content: Content

    @property
    def text(self) -> str:
        """The message's text content (text blocks joined)."""
        return content_text(self.content)

    @property
    def type(self) -> str:
        """LangChain's name for the role: ``human``, ``ai``, ``tool`` or ``system``."""
        return _LC_TYPES[self.role]

    def pretty_repr(self) -> str:
        """A readable rendering: a title line, then the text (and any tool calls)."""
        title = f" {self.type.capitalize()} Message "
        lines = [f"{title:=^80}", self.text]
        for call in getattr(self, "tool_calls", ()):
            lines.append(f"  tool call {call.name} ({call.id}): {call.args}")
        return "\n".join(lines)

    def pretty_print(self) -> None:
        """Print :meth:`pretty_repr` (LangChain's method, for ported scripts)."""
        print(self.pretty_repr())


_LC_TYPES = {"user": "human", "assistant": "ai", "tool": "tool", "system": "system"}
_ROLES = {"human": "user", "ai": "assistant", "user": "user", "assistant": "assistant"}
_ROLES |= {"tool": "tool", "system": "system", "developer": "system"}
# What LangChain message dicts carry that has no place here (metadata of its own).
_LC_ONLY = (
    "additional_kwargs",
    "response_metadata",
    "example",
    "invalid_tool_calls",
    "tool_call_chunks",
    "artifact",
    "lc_source",
)


class SystemMessage(_Message):
    """Instructions for the model. Usually given as ``system_prompt=`` instead."""

    role: Literal["system"] = "system"
    content: Content


class UserMessage(_Message):
    """What the user said."""

    role: Literal["user"] = "user"
    content: Content


class AssistantMessage(_Message):
    """A model's answer: text and/or tool calls.

    Attributes:
        stop_reason: Why the model stopped (``end_turn``, ``tool_use``, ``max_tokens``, ...).
        usage: Token counts of the call that produced this message.
        model: The model id that answered.
    """

    role: Literal["assistant"] = "assistant"
    content: Content = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    usage: Usage | None = None
    stop_reason: str | None = None
    model: str | None = None


class ToolMessage(_Message):
    """The result of one tool call, sent back to the model."""

    role: Literal["tool"] = "tool"
    tool_call_id: str
    name: str
    content: Content
    status: Literal["success", "error"] = "success"


Message: TypeAlias = Annotated[
    SystemMessage | UserMessage | AssistantMessage | ToolMessage, Field(discriminator="role")
]
_MESSAGE = TypeAdapter[Message](Message)
MESSAGE_TYPES = (SystemMessage, UserMessage, AssistantMessage, ToolMessage)


MessageLike: TypeAlias = "Message | Mapping[str, Any] | tuple[str, Any]"
"""A message, a dict (``role`` or LangChain's ``type``), or a ``(role, content)`` pair."""


def to_message(value: MessageLike | object) -> Message:
    """Validate one message given as a model, a plain dict or a ``(role, content)`` pair.

    LangChain shapes are accepted so ported scripts run: ``("user", "hi")``,
    dicts with ``type`` ``human``/``ai``/``tool``/``system`` and LangChain's tool
    call dicts, and, when ``langchain-core`` is installed, its message objects.

    Raises:
        InputError: The value is not a valid message; the error says which field.
    """
    if isinstance(value, MESSAGE_TYPES):
        return value
    if type(value) is dict and len(value) == 2 and value.get("role") == "user":
        content = value.get("content")
        if type(content) is str:
            # The most common input of all ({"role": "user", "content": "..."}):
            # straight to the model, without the key shuffling below.
            return UserMessage(content=content)
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str):
        value = {"role": value[0], "content": value[1]}
    elif not isinstance(value, Mapping) and type(value).__module__.startswith("langchain_core"):
        value = _from_langchain_object(value)
    if not isinstance(value, Mapping):
        raise InputError(
            f"a message must be a dict with 'role' and 'content', a (role, content) pair or "
            f"a message object, not {type(value).__name__}"
        )
    data = dict(value)
    role = data.get("role", data.get("type"))
    data.pop("type", None)
    data["role"] = _ROLES.get(role, role) if isinstance(role, str) else role
    for key in _LC_ONLY:
        data.pop(key, None)
    if data["role"] == "tool":
        data["name"] = data.get("name") or ""  # optional in LangChain
    else:
        data.pop("name", None)  # LangChain's optional speaker name; ours is the tool's
    usage = data.pop("usage_metadata", None)
    if usage and data["role"] == "assistant" and "usage" not in data:
        data["usage"] = {
            "input_tokens": usage.get("input_tokens", 0),
            "output_tokens": usage.get("output_tokens", 0),
        }
    if data.get("tool_calls"):
        data["tool_calls"] = [_tool_call(c) for c in data["tool_calls"]]
    if data.get("id") is None:
        data.pop("id", None)
    try:
        return _MESSAGE.validate_python(data)
    except ValidationError as exc:
        raise InputError(f"invalid message {_short(value)}: {_first_error(exc)}") from exc


def _tool_call(call: object) -> object:
    """A LangChain tool call dict (``type: tool_call``) in our shape."""
    if isinstance(call, Mapping) and "type" in call:
        call = {k: v for k, v in call.items() if k != "type"}
    return call


def _from_langchain_object(obj: Any) -> dict[str, Any]:
    """A ``langchain_core`` message object as a LangChain message dict."""
    data: dict[str, Any] = {"type": getattr(obj, "type", None), "content": obj.content}
    for key in ("id", "tool_call_id", "name", "status", "usage_metadata"):
        if getattr(obj, key, None) is not None:
            data[key] = getattr(obj, key)
    calls = getattr(obj, "tool_calls", None)
    if calls:
        data["tool_calls"] = [dict(c) for c in calls]
    return data


def to_messages(values: Iterable[MessageLike] | str) -> list[Message]:
    """Validate a list of messages; a bare string is one user message."""
    if isinstance(values, str):
        return [UserMessage(content=values)]
    if isinstance(values, Mapping | tuple) or not isinstance(values, Iterable):
        raise InputError("'messages' must be a list of messages")
    return [to_message(v) for v in values]


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"])
    return f"{where}: {err['msg']}" if where else str(err["msg"])


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
