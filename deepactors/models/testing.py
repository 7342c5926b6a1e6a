"""Deterministic models for tests, demos and benchmarks.

:class:`FunctionModel` answers with a function of the request; :class:`ScriptedModel`
replays a list of answers. Both can simulate latency with ``anyio.sleep``, so
timing behaviour (timeouts, parallelism) is real but the answers are fixed.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import TypeAlias, final

import anyio

from ..errors import ConfigurationError, ScriptExhausted
from ..messages import AssistantMessage, TextBlock, content_text, new_id
from ._base import ModelRequest, StreamDelta, StreamPart

__all__ = ["Answer", "FunctionModel", "ScriptedModel"]

Answer: TypeAlias = AssistantMessage | str
AnswerFn: TypeAlias = Callable[[ModelRequest], Answer | Awaitable[Answer]]


def _as_message(answer: object, model_name: str, seen: set[str]) -> AssistantMessage:
    if isinstance(answer, AssistantMessage):
        # Used as given (no copy on the hot path), except that an answer object
        # returned twice gets a fresh id: the same id would replace the earlier
        # message in the history instead of adding one.
        if answer.id in seen:
            answer = answer.model_copy(update={"id": new_id()})
        seen.add(answer.id)
        return answer
    if isinstance(answer, str):
        return AssistantMessage(content=answer, model=model_name)
    raise ConfigurationError(
        f"a test model's answer must be an AssistantMessage or a str, not {type(answer).__name__}"
    )


class FunctionModel:
    """A model whose answer is ``fn(request)``.

    Args:
        fn: Sync or async; gets a :class:`ModelRequest` and returns an
            :class:`~deepactors.messages.AssistantMessage` or a ``str``.
        latency: Seconds to ``anyio.sleep`` before each answer.
        name: The model name reported in messages and logs.
        stream_chunk: When streaming, the text is sent in pieces of this many
            characters.
        context_window: The window the model declares (tokens), for middleware
            that size themselves from it (summarization); None: undeclared.

    Attributes:
        calls: How many requests this model has answered or is answering.
    """

    def __init__(
        self,
        fn: AnswerFn,
        *,
        latency: float = 0.0,
        name: str = "function-model",
        stream_chunk: int = 8,
        context_window: int | None = None,
    ) -> None:
        if latency < 0:
            raise ConfigurationError("latency must be >= 0")
        if context_window is not None and context_window < 1:
            raise ConfigurationError("context_window must be a positive number of tokens")
        self._fn = fn
        self.latency = latency
        self._name = name
        self._chunk = max(1, stream_chunk)
        self.calls = 0
        self._seen: set[str] = set()
        self._context_window = context_window

    @property
    def model_name(self) -> str:
        """The name given at construction."""
        return self._name

    @property
    def context_window(self) -> int | None:
        """The window given at construction (None: undeclared)."""
        return self._context_window

    async def generate(self, request: ModelRequest) -> AssistantMessage:
        """Sleep ``latency`` seconds, then answer with ``fn(request)``."""
        self.calls += 1
        if self.latency:
            await anyio.sleep(self.latency)
        produced = self._fn(request)
        # isawaitable is a TypeGuard: it covers async functions and sync ones returning awaitables.
        answer = await produced if inspect.isawaitable(produced) else produced
        return _as_message(answer, self._name, self._seen)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamPart]:
        """The same answer as :meth:`generate`, its text sent in small pieces first."""
        message = await self.generate(request)
        if isinstance(message.content, str):
            blocks = [message.content] if message.content else []
        else:
            blocks = [b.text for b in message.content if isinstance(b, TextBlock)]
        for index, text in enumerate(blocks):
            for start in range(0, len(text), self._chunk):
                yield StreamDelta(kind="text", text=text[start : start + self._chunk], index=index)
        yield message


@final
class ScriptedModel(FunctionModel):
    """A model that replays answers in order, one per call.

    Args:
        answers: :class:`~deepactors.messages.AssistantMessage`, ``str``, or a
            function of the request for an answer that depends on it.
        latency: Seconds to sleep before each answer.
        name: The model name.
        context_window: The window the model declares, as for :class:`FunctionModel`.

    Raises (at call time):
        ScriptExhausted: When called after the last answer, naming the call number.
    """

    def __init__(
        self,
        answers: Iterable[Answer | AnswerFn],
        *,
        latency: float = 0.0,
        name: str = "scripted-model",
        context_window: int | None = None,
    ) -> None:
        self._answers = list(answers)
        self._next = 0
        # One script may be shared by subagents whose sync tools run in threads.
        self._lock = threading.Lock()
        self.requests: list[ModelRequest] = []
        super().__init__(self._replay, latency=latency, name=name, context_window=context_window)

    def _replay(self, request: ModelRequest) -> Answer | Awaitable[Answer]:
        with self._lock:
            i = self._next
            if i >= len(self._answers):
                last = content_text(request.messages[-1].content) if request.messages else ""
                raise ScriptExhausted(
                    f"{self.model_name} has {len(self._answers)} answer(s) and was called for the "
                    f"{_ordinal(i + 1)} time (last message: {last[:80]!r})"
                )
            self._next = i + 1
            self.requests.append(request)
        answer = self._answers[i]
        if callable(answer):
            return answer(request)
        return answer

    @property
    def remaining(self) -> int:
        """Answers not used yet."""
        return len(self._answers) - self._next


def _ordinal(n: int) -> str:
    """``1st``, ``2nd``, ``3rd``, ``4th``, ``11th``, ``12th``, ``13th``, ``21st``..."""
    if 10 <= n % 100 <= 20:
        return f"{n}th"
    return f"{n}{ {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th') }"
