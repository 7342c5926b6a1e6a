"""The assembly behind ``create_deep_agent``: one call's arguments, built into an agent tree.

:class:`DeepAgentCall` holds the call as given; :func:`assemble` resolves it once:
the parts every agent of the tree shares, the subagents' specs, the main agent's
stack and its spec (``_parts`` and ``_subagents`` build the pieces).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, final

from ..actors import AgentSpec
from ..agent import DeepAgent
from ..backends import FilesystemPermission, PermissionRules, StateBackend
from ..errors import ConfigurationError
from ..limits import breakpoints
from ..messages import SystemMessage
from ..middleware import (
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
from ..placement import RayAgent
from ..state import Channel, default_channels
from ..tools import ToolLike
from ._options import AgentOptions, AgentSettings
from ._parts import (
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

__all__ = ["DeepAgentCall", "assemble"]


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class DeepAgentCall:
    """The arguments of one ``create_deep_agent`` call, as given: its parameters, by name.

    The fields are ``create_deep_agent``'s parameters, with their types (a test
    keeps the two in step); ``options`` holds deepactors' own keywords, unparsed.
    """

    model: str | ChatModel | None
    tools: Sequence[ToolLike] | None
    system_prompt: str | SystemMessage | None
    middleware: Sequence[AgentMiddleware]
    subagents: Sequence[SubAgentLike] | None
    skills: Sequence[str] | None
    memory: Sequence[str] | None
    permissions: Sequence[FilesystemPermission] | None
    backend: Backend | None
    interrupt_on: Mapping[str, bool | Mapping[str, Any]] | None
    response_format: Any
    state_schema: type | None
    context_schema: Any
    checkpointer: Checkpointer | None
    store: Store | None
    debug: bool
    name: str | None
    cache: object
    options: AgentOptions


# The keywords beside deepactors' own: a misspelt one lands among the options,
# and the error names its close match.
_KEYWORDS = tuple(f.name for f in fields(DeepAgentCall) if f.name != "options")


def assemble(call: DeepAgentCall) -> DeepAgent:
    """The agent ``call`` asks for, every part resolved once.

    The tree's shared parts first (model, tools, backend, persistence, the
    innermost middleware), then the subagents' specs, then the main agent's
    stack and spec; last, the check that ``interrupt_on`` names tools the tree has.

    Raises:
        TypeError: An unknown keyword.
        ConfigurationError: A bad argument, or one whose feature is not available.
        InputError: ``interrupt_before``/``interrupt_after`` name a node a deep
            agent does not have.
    """
    settings = AgentSettings.parse(call.options, caller="create_deep_agent", beside=_KEYWORDS)
    _refuse_node_cache(call.cache)
    prompt = prompt_text(call.system_prompt)
    checkpointer = own_checkpointer(call.checkpointer)
    store = own_store(call.store)
    channels = _state_channels(call.state_schema)
    rules = PermissionRules(call.permissions) if call.permissions else None
    tail = _tail(call.interrupt_on)
    models = ModelCache()
    resolved = models.resolve(call.model)
    user_tools, mcp = tool_sources(call.tools, settings.mcp_servers)
    backend = call.backend if call.backend is not None else StateBackend()
    parts = Parts(
        tools=user_tools,
        backend=backend,
        store=store,
        debug=call.debug,
        max_steps=settings.max_steps,
        tail=tail,
        models=models,
        checkpointer=checkpointer,
        rules=rules,
        saves=checkpointer is not None,
        mcp=mcp,
        channels=channels,
    )
    specs = subagent_specs(call.subagents or (), model=resolved, parts=parts, skills=call.skills)
    if settings.placement is not None:
        specs = placed(specs, settings.placement)
    own_backend, guard = guarded(backend, rules, parts)
    stack = _main_stack(
        specs,
        call.middleware,
        model=resolved,
        execute=own_backend.can_execute,
        skills=call.skills,
        memory=call.memory,
        settings=settings,
        mcp=mcp,
    )
    spec = build_spec(
        model=resolved,
        tools=user_tools,
        system_prompt=prompt,
        stack=[*stack, *answer_layer(call.response_format, resolved), *tail, *guard],
        parts=parts,
        backend=own_backend,
        name=call.name,
        checkpointer=checkpointer,
        context_schema=call.context_schema,
        breakpoints=breakpoints(settings.interrupt_before, settings.interrupt_after),
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
    settings: AgentSettings,
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
            max_concurrent=settings.max_concurrent_subagents,
            max_concurrent_total=settings.max_concurrent_subagents_total,
        ),
        *_async_tasks(specs, settings.async_tasks),
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
