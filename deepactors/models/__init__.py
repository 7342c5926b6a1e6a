"""Models: the :class:`ChatModel` seam, Claude, and deterministic test models."""

from __future__ import annotations

from .._core.public import publish as _publish
from ..errors import ConfigurationError
from ._base import STRUCTURED_OUTPUT as STRUCTURED_OUTPUT
from ._base import ChatModel as ChatModel
from ._base import ModelRequest as ModelRequest
from ._base import StreamDelta as StreamDelta
from ._base import StreamPart as StreamPart
from ._base import SupportsAclose as SupportsAclose
from ._base import SupportsContextWindow as SupportsContextWindow
from ._base import SupportsMaxTokens as SupportsMaxTokens
from ._base import SupportsPromptCaching as SupportsPromptCaching
from ._base import SupportsStructuredOutput as SupportsStructuredOutput
from ._base import context_window_of as context_window_of
from ._limiter import RequestLimiter as RequestLimiter
from ._limiter import RequestLimiterStatistics as RequestLimiterStatistics
from .testing import FunctionModel as FunctionModel
from .testing import ScriptedModel as ScriptedModel

__all__ = [
    "DEFAULT_MODEL",
    "STRUCTURED_OUTPUT",
    "AnthropicModel",
    "ChatModel",
    "FunctionModel",
    "ModelRequest",
    "RequestLimiter",
    "RequestLimiterStatistics",
    "ScriptedModel",
    "StreamDelta",
    "StreamPart",
    "SupportsAclose",
    "SupportsContextWindow",
    "SupportsMaxTokens",
    "SupportsPromptCaching",
    "SupportsStructuredOutput",
    "context_window_of",
    "resolve_model",
]

PROVIDERS = ("anthropic",)


def __getattr__(name: str) -> object:
    # The Anthropic SDK is imported only when Claude is asked for: a test or an
    # offline demo on the deterministic models never pays for it.
    if name in ("AnthropicModel", "DEFAULT_MODEL"):
        from . import anthropic

        return getattr(anthropic, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def resolve_model(model: str | ChatModel | None) -> ChatModel:
    """A model instance from ``"provider:model-id"``, a model, or None (the default).

    Raises:
        ConfigurationError: Unknown provider or a value that is not a model.
    """
    if model is None:
        from .anthropic import DEFAULT_MODEL

        model = f"anthropic:{DEFAULT_MODEL}"
    if isinstance(model, str):
        provider, sep, model_id = model.partition(":")
        if not sep or not model_id:
            raise ConfigurationError(
                f"model string {model!r} must look like 'anthropic:claude-sonnet-5-5'"
            )
        if provider == "anthropic":
            from .anthropic import AnthropicModel

            return AnthropicModel(model_id)
        raise ConfigurationError(
            f"unknown model provider {provider!r} in {model!r}; known: {', '.join(PROVIDERS)} "
            "(or pass a ChatModel instance)"
        )
    if isinstance(model, ChatModel):
        return model
    raise ConfigurationError(f"not a model: {model!r}")


# Reprs and tracebacks name the public package, not the private module (see _core.public).
_publish(__all__, __name__, globals())
