"""``provider:model`` strings: built-in providers, OpenAI-compatible presets, the registry."""

from __future__ import annotations

import pytest

from deepactors.errors import ConfigurationError
from deepactors.models import resolve_model
from deepactors.models.openai import OpenAIModel
from deepactors.models.profiles import profile_for


def test_model_strings_and_presets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OLLAMA_HOST", "gpu-box:11434")
    monkeypatch.setenv("VLLM_BASE_URL", "http://vllm.local:9000/v1/")
    monkeypatch.setenv("OPENROUTER_API_KEY", "or-key")
    monkeypatch.delenv("OLLAMA_BASE_URL", raising=False)
    ollama = resolve_model("ollama:llama3.3:70b")
    assert isinstance(ollama, OpenAIModel)
    assert ollama.model_name == "llama3.3:70b"
    assert ollama._client_args["base_url"] == "http://gpu-box:11434/v1"
    assert ollama.max_tokens is None
    assert ollama.max_tokens_param == "max_tokens"
    vllm = resolve_model("vllm:Qwen/Qwen3-32B")
    assert vllm._client_args["base_url"] == "http://vllm.local:9000/v1"  # type: ignore[attr-defined]
    router = resolve_model("openrouter:openai/gpt-5.5")
    assert router._client_args["api_key"] == "or-key"  # type: ignore[attr-defined]
    assert router.profile == profile_for("gpt-5.5")  # type: ignore[attr-defined]
    responses = resolve_model("openai-responses:gpt-5.4-mini")
    assert isinstance(responses, OpenAIModel)
    assert responses.api == "responses"
    monkeypatch.delenv("OPENROUTER_API_KEY")
    with pytest.raises(ConfigurationError, match="OPENROUTER_API_KEY"):
        resolve_model("openrouter:x")
    with pytest.raises(ConfigurationError, match="unknown model provider 'nope'"):
        resolve_model("nope:model")
