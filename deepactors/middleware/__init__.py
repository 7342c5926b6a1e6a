"""Middleware: hooks around the agent loop, and the built-in stack."""

from __future__ import annotations

from ._base import AgentMiddleware as AgentMiddleware
from ._base import HookResult as HookResult
from ._base import JumpTo as JumpTo
from ._base import ModelHandler as ModelHandler
from ._base import ToolCallRequest as ToolCallRequest
from ._base import ToolHandler as ToolHandler
from ._base import after_agent as after_agent
from ._base import after_model as after_model
from ._base import before_agent as before_agent
from ._base import before_model as before_model
from ._base import wrap_model_call as wrap_model_call
from ._base import wrap_tool_call as wrap_tool_call
from ._caching import AnthropicPromptCachingMiddleware as AnthropicPromptCachingMiddleware
from ._filesystem import FilesystemMiddleware as FilesystemMiddleware
from ._hitl import HumanInTheLoopMiddleware as HumanInTheLoopMiddleware
from ._patch import PatchToolCallsMiddleware as PatchToolCallsMiddleware
from ._retry import ModelRetryMiddleware as ModelRetryMiddleware
from ._subagents import SubAgentMiddleware as SubAgentMiddleware
from ._subagents import SubAgentSpec as SubAgentSpec
from ._todo import TodoListMiddleware as TodoListMiddleware
