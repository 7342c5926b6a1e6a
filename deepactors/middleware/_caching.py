"""Anthropic prompt caching: cache breakpoints on the tools, system prompt and newest turns."""

from __future__ import annotations

from typing import Literal

from ..errors import ConfigurationError
from ..hooks import AgentMiddleware, ModelHandler
from ..messages import AssistantMessage
from ..models import ModelRequest

# SDK-free, so that importing the middleware package does not load the anthropic
# SDK for users of other models.
from ..models.cache import CACHE_SETTING, MAX_CACHE_BREAKPOINTS, CacheSettings

__all__ = ["AnthropicPromptCachingMiddleware"]


class AnthropicPromptCachingMiddleware(AgentMiddleware):
    """Ask Claude to cache the long, repeated prefix of every model call.

    An agent resends its tools, its system prompt (file tools, subagent lists,
    skills) and the whole conversation on every turn. With ``cache_control``
    breakpoints, Anthropic serves that prefix from a cache at a tenth of the
    input price, and faster.

    This middleware does not touch the messages: it adds the request setting
    ``"anthropic_cache"`` (:class:`~deepactors.models.anthropic.CacheSettings`)
    and :class:`~deepactors.models.anthropic.AnthropicModel` places the
    breakpoints when it builds the API body: on the last tool, the system prompt,
    and the newest ``message_breakpoints`` user turns, at most 4 in all (the API's
    limit). Other models never read the setting, so for them it does nothing.

    Args:
        ttl: How long an entry lives: ``"5m"`` (refreshed on every hit) or
            ``"1h"`` (dearer to write; for agents that pause longer than 5 minutes).
        min_messages: Put breakpoints on messages only once the conversation has
            at least this many (the tools and system prompt are always marked).
        message_breakpoints: How many of the newest user turns to mark (0-2 is
            useful: the newest writes the prefix, the one before reads the last
            call's entry).
        cache_tools: Mark the tool definitions.
        cache_system: Mark the system prompt.
    """

    def __init__(
        self,
        ttl: Literal["5m", "1h"] = "5m",
        *,
        min_messages: int = 0,
        message_breakpoints: int = 2,
        cache_tools: bool = True,
        cache_system: bool = True,
    ) -> None:
        if ttl not in ("5m", "1h"):
            raise ConfigurationError(f"ttl must be '5m' or '1h', not {ttl!r}")
        if not 0 <= message_breakpoints <= MAX_CACHE_BREAKPOINTS:
            raise ConfigurationError(
                f"message_breakpoints must be between 0 and {MAX_CACHE_BREAKPOINTS}"
            )
        if min_messages < 0:
            raise ConfigurationError("min_messages must be >= 0")
        self.ttl: Literal["5m", "1h"] = ttl
        self.min_messages = min_messages
        self.message_breakpoints = message_breakpoints
        self.cache_tools = cache_tools
        self.cache_system = cache_system

    def cache_settings(self, request: ModelRequest) -> CacheSettings:
        """The breakpoint request for one model call."""
        enough = len(request.messages) >= self.min_messages
        return CacheSettings(
            ttl=self.ttl,
            tools=self.cache_tools,
            system=self.cache_system,
            messages=self.message_breakpoints if enough else 0,
        )

    async def wrap_model_call(
        self, request: ModelRequest, handler: ModelHandler
    ) -> AssistantMessage:
        """Add the ``anthropic_cache`` setting and call on."""
        settings = {**request.settings, CACHE_SETTING: self.cache_settings(request)}
        return await handler(request.replace(settings=settings))
