"""``create_deep_agent``: a model, tools, and the default middleware stack, resolved once."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..actors import AgentSpec
from ..agent import DeepAgent
from ..backends import (
    FilesystemPermission,
    PermissionedBackend,
    PermissionRules,
    StateBackend,
    check_execute,
)
from ..errors import ConfigurationError
from ..limits import breakpoints
from ..messages import SystemMessage
from ..middleware import (
    DEFAULT_MAX_CONCURRENT_SUBAGENTS,
    GENERAL_PURPOSE,
    GENERAL_PURPOSE_DESCRIPTION,
    GENERAL_PURPOSE_PROMPT,
    AgentMiddleware,
    AsyncSubAgentMiddleware,
    FilesystemMiddleware,
    FilesystemPermissionMiddleware,
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
from ..tools import Tool, ToolLike
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
from ._subagent_config import read_subagent_config, remote_spec

if TYPE_CHECKING:
    from ..backends import Backend
    from ..persistence import Checkpointer, Store

__all__ = ["DEFAULT_PROMPT", "create_deep_agent"]


SubAgentLike = Mapping[str, Any] | SubAgentSpec


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
    if cache is not None:
        raise ConfigurationError(
            "cache= is LangGraph's cache of graph nodes' results, and deepactors has no "
            "graph nodes: drop it (prompt caching for Claude is on by default, "
            "AnthropicPromptCachingMiddleware)"
        )
    prompt = prompt_text(system_prompt)
    checkpointer = own_checkpointer(checkpointer)
    store = own_store(store)
    channels: dict[str, Channel] = {}
    if state_schema is not None:
        channels, untracked = schema_channels(
            state_schema, default_channels(), owner="state_schema"
        )
        if untracked:
            raise ConfigurationError(
                f"state_schema key(s) {list(untracked)} are UntrackedValue, kept only for "
                "one run: keep such values in a middleware's state_schema instead"
            )
    rules = PermissionRules(permissions) if permissions else None
    # The tail runs innermost: a retry repeats only the model call, and the human
    # decides on the exact call that would run.
    tail: list[AgentMiddleware] = [ModelRetryMiddleware()]
    if interrupt_on:
        tail.append(HumanInTheLoopMiddleware(interrupt_on))
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
    specs = _subagent_specs(subagents or (), model=resolved, parts=parts, skills=skills)
    if placement is not None:
        specs = _placed(specs, placement)
    own_backend, guard = _guarded(backend, rules, parts)
    defaults: list[AgentMiddleware] = [
        TodoListMiddleware(),
        FilesystemMiddleware(execute=own_backend.can_execute),
        SubAgentMiddleware(
            [s for s in specs if not s.background],
            max_concurrent=max_concurrent_subagents,
            max_concurrent_total=max_concurrent_subagents_total,
        ),
        *_async_tasks(specs, async_tasks),
        *mcp,
    ]
    # Summarization, patching, skills, caching and memory around the user's (deepagents' order).
    stack = context_stack(defaults, middleware, model=resolved, skills=skills, memory=memory)
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


def _placed(specs: Sequence[SubAgentSpec], placement: RayPlacement) -> list[SubAgentSpec]:
    """The subagents ``placement`` names, made to run on its Ray workers.

    A ``fork`` subagent (it starts from its parent's conversation) and one
    that runs elsewhere already (a remote server's) stay as they are, unless
    named, which is an error.

    Raises:
        ConfigurationError: A subagent named that is not one, or cannot be
            placed; one whose agent cannot be sent to the workers (the message
            names the object that cannot).
    """
    known = {s.name for s in specs}
    unknown = sorted(set(placement.subagents or ()) - known)
    if unknown:
        raise ConfigurationError(
            f"RayPlacement(subagents=...) names {unknown}, which are not subagents here "
            f"(they are {sorted(known)})"
        )
    unknown = sorted(set(placement.agents) - known)
    if unknown:
        raise ConfigurationError(f"RayPlacement(agents=...) names {unknown}: no such subagents")
    out = []
    for spec in specs:
        named = placement.subagents is not None and spec.name in placement.subagents
        movable = isinstance(spec.agent, AgentSpec) and spec.mode == "isolated"
        if named and not movable:
            why = "a fork" if spec.mode == "fork" else "already run elsewhere"
            raise ConfigurationError(f"subagent {spec.name!r} cannot be placed on Ray: {why}")
        if movable and placement.places(spec.name):
            assert isinstance(spec.agent, AgentSpec)
            placed = placement.agent(spec.name, spec.agent)
            placed.payload()  # what cannot be sent is refused now, by name
            spec = dataclasses.replace(spec, agent=placed)
        out.append(spec)
    return out


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


def _guarded(
    backend: Backend, rules: PermissionRules | None, parts: Parts
) -> tuple[Backend, list[AgentMiddleware]]:
    """The backend under ``rules`` (deny), and the middleware that asks (interrupt)."""
    if rules is None:
        return backend, []
    check_execute(rules, backend)
    if not rules.has_interrupt:
        return PermissionedBackend(backend, rules), []
    return PermissionedBackend(backend, rules), [FilesystemPermissionMiddleware(rules)]


def _subagent_specs(
    items: Sequence[SubAgentLike],
    *,
    model: ChatModel,
    parts: Parts,
    skills: Sequence[str] | None = None,
) -> list[SubAgentSpec]:
    """Subagent specs from the user's dicts, plus ``general-purpose`` unless replaced."""
    specs: list[SubAgentSpec] = []
    for item in items:
        if isinstance(item, SubAgentSpec):
            specs.append(item)
            continue
        if not isinstance(item, Mapping):
            raise ConfigurationError(f"a subagent must be a dict, not {type(item).__name__}")
        config = read_subagent_config(item)
        if config.is_remote():
            specs.append(remote_spec(config))
            continue
        prebuilt = config.agent or config.runnable
        prompt = config.system_prompt if config.system_prompt is not None else config.prompt
        if config.agent is not None and config.runnable is not None:
            raise ConfigurationError(f"subagent {config.name!r}: give 'agent' or 'runnable'")
        if prebuilt is not None:
            if config.response_format is not None or config.permissions is not None:
                raise ConfigurationError(
                    f"subagent {config.name!r}: a prebuilt agent brings its own "
                    "response_format and permissions; give them to its create_deep_agent"
                )
            spec = prebuilt.spec
        elif prompt is None:
            raise ConfigurationError(f"subagent {config.name!r} needs a 'system_prompt'")
        else:
            rules = parts.rules
            if config.permissions is not None:
                rules = PermissionRules(config.permissions) if config.permissions else None
            own = tool_sources(config.tools, config.mcp_servers)
            inherit = config.tools is None
            tools_of, mcp = (parts.tools, [*parts.mcp, *own[1]]) if inherit else own
            spec = _child_spec(
                config.name,
                prompt,
                model=model if config.model is None else parts.models.resolve(config.model),
                tools=tools_of,
                extra=[*mcp, *config.middleware],
                parts=parts,
                interrupt_on=config.interrupt_on,
                response_format=config.response_format,
                rules=rules,
                skills=config.skills,
            )
        specs.append(
            SubAgentSpec(
                name=config.name,
                description=config.description,
                agent=spec,
                timeout=config.timeout,
                budget=config.budget,
                background=config.background,
                mode=config.mode,
            )
        )
    if not any(s.name == GENERAL_PURPOSE for s in specs):
        gp = _child_spec(
            GENERAL_PURPOSE,
            GENERAL_PURPOSE_PROMPT,
            model=model,
            tools=parts.tools,
            extra=parts.mcp,
            parts=parts,
            rules=parts.rules,
            skills=skills,  # general-purpose gets the main agent's skills, as in deepagents
        )
        specs.insert(
            0, SubAgentSpec(name=GENERAL_PURPOSE, description=GENERAL_PURPOSE_DESCRIPTION, agent=gp)
        )
    return specs


def _child_spec(
    name: str,
    prompt: str,
    *,
    model: ChatModel,
    tools: Sequence[Tool],
    extra: Sequence[AgentMiddleware],
    parts: Parts,
    rules: PermissionRules | None,
    response_format: Any = None,
    interrupt_on: Mapping[str, Any] | None = None,
    skills: Sequence[str] | None = None,
) -> AgentSpec:
    backend, guard = _guarded(parts.backend, rules, parts)
    # Declarative subagents get the default stack minus `task`: one level of
    # delegation, as in deepagents. A prebuilt agent may bring its own.
    defaults: list[AgentMiddleware] = [
        TodoListMiddleware(),
        FilesystemMiddleware(execute=backend.can_execute),
    ]
    # Declarative subagents inherit interrupt_on: a guarded tool stays guarded
    # when the work is delegated. Their own interrupt_on replaces the parent's
    # ({} turns it off), as in deepagents.
    tail = list(parts.tail)
    if interrupt_on is not None:
        tail = [mw for mw in tail if not isinstance(mw, HumanInTheLoopMiddleware)]
        if any(interrupt_on.values()):
            tail.append(HumanInTheLoopMiddleware(interrupt_on))
    stack = [
        *context_stack(defaults, extra, model=model, skills=skills),
        *answer_layer(response_format, model),
        *tail,
        *guard,
    ]
    return build_spec(
        model=model,
        tools=tools,
        system_prompt=prompt,
        stack=stack,
        parts=parts,
        backend=backend,
        name=name,
    )
