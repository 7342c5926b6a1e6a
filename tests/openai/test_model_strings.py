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


class _Foreign:
    """A model object of another library."""

    def __init__(self, name: str) -> None:
        self.name = name


_Foreign.__module__ = "fakelib.chat"


def test_the_registry_takes_factories_lazy_targets_resolvers_and_adapters() -> None:
    from deepactors.models import (
        FunctionModel,
        _adapters,
        _providers,
        _resolvers,
        register_model_adapter,
        register_provider,
        register_resolver,
    )

    made: list[str] = []

    def factory(model_id: str) -> FunctionModel:
        made.append(model_id)
        return FunctionModel(lambda request: "hi", name=model_id)

    saved = (dict(_providers), list(_resolvers), list(_adapters))
    try:
        register_provider("house", factory)
        assert resolve_model("house:m-1").model_name == "m-1"
        # A lazy target: imported when first used.
        register_provider("lazy", "tests.openai.test_model_strings:_lazy_factory")
        assert resolve_model("lazy:x").model_name == "lazy x"
        register_resolver(lambda spec: factory(spec) if spec.startswith("weird:") else None)
        assert resolve_model("weird:thing").model_name == "weird:thing"
        register_model_adapter("fakelib", lambda obj: factory(f"adapted {obj.name}"))
        assert resolve_model(_Foreign("q")).model_name == "adapted q"
        with pytest.raises(ConfigurationError, match="module:attribute"):
            register_provider("bad", "no-colon-here")
    finally:
        _providers.clear()
        _providers.update(saved[0])
        _resolvers[:] = saved[1]
        _adapters[:] = saved[2]
    with pytest.raises(ConfigurationError, match="not a model"):
        resolve_model(_Foreign("q"))


def _lazy_factory(model_id: str) -> object:
    from deepactors.models import FunctionModel

    return FunctionModel(lambda request: "hi", name=f"lazy {model_id}")


def test_an_unknown_provider_names_the_langchain_extra_when_it_is_missing() -> None:
    from deepactors.models import _resolvers

    saved = list(_resolvers)
    _resolvers[:] = ["deepactors_not_installed.langchain:resolve_model_string"]
    try:
        with pytest.raises(ConfigurationError) as info:
            resolve_model("google_genai:gemini-3-pro")
    finally:
        _resolvers[:] = saved
    message = str(info.value)
    assert "unknown model provider 'google_genai'" in message
    assert "deepactors[langchain]" in message
