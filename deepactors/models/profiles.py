"""Model profiles: what a model can hold, what it can do, and what it costs.

A :class:`ModelProfile` says a model's context window, its output limit, its
capabilities and its prices per million tokens. Summarization sizes its trigger
from the context window (:func:`~deepactors.models.context_window_of`), a
:class:`~deepactors.Budget` reserves a call's ``max_tokens`` and, with
``Budget(usd=...)``, its worst-case price, and every model call's cost in
dollars is computed from its usage and its model's prices.

Where a profile comes from, first found wins:
    1. ``profile=`` given to the model (``OpenAIModel(..., profile=...)``).
    2. :func:`register_profile`: your own entries, matched like the table below.
    3. The built-in table, by model id: the longest known prefix of the id that
       ends at the id's end or before ``-``, ``@``, ``:`` or ``[`` (so a dated id,
       ``gpt-5-2025-08-07``, finds ``gpt-5``, and ``gpt-5.6-sol`` does not). A
       gateway's ``vendor/model`` id (OpenRouter) is looked up by its model part.

An id nobody knows has no profile: its cost is unknown (``None``), and
``Budget(usd=...)`` refuses to call it rather than guess.

Prices
    US dollars per million tokens at the providers' standard tier, as published
    on **2026-11-25** (Anthropic: platform.claude.com/docs/en/about-claude/pricing;
    OpenAI: developers.openai.com/api/docs/pricing and the model pages). Not
    modelled: batch and flex discounts, priority and fast tiers, regional
    surcharges, the long-context rates above 272k input tokens (OpenAI) and
    Haiku 5.5's band above 100k prompt tokens (the lower band is listed), 1-hour
    cache writes (the 5-minute price is used). Prices change: check them, and
    register your own where they differ.
"""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass
from typing import Final, Protocol, TypedDict, Unpack, final, runtime_checkable

from ..messages import Usage
from ._anthropic_windows import context_window_for

__all__ = [
    "PRICES_AS_OF",
    "ModelPrices",
    "ModelProfile",
    "SupportsProfile",
    "profile_for",
    "profile_of",
    "register_profile",
]

PRICES_AS_OF: Final = "2026-11-25"
"""The date the built-in prices were read from the providers' pages."""


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class ModelPrices:
    """Prices in US dollars per million tokens.

    Attributes:
        input: Input tokens not read from a cache.
        output: Output tokens (reasoning tokens included: they are billed as output).
        cached_input: Input tokens read from the prompt cache; default: ``input``.
        cache_write: Input tokens written to the prompt cache (Claude); default: ``input``.
    """

    input: float
    output: float
    cached_input: float | None = None
    cache_write: float | None = None

    def cost(self, usage: Usage) -> float:
        """The dollars ``usage`` costs at these prices."""
        cached = self.input if self.cached_input is None else self.cached_input
        write = self.input if self.cache_write is None else self.cache_write
        return (
            usage.input_tokens * self.input
            + usage.output_tokens * self.output
            + usage.cache_read_tokens * cached
            + usage.cache_write_tokens * write
        ) / 1_000_000

    def per_token_pico(self) -> tuple[int, int, int, int]:
        """Prices per token in pico-dollars (1e-12 $), rounded up: input, output,
        cached input, cache write. Integers, so that a budget adds without drift."""
        cached = self.input if self.cached_input is None else self.cached_input
        write = self.input if self.cache_write is None else self.cache_write
        return (_pico(self.input), _pico(self.output), _pico(cached), _pico(write))


def _pico(per_million: float) -> int:
    # $/M tokens * 1e6 = pico-dollars per token; rounded up, never below the price.
    value = per_million * 1_000_000
    whole = int(value)
    return whole if whole >= value else whole + 1


class ProfileChanges(TypedDict, total=False):
    """The fields :meth:`ModelProfile.replace` may change, each as the profile types it."""

    context_window: int | None
    max_output_tokens: int | None
    tools: bool
    parallel_tool_calls: bool
    images: bool
    structured_output: bool
    prompt_caching: bool
    reasoning: bool
    prices: ModelPrices | None


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class ModelProfile:
    """What one model can hold and do, and what it costs.

    Attributes:
        context_window: The most input tokens one request may have; None: unknown.
        max_output_tokens: The most output tokens one call may produce; None: unknown.
        tools: Takes tool definitions.
        parallel_tool_calls: May ask for several tool calls in one answer.
        images: Reads images in its input.
        structured_output: Can constrain its answer to a JSON schema natively.
        prompt_caching: Reuses a cached prompt prefix (cheaper cached input).
        reasoning: Reasons before it answers (reasoning effort, reasoning items).
        prices: Dollars per million tokens; None: unknown.
    """

    context_window: int | None = None
    max_output_tokens: int | None = None
    tools: bool = True
    parallel_tool_calls: bool = True
    images: bool = False
    structured_output: bool = False
    prompt_caching: bool = False
    reasoning: bool = False
    prices: ModelPrices | None = None

    def replace(self, **changes: Unpack[ProfileChanges]) -> ModelProfile:
        """A copy with some fields changed (``profile.replace(prices=...)``)."""
        return dataclasses.replace(self, **changes)

    def cost(self, usage: Usage | None) -> float | None:
        """The dollars ``usage`` costs, or None when the prices or the usage are unknown."""
        if self.prices is None or usage is None:
            return None
        return self.prices.cost(usage)


@runtime_checkable
class SupportsProfile(Protocol):
    """A model that carries its own :class:`ModelProfile` (or None when unknown)."""

    @property
    def profile(self) -> ModelProfile | None:
        """The model's profile."""
        ...


def _p(inp: float, cached: float, out: float, write: float | None = None) -> ModelPrices:
    return ModelPrices(input=inp, output=out, cached_input=cached, cache_write=write)


_K: Final = 1000
_M: Final = 1_000_000


def _claude(
    prices: ModelPrices, model_id: str, max_out: int, *, structured: bool = True
) -> ModelProfile:
    return ModelProfile(
        context_window=context_window_for(model_id),
        max_output_tokens=max_out,
        images=True,
        structured_output=structured,
        prompt_caching=True,
        reasoning=True,
        prices=prices,
    )


def _gpt(
    prices: ModelPrices,
    window: int,
    max_out: int,
    *,
    reasoning: bool = True,
    structured: bool = True,
) -> ModelProfile:
    return ModelProfile(
        context_window=window,
        max_output_tokens=max_out,
        images=True,
        structured_output=structured,
        prompt_caching=True,
        reasoning=reasoning,
        prices=prices,
    )


def _claude_table() -> dict[str, ModelProfile]:
    table: dict[str, ModelProfile] = {}
    rows: list[tuple[tuple[str, ...], ModelPrices, int]] = [
        (("claude-fable-5-1", "claude-mythos-5-1"), _p(10, 0.25, 50, 12.5), 128 * _K),
        (("claude-fable-5", "claude-mythos-5"), _p(10, 1, 50, 12.5), 128 * _K),
        (("claude-opus-5-5",), _p(4, 0.2, 20, 5), 128 * _K),
        (("claude-opus-5", "claude-opus-4-8", "claude-opus-4-7"), _p(5, 0.5, 25, 6.25), 128 * _K),
        (("claude-opus-4-6",), _p(5, 0.5, 25, 6.25), 128 * _K),
        (("claude-opus-4-5",), _p(5, 0.5, 25, 6.25), 64 * _K),
        (("claude-sonnet-5-5",), _p(2, 0.1, 10, 2.5), 128 * _K),
        (("claude-sonnet-5",), _p(2, 0.2, 10, 2.5), 128 * _K),
        (("claude-sonnet-4-6", "claude-sonnet-4-5"), _p(3, 0.3, 15, 3.75), 64 * _K),
        (("claude-haiku-5-5",), _p(0.1, 0.01, 0.5, 0.125), 128 * _K),
        (("claude-haiku-4-5",), _p(1, 0.1, 5, 1.25), 64 * _K),
    ]
    for ids, prices, max_out in rows:
        for model_id in ids:
            table[model_id] = _claude(prices, model_id, max_out)
    old = _p(15, 1.5, 75, 18.75)
    for model_id in ("claude-opus-4-1", "claude-opus-4-0", "claude-opus-4"):
        table[model_id] = _claude(old, model_id, 32 * _K, structured=False)
    for model_id in ("claude-sonnet-4-0", "claude-sonnet-4"):
        table[model_id] = _claude(_p(3, 0.3, 15, 3.75), model_id, 64 * _K, structured=False)
    return table


def _openai_table() -> dict[str, ModelProfile]:
    six = 1_050_000  # GPT-6: 922k input + 128k output
    table = {
        "gpt-6-astra": _gpt(_p(10, 1, 50), six, 128 * _K),
        "gpt-6-sol": _gpt(_p(2, 0.2, 10), six, 128 * _K),
        "gpt-6-luna": _gpt(_p(0.1, 0.01, 0.5), six, 128 * _K),
        "gpt-6.1-sol": _gpt(_p(2, 0.1, 10), six, 128 * _K),
        "gpt-6.1-terra": _gpt(_p(1, 0.05, 5), six, 128 * _K),
        "gpt-5.6-sol": _gpt(_p(5, 0.5, 30), six, 128 * _K),
        "gpt-5.6-terra": _gpt(_p(2, 0.2, 12), six, 128 * _K),
        "gpt-5.6-luna": _gpt(_p(0.2, 0.02, 1.2), six, 128 * _K),
        "gpt-5.5": _gpt(_p(5, 0.5, 30), _M, 128 * _K),
        "gpt-5.4": _gpt(_p(2.5, 0.25, 15), _M, 128 * _K),
        "gpt-5.4-mini": _gpt(_p(0.75, 0.075, 4.5), _M, 128 * _K),
        "gpt-5.4-nano": _gpt(_p(0.2, 0.02, 1.25), _M, 128 * _K),
        "gpt-5.2": _gpt(_p(1.75, 0.175, 14), 400 * _K, 128 * _K),
        "gpt-5.1": _gpt(_p(1.25, 0.125, 10), 400 * _K, 128 * _K),
        "gpt-5": _gpt(_p(1.25, 0.125, 10), 400 * _K, 128 * _K),
        "gpt-5-mini": _gpt(_p(0.25, 0.025, 2), 400 * _K, 128 * _K),
        "gpt-5-nano": _gpt(_p(0.05, 0.005, 0.4), 400 * _K, 128 * _K),
        "gpt-4.1": _gpt(_p(2, 0.5, 8), 1_047_576, 32_768, reasoning=False),
        "gpt-4.1-mini": _gpt(_p(0.4, 0.1, 1.6), 1_047_576, 32_768, reasoning=False),
        "gpt-4.1-nano": _gpt(_p(0.1, 0.025, 0.4), 1_047_576, 32_768, reasoning=False),
        "gpt-4o": _gpt(_p(2.5, 1.25, 10), 128 * _K, 16_384, reasoning=False),
        "gpt-4o-mini": _gpt(_p(0.15, 0.075, 0.6), 128 * _K, 16_384, reasoning=False),
        "o3": _gpt(_p(2, 0.5, 8), 200 * _K, 100 * _K),
        "o4-mini": _gpt(_p(1.1, 0.275, 4.4), 200 * _K, 100 * _K),
    }
    # Chat-only aliases of the same models answer without reasoning controls.
    for alias in ("gpt-5-chat-latest", "gpt-5.1-chat-latest", "gpt-5.2-chat-latest"):
        base = table[alias.removesuffix("-chat-latest")]
        table[alias] = base.replace(
            reasoning=False, context_window=128 * _K, max_output_tokens=16_384
        )
    return table


_BUILT_IN: Final[dict[str, ModelProfile]] = {**_claude_table(), **_openai_table()}

_lock = threading.Lock()
_registered: dict[str, ModelProfile] = {}
_cache: dict[str, ModelProfile | None] = {}


def register_profile(model_id: str, profile: ModelProfile | None) -> None:
    """Use ``profile`` for ``model_id`` and every id it is a prefix of (see the module docstring).

    Your entries win over the built-in table. ``None`` removes your entry for that id.
    Models given a ``profile=`` of their own keep it.
    """
    with _lock:
        if profile is None:
            _registered.pop(model_id, None)
        else:
            _registered[model_id] = profile
        _cache.clear()


def _match(table: dict[str, ModelProfile], model_id: str) -> ModelProfile | None:
    best: str | None = None
    for key in table:
        fits = model_id.startswith(key) and (
            len(model_id) == len(key) or model_id[len(key)] in "-@:["
        )
        if fits and (best is None or len(key) > len(best)):
            best = key
    return None if best is None else table[best]


def profile_for(model_id: str) -> ModelProfile | None:
    """The profile of a model id: yours (:func:`register_profile`), else the built-in one."""
    try:
        return _cache[model_id]
    except KeyError:
        pass  # not looked up yet
    short = model_id.rpartition("/")[2]
    with _lock:
        profile = _match(_registered, model_id) or _match(_registered, short)
        if profile is None:
            profile = _match(_BUILT_IN, short)
        _cache[model_id] = profile
    return profile


def profile_of(model: object) -> ModelProfile | None:
    """A model's profile: its own (:class:`SupportsProfile`), else by its ``model_name``."""
    own = getattr(model, "profile", None)
    if isinstance(own, ModelProfile):
        return own
    name = getattr(model, "model_name", None)
    return profile_for(name) if isinstance(name, str) else None
