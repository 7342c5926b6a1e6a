"""Structured output: a final answer that fits a schema, in ``state["structured_response"]``.

Two ways to get it:

* **tool** (any model): a tool named after the schema, whose arguments are the
  answer; the model calls it to finish (deepagents' and LangChain's
  ``ToolStrategy``). The run ends once a call of it validates.
* **native** (models that are
  :class:`~deepactors.models.SupportsStructuredOutput`): the request asks the
  provider to constrain the final answer's text to the schema (Anthropic's
  structured outputs); the text is parsed and validated when the model answers
  without tool calls.

An answer that does not fit goes back to the model with what is wrong, up to
``max_retries`` times; then :class:`~deepactors.errors.StructuredOutputError`
carries the last problem.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import UnionType
from typing import Any, Literal, Union, assert_never, final, get_origin

import anyio.to_thread
from pydantic import create_model

from ..context import RunContext, RunKey
from ..errors import ConfigurationError, StructuredOutputError, ToolError
from ..hooks import AgentMiddleware, HookResult, ModelHandler, ToolCallRequest, ToolHandler
from ..messages import AssistantMessage, ToolMessage, UserMessage
from ..models import STRUCTURED_OUTPUT, ChatModel, ModelRequest, SupportsStructuredOutput
from ..state import Channel, State
from ..tools import Command, Tool
from ._schema import OutputSchema

__all__ = [
    "AutoStrategy",
    "ProviderStrategy",
    "ResponseFormat",
    "StructuredOutputMiddleware",
    "ToolStrategy",
]

DEFAULT_MAX_RETRIES = 3

# Parsing off the event loop above this size (a model's answer is rarely near it).
_BIG_ANSWER = 64_000
_FENCE = re.compile(r"^\s*```(?:json)?\s*\n(.*)\n\s*```\s*$", re.DOTALL)


@final
@dataclass(frozen=True, slots=True)
class ToolStrategy:
    """Get the structured answer through a tool call (works with any model).

    Attributes:
        schema: A pydantic model class, a dataclass, a TypedDict, or a JSON schema
            dict (of an object).
        tool_name: The tool's name (default: the schema's name).
        max_retries: Answers that do not fit, sent back to be fixed, before
            :class:`~deepactors.errors.StructuredOutputError`.
    """

    schema: object
    tool_name: str | None = None
    max_retries: int = DEFAULT_MAX_RETRIES


@final
@dataclass(frozen=True, slots=True)
class ProviderStrategy:
    """Get the structured answer from the provider's own structured output (native).

    Attributes:
        schema: As for :class:`ToolStrategy`.
        max_retries: As for :class:`ToolStrategy`.
    """

    schema: object
    max_retries: int = DEFAULT_MAX_RETRIES


@final
@dataclass(frozen=True, slots=True)
class AutoStrategy:
    """Native where the model supports it, else the tool (what a bare schema means)."""

    schema: object
    max_retries: int = DEFAULT_MAX_RETRIES


ResponseFormat = ToolStrategy | ProviderStrategy | AutoStrategy
"""A ``response_format`` with its strategy (a bare schema means :class:`AutoStrategy`)."""


def _from_langchain(fmt: Any) -> Any:
    """LangChain's ``ToolStrategy`` / ``ProviderStrategy`` / ``AutoStrategy``
    (``langchain.agents.structured_output``) as deepactors' own; anything else as is.

    Raises:
        ConfigurationError: An option with no counterpart here, saying what to write.
    """
    cls = type(fmt)
    if not cls.__module__.startswith("langchain.agents.structured_output"):
        return fmt
    schema = fmt.schema
    if isinstance(schema, UnionType) or get_origin(schema) is Union:
        raise ConfigurationError(
            f"response_format {cls.__name__} with a union of schemas: give one schema "
            "(a model class whose fields cover the cases)"
        )
    match cls.__name__:
        case "ToolStrategy":
            if getattr(fmt, "tool_message_content", None) is not None:
                raise ConfigurationError(
                    "ToolStrategy(tool_message_content=...) has no counterpart: drop it"
                )
            handle = getattr(fmt, "handle_errors", True)
            if handle is True:
                return ToolStrategy(schema)
            if handle is False:
                return ToolStrategy(schema, max_retries=0)
            raise ConfigurationError(
                f"ToolStrategy(handle_errors={handle!r}) has no counterpart: an answer that "
                "does not fit goes back to the model with what is wrong, up to max_retries "
                "times; use deepactors.middleware.ToolStrategy(schema, max_retries=n)"
            )
        case "ProviderStrategy":
            return ProviderStrategy(schema)
        case "AutoStrategy":
            return AutoStrategy(schema)
    raise ConfigurationError(f"response_format: LangChain's {cls.__name__} is not supported")


class _Attempts:
    __slots__ = ("failed", "last")

    def __init__(self) -> None:
        self.failed = 0
        self.last = ""


class StructuredOutputMiddleware(AgentMiddleware):
    """Makes the run end with ``state["structured_response"]`` fitting a schema.

    ``create_deep_agent(response_format=...)`` adds it (and each subagent with a
    ``response_format`` gets its own). The value is an instance of the schema for
    a model class or a dataclass, a dict for a TypedDict or a JSON schema; it is
    checkpointed as JSON and read back as that type. A new user message clears
    the previous answer, so ``result["structured_response"]`` is this run's.

    Args:
        response_format: A schema (the strategy is then chosen for ``model``), or a
            :class:`ToolStrategy`, :class:`ProviderStrategy` or :class:`AutoStrategy`.
        model: The agent's model, to choose the strategy for (None: the tool).

    Raises:
        ConfigurationError: A schema that is not an object type, a bad retry count,
            or ``ProviderStrategy`` for a model that has no native structured output.
    """

    def __init__(self, response_format: object, *, model: ChatModel | None = None) -> None:
        fmt = _from_langchain(response_format)
        if not isinstance(fmt, ToolStrategy | ProviderStrategy | AutoStrategy):
            fmt = AutoStrategy(fmt)
        if isinstance(fmt.max_retries, bool) or fmt.max_retries < 0:
            raise ConfigurationError(f"max_retries must be 0 or more, not {fmt.max_retries!r}")
        native = isinstance(model, SupportsStructuredOutput) and model.native_structured_output
        self.strategy: Literal["tool", "native"]
        match fmt:
            case ToolStrategy():
                self.strategy = "tool"
            case ProviderStrategy():
                if model is not None and not native:
                    raise ConfigurationError(
                        f"model {model.model_name!r} has no native structured output; use "
                        "ToolStrategy(schema), or a bare schema, which picks the tool for it"
                    )
                self.strategy = "native"
            case AutoStrategy():
                self.strategy = "native" if native else "tool"
            case _:
                assert_never(fmt)
        self.schema = OutputSchema.of(fmt.schema)
        self.max_retries = fmt.max_retries
        custom = fmt.tool_name if isinstance(fmt, ToolStrategy) else None
        self.tool_name: str = custom or self.schema.name
        self._attempts = RunKey(f"{self.name}.attempts", _Attempts)
        self.channels = {
            "structured_response": Channel(
                private=True, encode=self.schema.encode, decode=self.schema.decode
            )
        }
        if self.strategy == "tool":
            self.tools = (self._answer_tool(),)
            self.system_prompt = (
                "## Final answer\nWhen you are done, give your final answer by calling the "
                f"`{self.tool_name}` tool: its arguments are the answer. Call it once, and "
                "only when the work is finished."
            )

    def _answer_tool(self) -> Tool:
        name = self.tool_name

        async def answered_by_middleware(**_: object) -> str:
            # Calls never get here: wrap_tool_call answers them. A copy of this
            # tool given to an agent without the middleware fails loudly instead.
            raise ToolError(f"{name} is answered by StructuredOutputMiddleware")

        return Tool(
            name=name,
            description=self.schema.description
            or f"Give your final answer as a {self.schema.name}. Call this once, to finish.",
            parameters=self.schema.json_schema,
            fn=answered_by_middleware,
            args_model=_NO_ARGS,
            is_async=True,
        )

    # -- hooks -------------------------------------------------------------------

    async def before_agent(self, state: State, run: RunContext) -> HookResult:
        # A new question: the last run's answer is not this one's.
        messages = state.messages
        fresh = bool(messages) and isinstance(messages[-1], UserMessage)
        if fresh and state["structured_response"] is not None:
            return {"structured_response": None}
        return None

    async def before_model(self, state: State, run: RunContext) -> HookResult:
        attempts = run.local(self._attempts)
        if attempts.failed > self.max_retries:
            raise self._error(attempts)
        if self.strategy == "tool" and self._answered(state):
            return {"jump_to": "end"}
        return None

    async def wrap_model_call(
        self, request: ModelRequest, handler: ModelHandler
    ) -> AssistantMessage:
        if self.strategy == "native":
            settings = {**request.settings, STRUCTURED_OUTPUT: self.schema.json_schema}
            request = request.replace(settings=settings)
        return await handler(request)

    async def after_model(self, state: State, run: RunContext) -> HookResult:
        message = state.messages[-1]
        if not isinstance(message, AssistantMessage) or message.tool_calls:
            return None
        if self.strategy == "tool":
            return self._retry(
                run,
                f"you answered without calling `{self.tool_name}`; give your final answer by "
                "calling it",
            )
        value, problem = await self._parse_native(message)
        if problem is None:
            return {"structured_response": value}
        return self._retry(run, f"{problem}. Answer again with only the JSON")

    async def wrap_tool_call(
        self, request: ToolCallRequest, handler: ToolHandler
    ) -> ToolMessage | Command:
        call = request.call
        if self.strategy != "tool" or call.name != self.tool_name:
            return await handler(request)
        try:
            value = await self._validate(call.args)
        except ValueError as exc:
            attempts = request.run.local(self._attempts)
            attempts.failed += 1
            attempts.last = str(exc)
            return ToolMessage(
                tool_call_id=call.id,
                name=call.name,
                content=f"Your answer does not fit {self.schema.name}: {exc}\n"
                f"Call {self.tool_name} again with a corrected answer.",
                status="error",
            )
        text = json.dumps(self.schema.encode(value), ensure_ascii=False)
        return Command(update={"structured_response": value}, result=text)

    # -- helpers -------------------------------------------------------------------

    def _answered(self, state: State) -> bool:
        """Whether the newest tool step holds a successful call of the answer tool."""
        messages = state.messages
        for i in range(len(messages) - 1, -1, -1):
            m = messages[i]
            if not isinstance(m, ToolMessage):
                return False
            if m.name == self.tool_name and m.status == "success":
                return True
        return False

    def _retry(self, run: RunContext, problem: str) -> HookResult:
        attempts = run.local(self._attempts)
        attempts.failed += 1
        attempts.last = problem
        if attempts.failed > self.max_retries:
            raise self._error(attempts)
        return {"messages": [UserMessage(content=f"{problem}.")], "jump_to": "model"}

    def _error(self, attempts: _Attempts) -> StructuredOutputError:
        return StructuredOutputError(
            f"the model's answer did not fit {self.schema.name} after {attempts.failed} "
            f"attempt(s); the last problem: {attempts.last}",
            last_error=attempts.last,
        )

    async def _parse_native(self, message: AssistantMessage) -> tuple[object, str | None]:
        if message.stop_reason == "refusal":
            return None, "you declined to answer"
        text = message.text
        fenced = _FENCE.match(text)
        if fenced:
            text = fenced.group(1)
        if message.stop_reason == "max_tokens":
            return None, "your answer was cut off at the output limit; make it shorter"
        try:
            if len(text) > _BIG_ANSWER:
                data = await anyio.to_thread.run_sync(json.loads, text)
            else:
                data = json.loads(text)
        except ValueError as exc:
            return None, f"your answer is not valid JSON ({exc})"
        try:
            return await self._validate(data), None
        except ValueError as exc:
            return None, f"your answer does not fit {self.schema.name}: {exc}"

    async def _validate(self, data: object) -> object:
        if isinstance(data, Mapping) and len(data) > _BIG_ANSWER // 64:
            return await anyio.to_thread.run_sync(self.schema.validate, data)
        return self.schema.validate(data)


# The answer tool's ``args_model``: never used, the middleware answers its calls.
_NO_ARGS = create_model("AnswerArgs")
