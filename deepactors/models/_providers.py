"""The built-in providers of ``"provider:model"`` strings, SDK-free until one is used.

Each factory takes the model id and returns a model; the SDK behind it is
imported only then. The OpenAI-compatible presets read their base URL and key
from the environment variables their servers' own tools use.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import ConfigurationError

if TYPE_CHECKING:
    from ._base import ChatModel

__all__ = ["COMPATIBLE", "OpenAICompatible", "anthropic", "openai", "openai_responses"]


def anthropic(model_id: str) -> ChatModel:
    """``anthropic:<id>``: Claude (``ANTHROPIC_API_KEY``)."""
    from .anthropic import AnthropicModel

    return AnthropicModel(model_id)


def openai(model_id: str) -> ChatModel:
    """``openai:<id>``: OpenAI's Chat Completions API (``OPENAI_API_KEY``, ``OPENAI_BASE_URL``)."""
    from .openai import OpenAIModel

    return OpenAIModel(model_id)


def openai_responses(model_id: str) -> ChatModel:
    """``openai-responses:<id>``: OpenAI's Responses API."""
    from .openai import OpenAIModel

    return OpenAIModel(model_id, api="responses")


@dataclass(frozen=True, slots=True, kw_only=True)
class OpenAICompatible:
    """A preset for an OpenAI-compatible server.

    Attributes:
        name: The provider name in model strings.
        label: Its name in error messages.
        base_url_env: Environment variables giving its base URL, first set wins.
        default_base_url: The base URL when none is set.
        key_env: Environment variables giving its API key, first set wins.
        default_key: The key when none is set; None: a key is required.
        host_env: A variable holding ``host:port`` only (``OLLAMA_HOST``), made
            into ``http://host:port/v1``.
    """

    name: str
    label: str
    base_url_env: tuple[str, ...]
    default_base_url: str
    key_env: tuple[str, ...]
    default_key: str | None
    host_env: str | None = None

    def base_url(self) -> str:
        """The base URL from the environment, else the default."""
        for var in self.base_url_env:
            if value := os.environ.get(var):
                return _with_v1(value)
        if self.host_env and (host := os.environ.get(self.host_env)):
            if "://" not in host:
                host = "http://" + host
            return _with_v1(host)
        return self.default_base_url

    def api_key(self) -> str:
        """The key from the environment, else the default.

        Raises:
            ConfigurationError: A key is required and none is set.
        """
        for var in self.key_env:
            if value := os.environ.get(var):
                return value
        if self.default_key is None:
            raise ConfigurationError(
                f"no API key for {self.label}: set {' or '.join(self.key_env)}"
            )
        return self.default_key

    def __call__(self, model_id: str, **options: Any) -> ChatModel:
        from .openai import OpenAIModel

        # Compatible servers read max_tokens; not all know max_completion_tokens.
        options.setdefault("max_tokens_param", "max_tokens")
        return OpenAIModel(
            model_id,
            base_url=self.base_url(),
            api_key=self.api_key(),
            provider=self.label,
            **options,
        )


def _with_v1(url: str) -> str:
    url = url.rstrip("/")
    return url if url.endswith("/v1") else url + "/v1"


COMPATIBLE: dict[str, OpenAICompatible] = {
    preset.name: preset
    for preset in (
        OpenAICompatible(
            name="ollama",
            label="Ollama",
            base_url_env=("OLLAMA_BASE_URL",),
            host_env="OLLAMA_HOST",
            default_base_url="http://localhost:11434/v1",
            key_env=("OLLAMA_API_KEY",),
            default_key="ollama",
        ),
        OpenAICompatible(
            name="vllm",
            label="vLLM",
            base_url_env=("VLLM_BASE_URL",),
            default_base_url="http://localhost:8000/v1",
            key_env=("VLLM_API_KEY",),
            default_key="EMPTY",
        ),
        OpenAICompatible(
            name="openrouter",
            label="OpenRouter",
            base_url_env=("OPENROUTER_BASE_URL",),
            default_base_url="https://openrouter.ai/api/v1",
            key_env=("OPENROUTER_API_KEY",),
            default_key=None,
        ),
        OpenAICompatible(
            name="lmstudio",
            label="LM Studio",
            base_url_env=("LMSTUDIO_BASE_URL", "LM_STUDIO_BASE_URL"),
            default_base_url="http://localhost:1234/v1",
            key_env=("LMSTUDIO_API_KEY",),
            default_key="lm-studio",
        ),
        OpenAICompatible(
            name="llamacpp",
            label="llama.cpp server",
            base_url_env=("LLAMACPP_BASE_URL",),
            default_base_url="http://localhost:8080/v1",
            key_env=("LLAMACPP_API_KEY",),
            default_key="EMPTY",
        ),
        OpenAICompatible(
            name="litellm",
            label="LiteLLM",
            base_url_env=("LITELLM_BASE_URL", "LITELLM_PROXY_API_BASE"),
            default_base_url="http://localhost:4000/v1",
            key_env=("LITELLM_API_KEY", "LITELLM_PROXY_API_KEY"),
            default_key="EMPTY",
        ),
        OpenAICompatible(
            name="together",
            label="Together AI",
            base_url_env=("TOGETHER_BASE_URL",),
            default_base_url="https://api.together.xyz/v1",
            key_env=("TOGETHER_API_KEY",),
            default_key=None,
        ),
    )
}
"""The OpenAI-compatible presets by provider name."""

BUILT_IN: dict[str, Callable[[str], ChatModel]] = {
    "anthropic": anthropic,
    "openai": openai,
    "openai-responses": openai_responses,
    **COMPATIBLE,
}
"""Every provider deepactors knows by itself."""
