"""The parts ``create_deep_agent`` builds an agent tree from: shared settings,
tool sources, the structured-answer layer, the resolved spec, and models."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .actors import AgentSpec
from .errors import ConfigurationError
from .middleware import (
    AgentMiddleware,
    AnthropicPromptCachingMiddleware,
    StructuredOutputMiddleware,
)
from .models import ChatModel, SupportsPromptCaching, resolve_model
from .state import Channel, default_channels
from .tools import Tool, _is_langchain_tool, as_tool, as_tools

if TYPE_CHECKING:
    from .backends import Backend, PermissionRules
    from .persistence import Checkpointer, Store

__all__ = ["DEFAULT_PROMPT", "ModelCache", "Parts", "answer_layer", "build_spec", "tool_sources"]

DEFAULT_PROMPT = (
    "You are a capable assistant that works step by step: plan longer tasks, use your "
    "tools to do the work rather than guessing, and finish with a clear answer."
)


def tool_sources(items: Any, mcp_servers: Any) -> tuple[list[Tool], list[AgentMiddleware]]:
    """Tools, and the middleware giving MCP servers' tools (in ``items`` or ``mcp_servers``)."""
    # LangChain tools are made Tools first: what is neither a Tool nor callable is
    # taken for an MCP server below.
    items = [as_tool(t) if _is_langchain_tool(t) else t for t in items or ()]
    if mcp_servers or not all(isinstance(t, Tool) or callable(t) for t in items or ()):
        from . import mcp  # an optional integration: imported only when used

        return mcp.tool_sources(items, mcp_servers)
    return as_tools(items), []


def answer_layer(response_format: Any, model: ChatModel) -> list[AgentMiddleware]:
    if response_format is None:
        return []
    return [StructuredOutputMiddleware(response_format, model=model)]


class Parts:
    """What every agent of one tree is built with (the parent's, unless a child overrides)."""

    __slots__ = (
        "backend",
        "checkpointer",
        "debug",
        "max_steps",
        "mcp",
        "models",
        "rules",
        "saves",
        "store",
        "tail",
        "tools",
    )

    def __init__(
        self,
        *,
        tools: Sequence[Tool],
        backend: Backend,
        store: Store | None,
        debug: bool,
        max_steps: int,
        tail: Sequence[AgentMiddleware],
        models: ModelCache,
        checkpointer: Checkpointer | None,
        rules: PermissionRules | None,
        saves: bool,
        mcp: Sequence[AgentMiddleware] = (),
    ) -> None:
        self.checkpointer = checkpointer
        self.mcp = mcp  # MCP servers' tools: inherited with the tools
        self.tools = tools
        self.backend = backend  # unguarded: a subagent may bring its own permissions
        self.store = store
        self.debug = debug
        self.max_steps = max_steps
        self.tail = tail
        self.models = models
        self.rules = rules
        self.saves = saves


def build_spec(
    *,
    model: ChatModel,
    tools: Sequence[Tool],
    system_prompt: str | None,
    stack: Sequence[AgentMiddleware],
    parts: Parts,
    backend: Backend,
    name: str | None,
    checkpointer: Checkpointer | None = None,
    context_schema: Any = None,
) -> AgentSpec:
    if not (isinstance(model, SupportsPromptCaching) and model.prompt_caching):
        # Cache hints are for Claude; for any other model the layer would only
        # copy each request, on the hot path, for nothing.
        stack = [mw for mw in stack if type(mw) is not AnthropicPromptCachingMiddleware]
    all_tools = {t.name: t for t in tools}
    declared: dict[str, Channel] = {}
    prompt_parts = [system_prompt or DEFAULT_PROMPT]
    for mw in stack:
        for t in mw.tools:
            if t.name in all_tools:
                raise ConfigurationError(
                    f"tool {t.name!r} of {mw.name} clashes with another tool of that name"
                )
            all_tools[t.name] = t
        for key, ch in mw.channels.items():
            declared.setdefault(key, ch)
        if mw.system_prompt:
            prompt_parts.append(mw.system_prompt)
    # A middleware's channel replaces a built-in one of the same name (the
    # structured answer's channel knows how to read its type back from JSON).
    channels: dict[str, Channel] = {**default_channels(), **declared}
    return AgentSpec(
        name=name or "main",
        model=model,
        tools=all_tools,
        system_prompt="\n\n".join(prompt_parts),
        middleware=tuple(stack),
        channels=channels,
        max_steps=parts.max_steps,
        debug=parts.debug,
        backend=backend,
        store=parts.store,
        checkpointer=checkpointer,
        context_schema=context_schema,
    )


class ModelCache:
    """Resolves model strings once per agent tree.

    A subagent naming the same ``"anthropic:..."`` string as its parent gets the
    same model object, so they share its client and its request limiter.
    """

    def __init__(self) -> None:
        self._models: dict[str, ChatModel] = {}

    def resolve(self, model: str | ChatModel | None) -> ChatModel:
        if model is not None and not isinstance(model, str):
            return resolve_model(model)
        key = model or ""
        if key not in self._models:
            self._models[key] = resolve_model(model)
        return self._models[key]
