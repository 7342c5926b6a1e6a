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

import importlib
from collections.abc import Sequence
from typing import cast

from ..errors import ConfigurationError
from ..hooks import AgentMiddleware
from ..models import ChatModel
from ._caching import AnthropicPromptCachingMiddleware
from ._memory import MemoryMiddleware
from ._patch import PatchToolCallsMiddleware
from ._skills import SkillsMiddleware, SkillSource
from ._summarization import SummarizationMiddleware

__all__ = ["as_middleware", "context_stack"]

# Named, not imported: deepactors runs without LangChain, and the adapter sits
# above this module (it builds on the hooks here).
_LANGCHAIN_ADAPTER = "deepactors.langchain"


def as_middleware(obj: object, *, model: ChatModel | None = None) -> AgentMiddleware:
    """A deepactors middleware as is; LangChain's (``langchain.agents.middleware``)
    through its adapter (the ``langchain`` extra), for an agent of ``model``.

    Raises:
        ConfigurationError: Neither, or a LangChain middleware that cannot map.
    """
    if isinstance(obj, AgentMiddleware):
        return obj
    if _is_langchain_middleware(obj):
        adapter = importlib.import_module(_LANGCHAIN_ADAPTER)
        return cast(AgentMiddleware, adapter.from_langchain_middleware(obj, model=model))
    raise ConfigurationError(
        f"not a middleware: {obj!r}. Give a subclass of deepactors.middleware.AgentMiddleware "
        "(or what its decorators make, @before_model and company), or LangChain's "
        "(langchain.agents.middleware.AgentMiddleware, with pip install 'deepactors[langchain]')"
    )


def _is_langchain_middleware(obj: object) -> bool:
    """A LangChain ``AgentMiddleware``, told by its class (LangChain not imported)."""
    return any(
        cls.__name__ == "AgentMiddleware" and cls.__module__.startswith("langchain.agents.")
        for cls in type(obj).__mro__
    )


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
        ConfigurationError: An item of ``user`` is not a middleware (see
            :func:`as_middleware`).
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
    for given in user:
        mw = as_middleware(given, model=model)
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
