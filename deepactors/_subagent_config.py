"""Subagent dicts, checked by a pydantic model: unknown keys and wrong types refused by name."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .agent import DeepAgent
from .backends import FilesystemPermission
from .budget import Budget
from .errors import ConfigurationError

__all__ = ["SubAgentConfig", "read_subagent_config"]


class SubAgentConfig(BaseModel):
    """A subagent dict, checked: unknown keys and wrong types are refused by name.

    ``prompt`` is older deepagents' name for ``system_prompt``; ``runnable`` is
    deepagents' ``CompiledSubAgent`` key, here a prebuilt agent like ``agent``.
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
