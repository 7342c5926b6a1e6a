"""What LangChain's middleware hooks see and give back, as deepactors' values.

The state as LangChain's ``AgentState`` (:class:`StateView`), LangGraph's
``Runtime`` and ``ToolRuntime``, deepactors tools as ``BaseTool`` views, messages
and tool results both ways, and the channels a middleware's ``state_schema``
adds. Used by :mod:`deepactors.langchain._middleware`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any, NoReturn

import anyio.from_thread
from langchain_core.messages import BaseMessage
from langchain_core.messages import RemoveMessage as LCRemoveMessage
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.prebuilt.tool_node import ToolRuntime as LGToolRuntime
from langgraph.runtime import Runtime as LGRuntime
from langgraph.types import Command as LGCommand

from ..assembly import schema_channels as state_schema_channels
from ..context import RunContext
from ..errors import ConfigurationError
from ..events import CustomEvent
from ..hooks import ToolCallRequest
from ..messages import Message, ToolMessage, to_message
from ..models import ChatModel
from ..state import Channel, RemoveMessage, State, default_channels
from ..tools import Command, Tool
from ._chat_model import adapt_model
from ._messages import from_langchain, to_langchain

__all__ = [
    "StateView",
    "lc_runtime",
    "lc_tool_result",
    "lc_tool_runtime",
    "our_message",
    "our_model",
    "schema_channels",
    "tool_view",
]

# Keys every agent has already (LangChain's AgentState's among them).
_AGENT_STATE = frozenset({"messages", "jump_to", "structured_response", *default_channels()})


class StateView(Mapping[str, object]):
    """The agent's state as a LangChain hook reads it, converted key by key when read.

    Messages are ``langchain_core`` objects, files ``FileData`` dicts, todos dicts;
    a key never written (``None``, or no todos) is absent, as in LangGraph.
    """

    __slots__ = ("_cache", "_state")

    def __init__(self, state: State) -> None:
        self._state = state
        self._cache: dict[str, object] = {}

    def __getitem__(self, key: str) -> object:
        try:
            return self._cache[key]
        except KeyError:
            pass
        value = self._state[key]
        if _unwritten(key, value):
            raise KeyError(key)
        converted = self._cache[key] = _to_lc(key, value)
        return converted

    def __iter__(self) -> Iterator[str]:
        return (k for k in self._state if not _unwritten(k, self._state[k]))

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __repr__(self) -> str:
        return f"StateView({dict(self)!r})"


def _unwritten(key: str, value: object) -> bool:
    return value is None or (key == "todos" and not value)


def _to_lc(key: str, value: Any) -> object:
    match key:
        case "messages":
            return [to_langchain(m) for m in value]
        case "files":
            return {path: record.to_file_data() for path, record in value.items()}
        case "todos":
            return [t.model_dump(mode="json") if hasattr(t, "model_dump") else t for t in value]
        case _:
            return value


def _writer(run: RunContext) -> Callable[[object], None]:
    def write(data: object) -> None:
        emit = run.emit
        if emit is None:
            return
        event = CustomEvent(path=run.path, run_id=run.run_id, data=data)
        if threading.get_ident() == run.loop_thread:
            emit(event)
        else:
            anyio.from_thread.run_sync(emit, event)  # from a sync hook's thread

    return write


def _context(run: RunContext) -> object:
    context = run.context
    return None if context is None or (isinstance(context, Mapping) and not context) else context


def lc_runtime(run: RunContext) -> LGRuntime[Any]:
    return LGRuntime(context=_context(run), store=run.store, stream_writer=_writer(run))  # type: ignore[arg-type]


def lc_tool_runtime(request: ToolCallRequest, view: StateView) -> LGToolRuntime[Any, Any]:
    run = request.run
    configurable = {} if run.thread_id is None else {"thread_id": run.thread_id}
    return LGToolRuntime(
        state=view,
        context=_context(run),
        config={"configurable": configurable, "metadata": {"lc_agent_name": run.agent_name}},
        stream_writer=_writer(run),
        tool_call_id=request.call.id,
        store=run.store,  # type: ignore[arg-type]
    )


def tool_view(tool: Tool) -> BaseTool:
    """A deepactors tool as a ``BaseTool`` a middleware can read (name, description,
    schema); the agent runs the tool itself, so calling the view is refused."""

    def refuse(**_: object) -> NoReturn:
        raise ConfigurationError(f"tool {tool.name!r} runs through the agent's handler")

    return StructuredTool(
        name=tool.name, description=tool.description, args_schema=dict(tool.parameters), func=refuse
    )


def our_model(model: object) -> ChatModel:
    if isinstance(model, ChatModel):
        return model
    adapted = adapt_model(model)
    if adapted is None:
        raise ConfigurationError(f"a middleware set the request's model to {model!r}, not a model")
    return adapted


def our_message(value: Any) -> Message | RemoveMessage:
    if isinstance(value, LCRemoveMessage):
        return RemoveMessage(id=value.id or "")
    if isinstance(value, BaseMessage):
        return from_langchain(value)
    if isinstance(value, RemoveMessage):
        return value
    return to_message(value)


def lc_tool_result(result: ToolMessage | Command) -> object:
    if isinstance(result, Command):
        update = dict(result.update or {})
        if "messages" in update:
            update["messages"] = [
                m if isinstance(m, RemoveMessage) else to_langchain(m) for m in update["messages"]
            ]
        return LGCommand(update=update)
    return to_langchain(result)


# -- state_schema ------------------------------------------------------------------


def schema_channels(middleware: object) -> tuple[dict[str, Channel], tuple[str, ...]]:
    """Channels for the keys ``middleware.state_schema`` adds to LangChain's AgentState
    (see :func:`deepactors.assembly.schema_channels`)."""
    schema = getattr(middleware, "state_schema", None)
    if schema is None:
        return {}, ()
    owner = type(middleware).__qualname__
    return state_schema_channels(schema, _AGENT_STATE, owner=owner)
