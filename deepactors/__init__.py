"""deepactors: a deep agent harness on an async actor runtime, for asyncio and trio.

Everyday use needs only this module::

    from deepactors import create_deep_agent

    agent = create_deep_agent(model="anthropic:claude-sonnet-5-5", tools=[search])
    result = await agent.ainvoke({"messages": [{"role": "user", "content": "..."}]})
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import events as events
from . import persistence as _persistence
from ._core.public import publish as _publish
from .actors import EventStream as EventStream
from .actors import RunHandle as RunHandle
from .actors import Runtime as Runtime
from .actors import open_runtime as open_runtime
from .agent import DeepAgent as DeepAgent
from .assembly import AgentOptions as AgentOptions
from .assembly import create_deep_agent as create_deep_agent
from .backends import CompositeBackend as CompositeBackend
from .backends import FilesystemBackend as FilesystemBackend
from .backends import FilesystemPermission as FilesystemPermission
from .backends import LocalShellBackend as LocalShellBackend
from .backends import StateBackend as StateBackend
from .backends import StoreBackend as StoreBackend
from .budget import Budget as Budget
from .budget import BudgetReport as BudgetReport
from .context import RunContext as RunContext
from .context import ToolRuntime as ToolRuntime
from .errors import BudgetExceeded as BudgetExceeded
from .errors import CallLimitExceeded as CallLimitExceeded
from .errors import DeepActorsError as DeepActorsError
from .errors import InputError as InputError
from .errors import RunCancelled as RunCancelled
from .errors import StepLimitExceeded as StepLimitExceeded
from .errors import StructuredOutputError as StructuredOutputError
from .errors import ToolError as ToolError
from .messages import AssistantMessage as AssistantMessage
from .messages import SystemMessage as SystemMessage
from .messages import TextBlock as TextBlock
from .messages import ToolCall as ToolCall
from .messages import ToolMessage as ToolMessage
from .messages import Usage as Usage
from .messages import UserMessage as UserMessage
from .middleware import AgentMiddleware as AgentMiddleware
from .middleware import AutoStrategy as AutoStrategy
from .middleware import ProviderStrategy as ProviderStrategy
from .middleware import ToolStrategy as ToolStrategy
from .models import ChatModel as ChatModel
from .models import FunctionModel as FunctionModel
from .models import ModelRequest as ModelRequest
from .models import ScriptedModel as ScriptedModel
from .persistence import MemoryCheckpointer as MemoryCheckpointer
from .persistence import MemoryStore as MemoryStore
from .persistence import SqliteCheckpointer as SqliteCheckpointer
from .persistence import SqliteStore as SqliteStore
from .persistence import open_checkpointer as open_checkpointer
from .state import AgentResult as AgentResult
from .state import FileRecord as FileRecord
from .state import Todo as Todo
from .tools import Command as Command
from .tools import Tool as Tool
from .tools import tool as tool

if TYPE_CHECKING:
    from .persistence import PostgresCheckpointer as PostgresCheckpointer
    from .persistence import PostgresStore as PostgresStore

_POSTGRES = frozenset({"PostgresCheckpointer", "PostgresStore"})


def __getattr__(name: str) -> Any:
    # psycopg is the optional [postgres] extra: deepactors.persistence resolves
    # these on first access (ImportError naming the extra when it is missing).
    # Not in __all__, so that `from deepactors import *` works without psycopg.
    if name in _POSTGRES:
        return getattr(_persistence, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "AgentMiddleware",
    "AgentOptions",
    "AgentResult",
    "AssistantMessage",
    "AutoStrategy",
    "Budget",
    "BudgetExceeded",
    "BudgetReport",
    "CallLimitExceeded",
    "ChatModel",
    "Command",
    "CompositeBackend",
    "DeepActorsError",
    "DeepAgent",
    "EventStream",
    "FileRecord",
    "FilesystemBackend",
    "FilesystemPermission",
    "FunctionModel",
    "InputError",
    "LocalShellBackend",
    "MemoryCheckpointer",
    "MemoryStore",
    "ModelRequest",
    "ProviderStrategy",
    "RunCancelled",
    "RunContext",
    "RunHandle",
    "Runtime",
    "ScriptedModel",
    "SqliteCheckpointer",
    "SqliteStore",
    "StateBackend",
    "StepLimitExceeded",
    "StoreBackend",
    "StructuredOutputError",
    "SystemMessage",
    "TextBlock",
    "Todo",
    "Tool",
    "ToolCall",
    "ToolError",
    "ToolMessage",
    "ToolRuntime",
    "ToolStrategy",
    "Usage",
    "UserMessage",
    "create_deep_agent",
    "events",
    "open_checkpointer",
    "open_runtime",
    "tool",
]

# Reprs and tracebacks name the public package, not the private module (see _core.public).
_publish(__all__, __name__, globals())
