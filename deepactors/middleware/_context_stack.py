"""The default middleware stack around the user's, in deepagents' order (0.7.32).

Outermost first::

    <core: todo list, files, subagents>   (given by the factory)
    SummarizationMiddleware
    PatchToolCallsMiddleware
    <the user's middleware>
    SkillsMiddleware                      (with skills=)
    AnthropicPromptCachingMiddleware
    MemoryMiddleware                      (with memory=)
    <tail: retries, human in the loop>    (added by the factory)

Skills sit before the caching breakpoint (the list rarely changes and belongs to
the cached prefix); memory after it, so an edit of ``AGENTS.md`` leaves the
cached tools and system prompt valid.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import ConfigurationError
from ..hooks import AgentMiddleware
from ..models import ChatModel
from ._caching import AnthropicPromptCachingMiddleware
from ._memory import MemoryMiddleware
from ._patch import PatchToolCallsMiddleware
from ._skills import SkillsMiddleware, SkillSource
from ._summarization import SummarizationMiddleware

__all__ = ["context_stack"]


def context_stack(
    core: Sequence[AgentMiddleware],
    user: Sequence[AgentMiddleware],
    *,
    model: ChatModel,
    skills: Sequence[SkillSource] | None = None,
    memory: Sequence[str] | None = None,
) -> list[AgentMiddleware]:
    """The stack of one agent: ``core``, the context defaults, and ``user``'s middleware.

    A middleware of ``user`` with the ``name`` of a default (or of one in
    ``core``) replaces it in place; the others go after
    ``PatchToolCallsMiddleware``, before skills, caching and memory. A
    :class:`SummarizationMiddleware` given without a model gets ``model``.

    Raises:
        ConfigurationError: An item of ``user`` is not a middleware.
    """
    head: list[AgentMiddleware] = [
        *core,
        SummarizationMiddleware(model),
        PatchToolCallsMiddleware(),
    ]
    after: list[AgentMiddleware] = []
    if skills:
        after.append(SkillsMiddleware(skills))
    after.append(AnthropicPromptCachingMiddleware())
    if memory:
        after.append(MemoryMiddleware(memory))
    middle: list[AgentMiddleware] = []
    for mw in user:
        if not isinstance(mw, AgentMiddleware):
            raise ConfigurationError(f"not a middleware: {mw!r} (subclass AgentMiddleware)")
        for group in (head, after, middle):
            names = [m.name for m in group]
            if mw.name in names:
                group[names.index(mw.name)] = mw
                break
        else:
            middle.append(mw)
    stack = [*head, *middle, *after]
    for mw in stack:
        if isinstance(mw, SummarizationMiddleware) and mw.model is None:
            mw.bind_model(model)
    return stack
