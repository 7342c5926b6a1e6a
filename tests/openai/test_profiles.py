"""Model profiles: the built-in table, your own entries, and who reads them."""

from __future__ import annotations

import pytest

from deepactors.messages import Usage
from deepactors.middleware import SummarizationMiddleware
from deepactors.models import FunctionModel, context_window_of, register_profile
from deepactors.models.anthropic import AnthropicModel
from deepactors.models.openai import OpenAIModel
from deepactors.models.profiles import PRICES_AS_OF, ModelPrices, ModelProfile, profile_for


def test_profiles_match_dated_ids_and_can_be_overridden() -> None:
    from deepactors.models import register_profile

    assert profile_for("gpt-5-2025-08-07") == profile_for("gpt-5")
    assert profile_for("gpt-5.6-sol") != profile_for("gpt-5")
    assert profile_for("claude-sonnet-5-5-20261001").context_window == 1_000_000  # type: ignore[union-attr]
    assert profile_for("my-local-model") is None
    mine = ModelProfile(context_window=32_000, prices=ModelPrices(input=1, output=2))
    register_profile("my-local", mine)
    try:
        assert profile_for("my-local-model") == mine
        usage = Usage(input_tokens=1_000_000, output_tokens=500_000)
        assert mine.cost(usage) == pytest.approx(2.0)
        model = OpenAIModel("my-local-model", api_key="k")
        assert (model.context_window, model.max_tokens) == (32_000, 32_768)
    finally:
        register_profile("my-local", None)


def test_summarization_sizes_its_trigger_from_a_registered_profile() -> None:
    model = FunctionModel(lambda request: "ok", name="house-model-7b")
    assert context_window_of(model) is None
    register_profile("house-model", ModelProfile(context_window=100_000))
    try:
        assert context_window_of(model) == 100_000
        middleware = SummarizationMiddleware(model, trigger=("fraction", 0.5))
        assert middleware.limits.trigger_tokens == 50_000
    finally:
        register_profile("house-model", None)


def test_claude_and_gpt_profiles_have_prices_and_windows() -> None:
    assert PRICES_AS_OF == "2026-11-25"
    claude = AnthropicModel("claude-opus-5-5", api_key="k")
    assert claude.context_window == 1_000_000
    assert claude.profile is not None
    assert claude.profile.prices == ModelPrices(input=4, output=20, cached_input=0.2, cache_write=5)
    own = ModelProfile(context_window=50_000)
    assert AnthropicModel("claude-opus-5-5", api_key="k", profile=own).context_window == 50_000
    for model_id in ("gpt-5.5", "gpt-5.4-mini", "gpt-6.1-terra", "o3", "gpt-4.1"):
        profile = profile_for(model_id)
        assert profile is not None
        assert profile.prices is not None
        assert profile.context_window
    assert profile_for("openai/gpt-5.4") == profile_for("gpt-5.4")  # a gateway's id
