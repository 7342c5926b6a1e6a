"""deepactors' own keywords of ``create_deep_agent``, beside deepagents' ones.

:class:`AgentOptions` types them for callers (``**options: Unpack[AgentOptions]``:
a type checker checks each keyword, an IDE lists them); :class:`AgentSettings` is
what the assembly reads, with their defaults, parsed once by
:meth:`AgentSettings.parse`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict, final

from .._core.keywords import unexpected_keywords
from ..middleware import DEFAULT_MAX_CONCURRENT_SUBAGENTS
from ..placement import RayPlacement

__all__ = ["AgentOptions", "AgentSettings"]


class AgentOptions(TypedDict, total=False):
    """deepactors' own keywords of :func:`~deepactors.create_deep_agent`.

    deepagents has no counterpart of these: a ported script runs without them,
    and one that uses them passes them as keywords like the others
    (``create_deep_agent(model, tools, max_steps=50)``). Each may be left out.

    Attributes:
        interrupt_before: The nodes (``"model"``, ``"tools"``, ``"*"`` for both)
            every run stops before, unless a run gives its own (LangGraph's
            ``compile(interrupt_before=...)``); input ``None`` continues the
            thread. Needs a ``checkpointer``. Default None: no stop.
        interrupt_after: The nodes every run stops after, likewise.
        max_steps: Model calls allowed per run before ``StepLimitExceeded``
            (default 1000).
        max_concurrent_subagents: Subagents one run may have working at once
            (default :data:`~deepactors.middleware.DEFAULT_MAX_CONCURRENT_SUBAGENTS`;
            None: no cap); ``task`` calls past it start as others finish.
        max_concurrent_subagents_total: Subagents the whole tree may have working
            at once (default None: no cap).
        mcp_servers: MCP servers whose tools the agent gets, by name: each an
            :class:`~deepactors.mcp.MCPServer` or a dict in Claude Desktop's
            ``mcpServers`` shape (needs ``deepactors[mcp]``; see ``docs/mcp.md``).
            Subagents without ``tools`` of their own get them too.
        async_tasks: The background-task tools (``start_async_task`` and
            company, :class:`~deepactors.middleware.AsyncSubAgentMiddleware`):
            True offers every subagent in the background too (the model chooses
            per call); None (default) offers those marked ``"background": True``
            (which ``task`` does not start); False refuses such marks.
        placement: Where the subagents run: None (default) in this process;
            a :class:`~deepactors.placement.RayPlacement` on Ray workers (all
            subagents, or those it names; see ``docs/ray.md``).
    """

    interrupt_before: str | Sequence[str] | None
    interrupt_after: str | Sequence[str] | None
    max_steps: int
    max_concurrent_subagents: int | None
    max_concurrent_subagents_total: int | None
    mcp_servers: Mapping[str, Any] | None
    async_tasks: bool | None
    placement: RayPlacement | None


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class AgentSettings:
    """:class:`AgentOptions` as the assembly reads them: each one given, or its default.

    The defaults live here and nowhere else (:class:`AgentOptions` documents them).
    """

    interrupt_before: str | Sequence[str] | None = None
    interrupt_after: str | Sequence[str] | None = None
    max_steps: int = 1000
    max_concurrent_subagents: int | None = DEFAULT_MAX_CONCURRENT_SUBAGENTS
    max_concurrent_subagents_total: int | None = None
    mcp_servers: Mapping[str, Any] | None = None
    async_tasks: bool | None = None
    placement: RayPlacement | None = None

    @classmethod
    def parse(
        cls, options: AgentOptions, *, caller: str, beside: Collection[str] = ()
    ) -> AgentSettings:
        """The settings ``options`` give, the others at their defaults.

        Args:
            options: The keywords as given to ``caller``.
            caller: The function they were given to, named in the error.
            beside: The caller's other keywords, for the close match of a misspelt one.

        Raises:
            TypeError: A keyword that is none of :class:`AgentOptions` (as Python
                raises for an unknown keyword), naming the closest keyword.
        """
        unknown = options.keys() - _NAMES
        if unknown:
            raise unexpected_keywords(caller, unknown, {*_NAMES, *beside})
        return cls(**options)


_NAMES = frozenset(AgentOptions.__annotations__)
