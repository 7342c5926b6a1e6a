"""A tree's subagents as specs: the user's dicts resolved, ``general-purpose`` added, placed.

``create_deep_agent`` hands each subagent dict (checked by
:mod:`._subagent_config`) to :func:`subagent_specs`, which builds a declarative
subagent's agent with the tree's :class:`~._parts.Parts` (the default stack
minus ``task``: one level of delegation, as in deepagents), and :func:`placed`
moves those a :class:`~deepactors.placement.RayPlacement` names onto its workers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..actors import AgentSpec
from ..backends import PermissionedBackend, PermissionRules, check_execute
from ..errors import ConfigurationError
from ..middleware import (
    GENERAL_PURPOSE,
    GENERAL_PURPOSE_DESCRIPTION,
    GENERAL_PURPOSE_PROMPT,
    AgentMiddleware,
    FilesystemMiddleware,
    FilesystemPermissionMiddleware,
    HumanInTheLoopMiddleware,
    SubAgentSpec,
    TodoListMiddleware,
    context_stack,
)
from ..models import ChatModel
from ..placement import RayPlacement
from ..tools import Tool
from ._parts import Parts, answer_layer, build_spec, tool_sources
from ._subagent_config import read_subagent_config, remote_spec

if TYPE_CHECKING:
    from ..backends import Backend

__all__ = ["SubAgentLike", "guarded", "placed", "subagent_specs"]


SubAgentLike = Mapping[str, Any] | SubAgentSpec


def placed(specs: Sequence[SubAgentSpec], placement: RayPlacement) -> list[SubAgentSpec]:
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


def guarded(
    backend: Backend, rules: PermissionRules | None, parts: Parts
) -> tuple[Backend, list[AgentMiddleware]]:
    """The backend under ``rules`` (deny), and the middleware that asks (interrupt)."""
    if rules is None:
        return backend, []
    check_execute(rules, backend)
    if not rules.has_interrupt:
        return PermissionedBackend(backend, rules), []
    return PermissionedBackend(backend, rules), [FilesystemPermissionMiddleware(rules)]


def subagent_specs(
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
    backend, guard = guarded(parts.backend, rules, parts)
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
