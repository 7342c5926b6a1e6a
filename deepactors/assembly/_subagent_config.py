"""Subagent dicts, checked by a pydantic model: unknown keys and wrong types refused by name;
remote ones (deepagents' ``AsyncSubAgent`` shape) made into their specs here."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..agent import DeepAgent
from ..backends import FilesystemPermission
from ..budget import Budget
from ..errors import ConfigurationError
from ..middleware import SubAgentSpec
from ._parts import prompt_text

__all__ = ["SubAgentConfig", "read_subagent_config", "remote_spec"]


class SubAgentConfig(BaseModel):
    """A subagent dict, checked: unknown keys and wrong types are refused by name.

    ``prompt`` is older deepagents' name for ``system_prompt``; ``runnable`` is
    deepagents' ``CompiledSubAgent`` key, here a prebuilt agent like ``agent``.
    ``graph_id``, ``url`` and ``headers`` are deepagents' ``AsyncSubAgent``
    keys: a subagent served by another Agent Protocol server
    (:class:`~deepactors.remote.RemoteAgent`); ``keep_threads`` is its own.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    name: str = Field(min_length=1)
    description: str = Field(min_length=1)
    system_prompt: str | None = None
    prompt: str | None = None
    tools: Sequence[Any] | None = None
    model: Any = None
    middleware: Sequence[Any] = ()
    timeout: float | None = Field(None, gt=0)
    interrupt_on: Mapping[str, Any] | None = None
    skills: Sequence[str] | None = None
    agent: DeepAgent | None = None
    runnable: DeepAgent | None = None
    response_format: Any = None
    budget: Budget | None = None
    permissions: Sequence[FilesystemPermission] | None = None
    mcp_servers: Mapping[str, Any] | None = None
    background: bool = False
    mode: Literal["isolated", "fork"] = "isolated"
    graph_id: str | None = Field(None, min_length=1)
    url: str | None = Field(None, min_length=1)
    headers: Mapping[str, str] | None = None
    keep_threads: bool | None = None

    @field_validator("system_prompt", "prompt", mode="before")
    @classmethod
    def _prompt_as_text(cls, value: object) -> str | None:
        # A SystemMessage (deepactors' or LangChain's) as its text, as the main agent's.
        return prompt_text(value)

    def is_remote(self) -> bool:
        """Whether a key only a remote subagent takes was given (the dict is one)."""
        return any(
            v is not None for v in (self.graph_id, self.url, self.headers, self.keep_threads)
        )

    def local_keys(self) -> list[str]:
        """The keys given that only a subagent run here can use, not a remote one."""
        return sorted(
            k for k in self.model_fields_set - _REMOTE_KEYS if getattr(self, k) is not None
        )


# What a remote subagent dict may hold: deepagents' AsyncSubAgent keys, and the
# limits this side keeps (its timeout and budget) or that choose how it is offered.
_REMOTE_KEYS = frozenset(
    {
        "name",
        "description",
        "graph_id",
        "url",
        "headers",
        "keep_threads",
        "timeout",
        "budget",
        "background",
    }
)


def read_subagent_config(item: Mapping[str, Any]) -> SubAgentConfig:
    """A subagent dict as a :class:`SubAgentConfig`.

    Raises:
        ConfigurationError: Naming the subagent, the key and what is wrong.
    """
    try:
        return SubAgentConfig.model_validate(dict(item))
    except ValidationError as exc:
        label = item.get("name") if isinstance(item.get("name"), str) else None
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first["loc"]) or "value"
        known = ", ".join(sorted(SubAgentConfig.model_fields))
        extra = f" (known keys: {known})" if first["type"] == "extra_forbidden" else ""
        who = f"subagent {label!r}" if label else "a subagent"
        raise ConfigurationError(f"{who}: {where}: {first['msg']}{extra}") from None


def remote_spec(config: SubAgentConfig) -> SubAgentSpec:
    """A subagent dict in deepagents' ``AsyncSubAgent`` shape: one served elsewhere.

    ``url`` is required: deepagents' default (no URL) reaches the graph in the
    same LangGraph deployment through its in-process transport, which has no
    counterpart here: a subagent of the same process is a local one.
    """
    who = f"subagent {config.name!r}"
    if config.graph_id is None or config.url is None:
        missing = "graph_id" if config.graph_id is None else "url"
        raise ConfigurationError(
            f"{who}: a remote subagent needs both 'graph_id' and 'url' (no {missing!r} given); "
            "a subagent that runs here takes 'system_prompt' instead"
        )
    local = config.local_keys()
    if local:
        raise ConfigurationError(
            f"{who}: a remote subagent (graph_id, url) runs as its server defines it; "
            f"{', '.join(repr(k) for k in local)} cannot be given to it here"
        )
    from ..remote import RemoteAgent  # only when a dict asks for one

    agent = RemoteAgent(
        name=config.name,
        graph_id=config.graph_id,
        url=config.url,
        headers=config.headers or {},
        keep_threads=bool(config.keep_threads),
    )
    return SubAgentSpec(
        name=config.name,
        description=config.description,
        agent=agent,
        timeout=config.timeout,
        budget=config.budget,
        background=config.background,
    )
