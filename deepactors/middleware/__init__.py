"""Middleware: hooks around the agent loop, and the built-in stack.

The hook base (:class:`AgentMiddleware` and the one-hook decorators) lives in
:mod:`deepactors.hooks`, below the actor runtime; it is re-exported here.
"""

from __future__ import annotations

from .._core.public import publish as _publish
from ..hooks import AgentMiddleware as AgentMiddleware
from ..hooks import HookResult as HookResult
from ..hooks import JumpTo as JumpTo
from ..hooks import ModelHandler as ModelHandler
from ..hooks import ToolCallRequest as ToolCallRequest
from ..hooks import ToolHandler as ToolHandler
from ..hooks import after_agent as after_agent
from ..hooks import after_model as after_model
from ..hooks import before_agent as before_agent
from ..hooks import before_model as before_model
from ..hooks import wrap_model_call as wrap_model_call
from ..hooks import wrap_tool_call as wrap_tool_call
from ._async_subagents import DEFAULT_MAX_BACKGROUND_TASKS as DEFAULT_MAX_BACKGROUND_TASKS
from ._async_subagents import AsyncSubAgentMiddleware as AsyncSubAgentMiddleware
from ._caching import AnthropicPromptCachingMiddleware as AnthropicPromptCachingMiddleware
from ._context_editing import ContextEditingMiddleware as ContextEditingMiddleware
from ._context_stack import context_stack as context_stack
from ._fallback import ModelFallbackMiddleware as ModelFallbackMiddleware
from ._filesystem import FilesystemMiddleware as FilesystemMiddleware
from ._hitl import HumanInTheLoopMiddleware as HumanInTheLoopMiddleware
from ._limits import ModelCallLimitMiddleware as ModelCallLimitMiddleware
from ._limits import ToolCallLimitMiddleware as ToolCallLimitMiddleware
from ._memory import MemoryMiddleware as MemoryMiddleware
from ._patch import PatchToolCallsMiddleware as PatchToolCallsMiddleware
from ._permissions import FilesystemPermissionMiddleware as FilesystemPermissionMiddleware
from ._retry import ModelRetryMiddleware as ModelRetryMiddleware
from ._skill_parse import Skill as Skill
from ._skills import SkillsMiddleware as SkillsMiddleware
from ._structured import AutoStrategy as AutoStrategy
from ._structured import ProviderStrategy as ProviderStrategy
from ._structured import ResponseFormat as ResponseFormat
from ._structured import StructuredOutputMiddleware as StructuredOutputMiddleware
from ._structured import ToolStrategy as ToolStrategy
from ._subagents import DEFAULT_MAX_CONCURRENT_SUBAGENTS as DEFAULT_MAX_CONCURRENT_SUBAGENTS
from ._subagents import FORK_PREAMBLE as FORK_PREAMBLE
from ._subagents import GENERAL_PURPOSE as GENERAL_PURPOSE
from ._subagents import GENERAL_PURPOSE_DESCRIPTION as GENERAL_PURPOSE_DESCRIPTION
from ._subagents import GENERAL_PURPOSE_PROMPT as GENERAL_PURPOSE_PROMPT
from ._subagents import SubAgentMiddleware as SubAgentMiddleware
from ._subagents import SubAgentSpec as SubAgentSpec
from ._subagents import aclose_tree_models as aclose_tree_models
from ._subagents import tree_models as tree_models
from ._summarization import SummarizationMiddleware as SummarizationMiddleware
from ._todo import TodoListMiddleware as TodoListMiddleware
from ._tokens import approximate_tokens as approximate_tokens
from ._tool_retry import ToolRetryMiddleware as ToolRetryMiddleware

__all__ = [
    "DEFAULT_MAX_BACKGROUND_TASKS",
    "DEFAULT_MAX_CONCURRENT_SUBAGENTS",
    "FORK_PREAMBLE",
    "GENERAL_PURPOSE",
    "GENERAL_PURPOSE_DESCRIPTION",
    "GENERAL_PURPOSE_PROMPT",
    "AgentMiddleware",
    "AnthropicPromptCachingMiddleware",
    "AsyncSubAgentMiddleware",
    "AutoStrategy",
    "ContextEditingMiddleware",
    "FilesystemMiddleware",
    "FilesystemPermissionMiddleware",
    "HookResult",
    "HumanInTheLoopMiddleware",
    "JumpTo",
    "MemoryMiddleware",
    "ModelCallLimitMiddleware",
    "ModelFallbackMiddleware",
    "ModelHandler",
    "ModelRetryMiddleware",
    "PatchToolCallsMiddleware",
    "ProviderStrategy",
    "ResponseFormat",
    "Skill",
    "SkillsMiddleware",
    "StructuredOutputMiddleware",
    "SubAgentMiddleware",
    "SubAgentSpec",
    "SummarizationMiddleware",
    "TodoListMiddleware",
    "ToolCallLimitMiddleware",
    "ToolCallRequest",
    "ToolHandler",
    "ToolRetryMiddleware",
    "ToolStrategy",
    "aclose_tree_models",
    "after_agent",
    "after_model",
    "approximate_tokens",
    "before_agent",
    "before_model",
    "context_stack",
    "tree_models",
    "wrap_model_call",
    "wrap_tool_call",
]

# Reprs and tracebacks name the public package, not the private module (see _core.public).
_publish(__all__, __name__, globals())
