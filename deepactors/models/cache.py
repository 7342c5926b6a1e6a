"""Prompt-cache settings: how a request asks a model for cache breakpoints.

SDK-free, so the caching middleware can import it without loading the anthropic
SDK for users of other models.
"""

from __future__ import annotations

from typing import Literal, TypedDict

__all__ = ["CACHE_SETTING", "MAX_CACHE_BREAKPOINTS", "CacheSettings"]

CACHE_SETTING = "anthropic_cache"
"""The ``ModelRequest.settings`` key that asks :class:`AnthropicModel` for cache breakpoints."""

MAX_CACHE_BREAKPOINTS = 4
"""The API rejects a request with more ``cache_control`` breakpoints than this."""


class CacheSettings(TypedDict, total=False):
    """Where :class:`~deepactors.models.anthropic.AnthropicModel` puts cache breakpoints.

    Written into ``ModelRequest.settings[CACHE_SETTING]`` by
    :class:`~deepactors.middleware.AnthropicPromptCachingMiddleware`; other models
    never read it, which is what makes the middleware a no-op for them.

    Attributes:
        ttl: ``"5m"`` (the API's default) or ``"1h"``.
        tools: A breakpoint on the last tool definition (caches all tools).
        system: A breakpoint on the system prompt.
        messages: How many of the newest user turns get a breakpoint. The newest
            one writes the whole conversation to the cache; the one before it is
            exactly where the previous call wrote, so this call reads it back.
    """

    ttl: Literal["5m", "1h"]
    tools: bool
    system: bool
    messages: int
