"""The parts ``create_deep_agent`` builds an agent tree from: shared settings,
tool sources, the structured-answer layer, the resolved spec, and models."""

from __future__ import annotations

import inspect
import threading
import weakref
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import (
    TYPE_CHECKING,
    Annotated,
    Any,
    NotRequired,
    Required,
    cast,
    get_args,
    get_origin,
    get_type_hints,
)

from ..actors import AgentSpec
from ..errors import ConfigurationError
from ..limits import NO_BREAKPOINTS, Breakpoints
from ..middleware import (
    AgentMiddleware,
    AnthropicPromptCachingMiddleware,
    StructuredOutputMiddleware,
)
from ..models import ChatModel, SupportsPromptCaching, resolve_model
from ..state import Channel, default_channels
from ..tools import Tool, _is_langchain_tool, as_tool, as_tools

if TYPE_CHECKING:
    from ..backends import Backend, PermissionRules
    from ..persistence import Checkpointer, Store

__all__ = [
    "DEFAULT_PROMPT",
    "ModelCache",
    "Parts",
    "answer_layer",
    "build_spec",
    "own_checkpointer",
    "own_store",
    "prompt_text",
    "schema_channels",
    "tool_sources",
]

DEFAULT_PROMPT = (
    "You are a capable assistant that works step by step: plan longer tasks, use your "
    "tools to do the work rather than guessing, and finish with a clear answer."
)


def tool_sources(items: Any, mcp_servers: Any) -> tuple[list[Tool], list[AgentMiddleware]]:
    """Tools, and the middleware giving MCP servers' tools (in ``items`` or ``mcp_servers``)."""
    # LangChain tools and provider tool dicts become Tools first: what is neither
    # Tool nor callable is an MCP server.
    items = [
        as_tool(t) if _is_langchain_tool(t) or isinstance(t, Mapping) else t for t in items or ()
    ]
    if mcp_servers or not all(isinstance(t, Tool) or callable(t) for t in items or ()):
        from .. import mcp  # an optional integration: imported only when used

        return mcp.tool_sources(items, mcp_servers)
    return as_tools(items), []


def prompt_text(prompt: object, where: str = "system_prompt") -> str | None:
    """A system prompt given as text or as a ``SystemMessage`` (deepactors' or
    LangChain's, content text or text blocks), as text.

    Raises:
        ConfigurationError: Anything else.
    """
    if prompt is None or isinstance(prompt, str):
        return prompt
    if type(prompt).__name__ == "SystemMessage":
        content = getattr(prompt, "content", None)
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            # Text blocks (a cache_control mark included: the caching middleware
            # marks the system prompt for Claude itself).
            texts = [
                b if isinstance(b, str) else b.get("text") if isinstance(b, Mapping) else None
                for b in content
            ]
            if all(isinstance(t, str) for t in texts):
                return "\n\n".join(t for t in texts if t)
    raise ConfigurationError(
        f"{where} must be text or a SystemMessage of text, not {type(prompt).__name__}"
    )


def schema_channels(
    schema: Any, known: Collection[str], *, owner: str
) -> tuple[dict[str, Channel], tuple[str, ...]]:
    """Channels for the keys a state schema (a ``TypedDict`` such as LangChain's
    ``AgentState`` or deepagents' ``DeepAgentState`` extended) adds to ``known``.

    A key marked private (LangChain's ``PrivateStateAttr`` / ``OmitFromInput``)
    is refused as run input; an ``UntrackedValue`` key is never checkpointed
    (its names are returned second, to empty at each run's start); a reducer
    given as ``Annotated[list[str], operator.add]`` folds updates, starting from
    the type's empty value.

    Raises:
        ConfigurationError: The schema's type hints cannot be read.
    """
    try:
        hints = get_type_hints(schema, include_extras=True)
    except Exception as exc:
        raise ConfigurationError(f"cannot read the state schema of {owner}: {exc}") from exc
    channels: dict[str, Channel] = {}
    untracked: list[str] = []
    for key, hint in hints.items():
        if key in known or key in _NOT_CHANNELS:
            continue
        marks = _marks(hint)
        private = "OmitFromSchema" in marks
        if "UntrackedValue" in marks:
            untracked.append(key)
            channels[key] = Channel(private=private, encode=_nothing, decode=_nothing)
            continue
        reducer = _reducer(hint)
        if reducer is None:
            channels[key] = Channel(private=private)
        else:
            channels[key] = Channel(private=private, reducer=reducer, default=_empty(hint))
    return channels, tuple(untracked)


_NOT_CHANNELS = frozenset({"jump_to", "remaining_steps"})
"""LangGraph's control keys: the loop's business, never state here."""


def _marks(hint: Any) -> set[str]:
    """Class names of the ``Annotated`` metadata in ``hint``, at any depth."""
    found: set[str] = set()
    for arg in get_args(hint):
        found.add(arg.__name__ if isinstance(arg, type) else type(arg).__name__)
        if get_args(arg):
            found |= _marks(arg)
    return found


def _unwrapped(hint: Any) -> Any:
    # NotRequired[...] / Required[...] around Annotated[...]
    while get_origin(hint) in (NotRequired, Required):
        hint = get_args(hint)[0]
    return hint


def _reducer(hint: Any) -> Any:
    hint = _unwrapped(hint)
    if get_origin(hint) is not Annotated:
        return None
    for meta in hint.__metadata__:
        if callable(meta) and not isinstance(meta, type):
            try:
                if len(inspect.signature(meta).parameters) == 2:
                    return meta
            except (TypeError, ValueError):  # a builtin without a signature
                return meta
    return None


def _empty(hint: Any) -> Callable[[], Any]:
    inner = get_args(_unwrapped(hint))[0]  # Annotated[T, reducer] -> T
    base = get_origin(inner) or inner
    if base in (list, dict, set, int, float, str):
        return cast("Callable[[], Any]", base)
    return lambda: None


def _nothing(value: Any) -> None:
    return None  # never checkpointed (LangGraph's UntrackedValue)


# LangGraph's in-memory saver given as checkpointer=: a MemoryCheckpointer per saver,
# so agents given the same saver share their threads, as under LangGraph.
_SAVERS: weakref.WeakKeyDictionary[Any, Checkpointer] = weakref.WeakKeyDictionary()
_SAVERS_LOCK = threading.Lock()


def own_checkpointer(checkpointer: Any) -> Checkpointer | None:
    """``checkpointer=`` as deepactors' own: LangGraph's ``InMemorySaver`` (or
    ``MemorySaver``) becomes a :class:`~deepactors.persistence.MemoryCheckpointer`.

    Raises:
        ConfigurationError: Another LangGraph saver (naming deepactors' counterpart),
            or an ``InMemorySaver`` that holds checkpoints already.
    """
    if not _is_langgraph(checkpointer, "BaseCheckpointSaver", "langgraph.checkpoint"):
        return cast("Checkpointer | None", checkpointer)
    kind = type(checkpointer).__name__
    if kind not in ("InMemorySaver", "MemorySaver"):
        fix = _SAVER_FIXES.get(
            kind, "MemoryCheckpointer(), SqliteCheckpointer(path) or PostgresCheckpointer(dsn)"
        )
        raise ConfigurationError(
            f"LangGraph's {kind} cannot keep deepactors' threads, whose records are their "
            f"own: use deepactors' {fix} (from deepactors.persistence)"
        )
    if getattr(checkpointer, "storage", None):
        raise ConfigurationError(
            "this InMemorySaver holds LangGraph checkpoints already, which deepactors "
            "cannot read: give a fresh one (or deepactors' MemoryCheckpointer)"
        )
    from ..persistence import MemoryCheckpointer

    with _SAVERS_LOCK:
        own = _SAVERS.get(checkpointer)
        if own is None:
            own = _SAVERS[checkpointer] = MemoryCheckpointer()
        return own


_SAVER_FIXES = {
    "SqliteSaver": "SqliteCheckpointer(path)",
    "AsyncSqliteSaver": "SqliteCheckpointer(path)",
    "PostgresSaver": "PostgresCheckpointer(dsn)",
    "AsyncPostgresSaver": "PostgresCheckpointer(dsn)",
}


def own_store(store: Any) -> Store | None:
    """``store=`` as given, unless it is LangGraph's (refused with the fix).

    Raises:
        ConfigurationError: A LangGraph ``BaseStore``, whose API (sync ``put``,
            ``Item`` values) deepactors' store does not have.
    """
    if _is_langgraph(store, "BaseStore", "langgraph.store"):
        raise ConfigurationError(
            f"LangGraph's {type(store).__name__} is not a deepactors store: use "
            "deepactors' MemoryStore() (or SqliteStore(path), PostgresStore(dsn)); its "
            "methods are async (await store.put(namespace, key, value)), and it is what "
            "StoreBackend and the memory middleware read"
        )
    return cast("Store | None", store)


def _is_langgraph(obj: object, base: str, module: str) -> bool:
    return obj is not None and any(
        cls.__name__ == base and cls.__module__.startswith(module) for cls in type(obj).__mro__
    )


def answer_layer(response_format: Any, model: ChatModel) -> list[AgentMiddleware]:
    if response_format is None:
        return []
    return [StructuredOutputMiddleware(response_format, model=model)]


class Parts:
    """What every agent of one tree is built with (the parent's, unless a child overrides)."""

    __slots__ = (
        "backend",
        "channels",
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
        channels: Mapping[str, Channel] | None = None,
    ) -> None:
        self.channels = channels or {}  # a state_schema's keys: every agent of the tree has them
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
    breakpoints: Breakpoints = NO_BREAKPOINTS,
) -> AgentSpec:
    if not (isinstance(model, SupportsPromptCaching) and model.prompt_caching):
        # Cache hints are for Claude; for any other model the layer would only
        # copy each request, on the hot path, for nothing.
        stack = [mw for mw in stack if type(mw) is not AnthropicPromptCachingMiddleware]
    all_tools = {t.name: t for t in tools}
    declared: dict[str, Channel] = dict(parts.channels)
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
        breakpoints=breakpoints,
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
