"""``create_deep_agent``: a model, tools, and the default middleware stack, resolved once."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..actors import AgentSpec
from ..agent import DeepAgent
from ..backends import (
    FilesystemPermission,
    PermissionRules,
    StateBackend,
)
from ..errors import ConfigurationError
from ..limits import breakpoints
from ..messages import SystemMessage
from ..middleware import (
    DEFAULT_MAX_CONCURRENT_SUBAGENTS,
    AgentMiddleware,
    AsyncSubAgentMiddleware,
    FilesystemMiddleware,
    HumanInTheLoopMiddleware,
    ModelRetryMiddleware,
    SubAgentMiddleware,
    SubAgentSpec,
    TodoListMiddleware,
    context_stack,
)
from ..models import ChatModel
from ..placement import RayAgent, RayPlacement
from ..state import Channel, default_channels
from ..tools import ToolLike
from ._parts import (
    DEFAULT_PROMPT,
    ModelCache,
    Parts,
    answer_layer,
    build_spec,
    own_checkpointer,
    own_store,
    prompt_text,
    schema_channels,
    tool_sources,
)
from ._subagents import SubAgentLike, guarded, placed, subagent_specs

if TYPE_CHECKING:
    from ..backends import Backend
    from ..persistence import Checkpointer, Store

__all__ = ["DEFAULT_PROMPT", "create_deep_agent"]


def create_deep_agent(
    model: str | ChatModel | None = None,
    tools: Sequence[ToolLike] | None = None,
    *,
    system_prompt: str | SystemMessage | None = None,
    middleware: Sequence[AgentMiddleware] = (),
    subagents: Sequence[SubAgentLike] | None = None,
    skills: Sequence[str] | None = None,
    memory: Sequence[str] | None = None,
    backend: Backend | None = None,
    checkpointer: Checkpointer | None = None,
    store: Store | None = None,
    interrupt_on: Mapping[str, bool | Mapping[str, Any]] | None = None,
    interrupt_before: str | Sequence[str] | None = None,
    interrupt_after: str | Sequence[str] | None = None,
    response_format: Any = None,
    context_schema: Any = None,
    permissions: Sequence[FilesystemPermission] | None = None,
    debug: bool = False,
    name: str | None = None,
    max_steps: int = 1000,
    max_concurrent_subagents: int | None = DEFAULT_MAX_CONCURRENT_SUBAGENTS,
    max_concurrent_subagents_total: int | None = None,
    mcp_servers: Mapping[str, Any] | None = None,
    async_tasks: bool | None = None,
    state_schema: type | None = None,
    cache: object = None,
    placement: RayPlacement | None = None,
) -> DeepAgent:
    """Build a deep agent: a model, tools, and the default middleware stack.

    The parameters follow LangChain's ``deepagents`` so a script ports by changing
    imports. The default stack, outermost first: ``TodoListMiddleware`` (planning),
    ``FilesystemMiddleware`` (file tools over ``backend``, ``execute`` when the
    backend can run commands), ``SubAgentMiddleware`` (the ``task`` tool),
    ``SummarizationMiddleware`` (keeps long runs inside the context window),
    ``PatchToolCallsMiddleware`` (repairs interrupted histories), then
    ``middleware``, then ``SkillsMiddleware`` (with ``skills``),
    ``AnthropicPromptCachingMiddleware`` and ``MemoryMiddleware`` (with ``memory``).
    A middleware of yours with the same ``name`` as a default one replaces it in place.

    Args:
        model: ``"anthropic:<model id>"`` or a :class:`~deepactors.models.ChatModel`.
        tools: Functions (sync or async, with type hints) or :class:`Tool` objects,
            and :class:`~deepactors.mcp.MCPServer` objects (their tools).
        system_prompt: Your instructions (text, or a ``SystemMessage`` of text:
            deepactors' or LangChain's); middleware sections are appended.
        middleware: Extra middleware, after the default stack.
        subagents: What ``task`` can start besides ``general-purpose``: dicts with
            ``name``, ``description``, ``system_prompt`` and optionally ``tools``,
            ``model``, ``middleware``, ``timeout`` (seconds), ``skills``,
            ``interrupt_on``, ``response_format``, ``budget`` (its own, inside the
            run's), ``permissions`` (instead of the parent's) and ``mcp_servers``
            (besides those its ``tools`` bring); or a prebuilt
            agent as ``{"name", "description", "agent": <DeepAgent>}``. A dict
            named ``general-purpose`` replaces the built-in one.
        skills: Folders of ``<name>/SKILL.md`` skills in the backend (later ones
            override earlier ones by name); subagent dicts take ``skills`` too, and
            ``general-purpose`` gets these.
        memory: Memory files (``AGENTS.md``) in the backend, shown to the model on
            every call and reloaded whenever they change.
        backend: Where the file tools keep files (default: in agent state).
        checkpointer: Where threads are saved (``MemoryCheckpointer``,
            ``SqliteCheckpointer``, ``PostgresCheckpointer``); LangGraph's
            ``InMemorySaver`` stands for a ``MemoryCheckpointer`` (one per saver).
        store: Long-term key-value store for backends and memory.
        response_format: A schema (pydantic model class, dataclass, TypedDict or
            JSON schema dict) the run's final answer must fit, landing in
            ``result["structured_response"]``; or a ``ToolStrategy`` /
            ``ProviderStrategy`` / ``AutoStrategy`` to choose how it is asked for.
        context_schema: The type a run's ``context=`` must fit (pydantic model,
            dataclass or TypedDict); hooks and tools get the validated instance.
        permissions: ``FilesystemPermission`` rules for the file tools (first
            match wins, no match allows); subagents inherit them unless they set
            their own.
        debug: Log every hook and model call, at DEBUG level, to the ``deepactors``
            logger of the standard ``logging`` module. Like every deepactors log
            record, they show only if the application's logging config lets them
            through, e.g. ``logging.basicConfig()`` then
            ``logging.getLogger("deepactors").setLevel(logging.DEBUG)``.
        interrupt_before: The nodes (``"model"``, ``"tools"``, ``"*"`` for both)
            every run stops before, unless a run gives its own (LangGraph's
            ``compile(interrupt_before=...)``); input ``None`` continues the
            thread. Needs a ``checkpointer``.
        interrupt_after: The nodes every run stops after, likewise.
        name: The agent's name and the root of its actor paths (default ``main``).
        max_steps: Model calls allowed per run before ``StepLimitExceeded``.
        max_concurrent_subagents: Subagents one run may have working at once
            (default :data:`~deepactors.middleware.DEFAULT_MAX_CONCURRENT_SUBAGENTS`;
            None: no cap); ``task`` calls past it start as others finish.
        max_concurrent_subagents_total: Subagents the whole tree may have working
            at once.
        mcp_servers: MCP servers whose tools the agent gets, by name: each an
            :class:`~deepactors.mcp.MCPServer` or a dict in Claude Desktop's
            ``mcpServers`` shape (needs ``deepactors[mcp]``; see ``docs/mcp.md``).
            Subagents without ``tools`` of their own get them too.
        async_tasks: The background-task tools (``start_async_task`` and
            company, :class:`~deepactors.middleware.AsyncSubAgentMiddleware`):
            True offers every subagent in the background too (the model chooses
            per call); None (default) offers those marked ``"background": True``
            (which ``task`` does not start); False refuses such marks.
        state_schema: A ``TypedDict`` of state keys beyond ``messages``, ``todos``,
            ``files`` and ``structured_response`` (deepagents' ``DeepAgentState``
            extended, or LangChain's ``AgentState``): each becomes a channel of the
            agent and its subagents, set by input, hooks and tools (see
            ``docs/porting.md``).
        cache: LangGraph's node cache, which has no counterpart here (there are no
            graph nodes to cache): anything but None is refused.
        placement: Where the subagents run: None (default) in this process;
            a :class:`~deepactors.placement.RayPlacement` on Ray workers (all
            subagents, or those it names; see ``docs/ray.md``).

    Raises:
        ConfigurationError: A bad argument, or one whose feature is not available.
        InputError: ``interrupt_before``/``interrupt_after`` name a node a deep
            agent does not have.
    """
    _refuse_node_cache(cache)
    prompt = prompt_text(system_prompt)
    checkpointer = own_checkpointer(checkpointer)
    store = own_store(store)
    channels = _state_channels(state_schema)
    rules = PermissionRules(permissions) if permissions else None
    tail = _tail(interrupt_on)
    models = ModelCache()
    resolved = models.resolve(model)
    user_tools, mcp = tool_sources(tools, mcp_servers)
    backend = backend if backend is not None else StateBackend()
    parts = Parts(
        tools=user_tools,
        backend=backend,
        store=store,
        debug=debug,
        max_steps=max_steps,
        tail=tail,
        models=models,
        checkpointer=checkpointer,
        rules=rules,
        saves=checkpointer is not None,
        mcp=mcp,
        channels=channels,
    )
    specs = subagent_specs(subagents or (), model=resolved, parts=parts, skills=skills)
    if placement is not None:
        specs = placed(specs, placement)
    own_backend, guard = guarded(backend, rules, parts)
    stack = _main_stack(
        specs,
        middleware,
        model=resolved,
        execute=own_backend.can_execute,
        skills=skills,
        memory=memory,
        max_concurrent=max_concurrent_subagents,
        max_concurrent_total=max_concurrent_subagents_total,
        async_tasks=async_tasks,
        mcp=mcp,
    )
    spec = build_spec(
        model=resolved,
        tools=user_tools,
        system_prompt=prompt,
        stack=[*stack, *answer_layer(response_format, resolved), *tail, *guard],
        parts=parts,
        backend=own_backend,
        name=name,
        checkpointer=checkpointer,
        context_schema=context_schema,
        breakpoints=breakpoints(interrupt_before, interrupt_after),
    )
    _check_interrupt_on(spec)
    return DeepAgent(spec)


def _refuse_node_cache(cache: object) -> None:
    """Refuse LangGraph's ``cache=``: there are no graph nodes here to cache.

    Raises:
        ConfigurationError: ``cache`` is anything but None.
    """
    if cache is not None:
        raise ConfigurationError(
            "cache= is LangGraph's cache of graph nodes' results, and deepactors has no "
            "graph nodes: drop it (prompt caching for Claude is on by default, "
            "AnthropicPromptCachingMiddleware)"
        )


def _state_channels(state_schema: type | None) -> dict[str, Channel]:
    """The channels a ``state_schema`` adds to every agent of the tree (none without one).

    Raises:
        ConfigurationError: A key is LangGraph's ``UntrackedValue``, which a
            checkpointed channel cannot hold.
    """
    if state_schema is None:
        return {}
    channels, untracked = schema_channels(state_schema, default_channels(), owner="state_schema")
    if untracked:
        raise ConfigurationError(
            f"state_schema key(s) {list(untracked)} are UntrackedValue, kept only for "
            "one run: keep such values in a middleware's state_schema instead"
        )
    return channels


def _tail(interrupt_on: Mapping[str, bool | Mapping[str, Any]] | None) -> list[AgentMiddleware]:
    """The innermost middleware of every agent of the tree (a subagent may change its HITL).

    The tail runs innermost: a retry repeats only the model call, and the human
    decides on the exact call that would run.
    """
    tail: list[AgentMiddleware] = [ModelRetryMiddleware()]
    if interrupt_on:
        tail.append(HumanInTheLoopMiddleware(interrupt_on))
    return tail


def _main_stack(
    specs: Sequence[SubAgentSpec],
    middleware: Sequence[AgentMiddleware],
    *,
    model: ChatModel,
    execute: bool,
    skills: Sequence[str] | None,
    memory: Sequence[str] | None,
    max_concurrent: int | None,
    max_concurrent_total: int | None,
    async_tasks: bool | None,
    mcp: Sequence[AgentMiddleware],
) -> list[AgentMiddleware]:
    """The main agent's default stack around the user's ``middleware``, outermost first.

    Planning, files, the ``task`` tool over ``specs`` (and the background-task
    tools), the MCP servers' tools; then summarization, patching, the user's,
    skills, caching and memory, in deepagents' order (see ``context_stack``).
    """
    defaults: list[AgentMiddleware] = [
        TodoListMiddleware(),
        FilesystemMiddleware(execute=execute),
        SubAgentMiddleware(
            [s for s in specs if not s.background],
            max_concurrent=max_concurrent,
            max_concurrent_total=max_concurrent_total,
        ),
        *_async_tasks(specs, async_tasks),
        *mcp,
    ]
    return context_stack(defaults, middleware, model=model, skills=skills, memory=memory)


def _check_interrupt_on(root: AgentSpec) -> None:
    """Refuse ``interrupt_on`` entries naming a tool no agent of the tree has.

    A typo (``edit_fiel``) or a tool the backend does not give (``execute`` on a
    state backend) would otherwise never fire, silently.
    """
    # A name is valid if any agent of the tree has the tool: a parent's
    # interrupt_on may guard a tool only its subagents have, and stays valid when
    # a subagent that has it overrides it (as in deepagents).
    known: set[str] = set()
    guards: dict[int, HumanInTheLoopMiddleware] = {}
    for spec in _tree(root):
        known.update(spec.tools)
        for mw in spec.middleware:
            known.update(getattr(mw, "declared_tools", ()))  # MCP servers' include= names
            if isinstance(mw, HumanInTheLoopMiddleware):
                guards[id(mw)] = mw
    for mw in guards.values():
        unknown = mw.tool_names - known
        if unknown:
            raise ConfigurationError(
                f"interrupt_on names tool(s) that no agent here has: {sorted(unknown)}; "
                f"the tools are {sorted(known)}"
            )


def _async_tasks(specs: Sequence[SubAgentSpec], wanted: bool | None) -> list[AgentMiddleware]:
    """The background-task middleware, for the subagents offered in the background."""
    marked = [s.name for s in specs if s.background]
    if wanted is False:
        if marked:
            raise ConfigurationError(
                f"subagent(s) {marked} are marked background but async_tasks=False"
            )
        return []
    offered = list(specs) if wanted else [s for s in specs if s.background]
    return [AsyncSubAgentMiddleware(offered)] if offered else []


def _tree(root: AgentSpec) -> list[AgentSpec]:
    out, todo, seen = [], [root], set()
    while todo:
        spec = todo.pop()
        if id(spec) not in seen:
            seen.add(id(spec))
            out.append(spec)
            for mw in spec.middleware:
                if isinstance(mw, SubAgentMiddleware | AsyncSubAgentMiddleware):
                    for sub in mw.specs.values():
                        agent = sub.agent
                        if isinstance(agent, RayAgent):
                            agent = agent.spec  # placed on Ray: the same agent, elsewhere
                        if isinstance(agent, AgentSpec):
                            todo.append(agent)
    return out
