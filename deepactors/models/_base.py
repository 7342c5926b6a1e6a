"""The model seam: :class:`ChatModel` and the request it answers."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, final, runtime_checkable

from ..messages import AssistantMessage, Message
from .profiles import profile_of

if TYPE_CHECKING:
    from ..context import RunContext
    from ..state import State
    from ..tools import Tool

__all__ = [
    "STRUCTURED_OUTPUT",
    "ChatModel",
    "ModelRequest",
    "StreamDelta",
    "StreamPart",
    "SupportsAclose",
    "SupportsContextWindow",
    "SupportsMaxTokens",
    "SupportsPromptCaching",
    "SupportsStructuredOutput",
    "context_window_of",
]

STRUCTURED_OUTPUT = "structured_output"
"""The ``ModelRequest.settings`` key asking for a final answer that is JSON matching a
schema: its value is the JSON schema (a dict). Only models that are
:class:`SupportsStructuredOutput` read it; ``response_format`` writes it when it
chose the native strategy."""


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class ModelRequest:
    """Everything one model call gets.

    ``wrap_model_call`` middleware change a request with :meth:`replace`.

    Attributes:
        messages: The conversation, oldest first. Instructions belong in
            ``system_prompt``; a :class:`~deepactors.messages.SystemMessage` here
            is context that changes from call to call (the agent's memory), which
            models send after the system prompt (Claude: after its cache breakpoint).
            The agent loop passes a read-only view of the actor's history
            (:class:`~deepactors.history.MessageView`), made without copying and
            unchanged by whatever the actor does later, so a model may keep the
            request. To send other messages, ``replace`` it with any sequence.
        system_prompt: The full system prompt of this call.
        tools: The tools the model may call (each has ``.name``,
            ``.description``, ``.parameters``).
        settings: Model options for this call (``max_tokens``, ``temperature``,
            provider extras such as cache hints); the model decides what it honours.
        state: The calling actor's state (read-only by convention).
        run: The calling actor's run context.
        model: The model to ask instead of the agent's own (a fallback chain
            sets it); ``None`` for the agent's model.
    """

    messages: Sequence[Message]
    system_prompt: str | None = None
    tools: Sequence[Tool] = ()
    settings: Mapping[str, Any] = field(default_factory=dict)
    model: ChatModel | None = field(default=None, compare=False, repr=False)
    state: State | None = field(default=None, compare=False, repr=False)
    run: RunContext | None = field(default=None, compare=False, repr=False)

    def replace(self, **changes: Any) -> ModelRequest:
        """A copy with some fields changed."""
        return dataclasses.replace(self, **changes)


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class StreamDelta:
    """A piece of a streaming answer (see :class:`~deepactors.events.ModelDelta`)."""

    kind: Literal["text", "thinking", "tool_input"]
    text: str
    index: int = 0


StreamPart = StreamDelta | AssistantMessage
"""What :meth:`ChatModel.stream` yields: deltas, then the whole message last."""


@runtime_checkable
class ChatModel(Protocol):
    """A model the agent loop can call.

    Implementations must work on asyncio and trio (use anyio, or libraries that
    do) and must let cancellation through.
    """

    @property
    def model_name(self) -> str:
        """An id of the model, for logs and usage records."""
        ...

    async def generate(self, request: ModelRequest) -> AssistantMessage:
        """Answer one request."""
        ...

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamPart]:
        """Answer one request piece by piece; the last item is the whole message."""
        ...


@runtime_checkable
class SupportsPromptCaching(Protocol):
    """A model that honours cache breakpoints (``AnthropicPromptCachingMiddleware``).

    Optional beside :class:`ChatModel`: for any other model the caching layer
    would only copy each request, on the hot path, for nothing, so it is left out.
    """

    @property
    def prompt_caching(self) -> bool:
        """Whether cache breakpoints in requests reach the provider."""
        ...


@runtime_checkable
class SupportsMaxTokens(Protocol):
    """A model with an output limit per call, unless ``settings["max_tokens"]`` says otherwise.

    A run's budget reserves that many output tokens for each call.
    """

    @property
    def max_tokens(self) -> int:
        """Output tokens a call may produce at most."""
        ...


@runtime_checkable
class SupportsStructuredOutput(Protocol):
    """A model that can constrain its final answer to a JSON schema itself.

    It honours ``settings[STRUCTURED_OUTPUT]``; ``response_format`` then uses the
    native strategy unless told otherwise.
    """

    @property
    def native_structured_output(self) -> bool:
        """Whether ``settings[STRUCTURED_OUTPUT]`` reaches the provider."""
        ...


@runtime_checkable
class SupportsAclose(Protocol):
    """A model holding resources (an HTTP client) that its owner closes with ``aclose``."""

    async def aclose(self) -> None:
        """Release the model's resources for the current event loop."""
        ...


@runtime_checkable
class SupportsContextWindow(Protocol):
    """A model that knows how many tokens one request may hold.

    Optional beside :class:`ChatModel`: summarization sizes its defaults from it
    (a fraction of the window) and falls back to fixed token counts without it.
    """

    @property
    def context_window(self) -> int | None:
        """The most input tokens a request may have, or None when unknown."""
        ...


def context_window_of(model: object) -> int | None:
    """``model.context_window`` when the model declares a positive one, else its
    profile's (:func:`~deepactors.models.profiles.profile_of`: yours by
    ``register_profile``, or the built-in table by ``model_name``), else None."""
    if isinstance(model, SupportsContextWindow):
        window = model.context_window
        if isinstance(window, int) and window > 0:
            return window
    profile = profile_of(model)
    window = None if profile is None else profile.context_window
    return window if isinstance(window, int) and window > 0 else None
