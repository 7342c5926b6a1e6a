"""Models: the :class:`ChatModel` seam, Claude, OpenAI and compatible servers, test models.

``"provider:model-id"`` strings are resolved here (:func:`resolve_model`), through
a registry that imports nothing until a provider is used:

* :func:`register_provider` maps a provider name to a factory of the model id,
  a callable or a lazy ``"module:attribute"``;
* :func:`register_resolver` adds a resolver for strings no provider claims,
  tried before LangChain's (:data:`LANGCHAIN_RESOLVER`);
* :func:`register_model_adapter` accepts another library's model objects
  (LangChain's by default, :data:`LANGCHAIN_ADAPTER`).
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from typing import Final, cast

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
from ._providers import BUILT_IN as _BUILT_IN
from .profiles import ModelPrices as ModelPrices
from .profiles import ModelProfile as ModelProfile
from .profiles import SupportsProfile as SupportsProfile
from .profiles import profile_for as profile_for
from .profiles import profile_of as profile_of
from .profiles import register_profile as register_profile
from .testing import FunctionModel as FunctionModel
from .testing import ScriptedModel as ScriptedModel

__all__ = [
    "DEFAULT_MODEL",
    "LANGCHAIN_ADAPTER",
    "LANGCHAIN_RESOLVER",
    "PROVIDERS",
    "STRUCTURED_OUTPUT",
    "AnthropicModel",
    "ChatModel",
    "FunctionModel",
    "ModelFactory",
    "ModelPrices",
    "ModelProfile",
    "ModelRequest",
    "OpenAIModel",
    "RequestLimiter",
    "RequestLimiterStatistics",
    "ScriptedModel",
    "StreamDelta",
    "StreamPart",
    "SupportsAclose",
    "SupportsContextWindow",
    "SupportsMaxTokens",
    "SupportsProfile",
    "SupportsPromptCaching",
    "SupportsStructuredOutput",
    "context_window_of",
    "profile_for",
    "profile_of",
    "register_model_adapter",
    "register_profile",
    "register_provider",
    "register_resolver",
    "resolve_model",
]

ModelFactory = Callable[[str], ChatModel]
"""Makes a model from the id part of a ``"provider:id"`` string."""

LANGCHAIN_RESOLVER: Final = "deepactors.langchain:resolve_model_string"
"""Tried, last, for a ``"provider:id"`` string whose provider nobody registered.

``resolve_model_string(spec: str) -> ChatModel | None`` gets the whole string
(``"google_genai:gemini-3-pro"``) and returns a model, or None when LangChain's
``init_chat_model`` does not know the provider either. It is imported only
then; when it cannot be (``deepactors[langchain]`` not installed), the error
names the extra."""

LANGCHAIN_ADAPTER: Final = "deepactors.langchain:adapt_model"
"""Tried for a model object of a ``langchain_core`` or ``langchain_*`` class
(``ChatOpenAI(...)``): ``adapt_model(obj) -> ChatModel | None``."""

Target = Callable[..., ChatModel | None] | str
"""A factory, resolver or adapter: a model from what it is given (None: not mine)."""

_lock = threading.Lock()
_providers: dict[str, Target] = dict(_BUILT_IN)
_resolvers: list[Target] = [LANGCHAIN_RESOLVER]
_adapters: list[tuple[str, Target]] = [("langchain", LANGCHAIN_ADAPTER)]

PROVIDERS: Final = tuple(_BUILT_IN)
"""The providers deepactors knows by itself (:func:`register_provider` adds more)."""


def register_provider(name: str, factory: ModelFactory | str) -> None:
    """Make ``"name:<id>"`` strings resolve through ``factory``.

    Args:
        name: The provider name (replaces a provider of that name, built-in ones too).
        factory: Called with the model id; or ``"module:attribute"`` naming one,
            imported only when a string of this provider is first resolved, so
            registering costs no import.
    """
    _check_target(factory)
    with _lock:
        _providers[name] = factory


def register_resolver(resolver: Callable[[str], ChatModel | None] | str) -> None:
    """Add a resolver for strings whose provider is not registered.

    Resolvers are tried in the order registered, before :data:`LANGCHAIN_RESOLVER`;
    each gets the whole string and returns a model or None (not mine).
    ``"module:attribute"`` is imported when first needed.
    """
    _check_target(resolver)
    with _lock:
        _resolvers.insert(len(_resolvers) - 1, resolver)


def register_model_adapter(
    module_prefix: str, adapter: Callable[[object], ChatModel | None] | str
) -> None:
    """Accept model objects of another library as ``model=``.

    Args:
        module_prefix: Tried only for objects whose class's module starts with
            this (``"langchain"``), so that nothing is imported for others.
        adapter: Gets the object, returns a :class:`ChatModel` or None; or
            ``"module:attribute"`` naming one, imported when first needed.
    """
    _check_target(adapter)
    with _lock:
        _adapters.insert(0, (module_prefix, adapter))


def _check_target(target: object) -> None:
    if isinstance(target, str):
        if ":" not in target:
            raise ConfigurationError(f"{target!r} must look like 'package.module:attribute'")
    elif not callable(target):
        raise ConfigurationError(f"not callable: {target!r}")


def _load(target: Target) -> Callable[..., ChatModel | None]:
    """The callable a target names, importing its module if it is a string."""
    if not isinstance(target, str):
        return target
    module, _, attribute = target.partition(":")
    found: Callable[..., ChatModel | None] = getattr(importlib.import_module(module), attribute)
    return found


def __getattr__(name: str) -> object:
    # The SDKs are imported only when their model is asked for: a test or an
    # offline demo on the deterministic models never pays for them.
    if name in ("AnthropicModel", "DEFAULT_MODEL"):
        from . import anthropic

        return getattr(anthropic, name)
    if name == "OpenAIModel":
        try:
            from .openai import OpenAIModel
        except ImportError as exc:
            raise ImportError(f"{exc}; OpenAIModel needs pip install 'deepactors[openai]'") from exc
        return OpenAIModel
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def resolve_model(model: str | ChatModel | object | None) -> ChatModel:
    """A model instance from ``"provider:model-id"``, a model, or None (the default).

    Strings: a registered provider's factory (built in: ``anthropic``,
    ``openai``, ``openai-responses``, and the OpenAI-compatible presets
    ``ollama``, ``vllm``, ``openrouter``, ``lmstudio``, ``llamacpp``,
    ``litellm``, ``together``), else the registered resolvers, else LangChain's
    ``init_chat_model`` when ``deepactors[langchain]`` is installed. Objects: a
    :class:`ChatModel` as it is, else a registered adapter (LangChain chat models).

    Raises:
        ConfigurationError: Unknown provider, a missing extra, or a value that is
            not a model.
    """
    if model is None:
        from .anthropic import DEFAULT_MODEL

        model = f"anthropic:{DEFAULT_MODEL}"
    if isinstance(model, str):
        return _from_string(model)
    # Another library's model first: a LangChain chat model has methods named
    # like ours (generate, stream) and would pass the protocol check below.
    # By the modules of its class and its bases: a user's own subclass of
    # LangChain's BaseChatModel (a test fake, a custom provider) counts too.
    kinds = [cls.__module__ for cls in type(model).__mro__]
    for prefix, adapter in list(_adapters):
        if any(kind.startswith(prefix) for kind in kinds):
            try:
                adapt = _load(adapter)
            except (ImportError, AttributeError) as exc:
                raise ConfigurationError(
                    f"{type(model).__name__} models need pip install 'deepactors[{prefix}]' ({exc})"
                ) from exc
            found = adapt(model)
            if found is not None:
                return found
    if isinstance(model, ChatModel):
        return model
    raise ConfigurationError(f"not a model: {model!r}")


def _from_string(spec: str) -> ChatModel:
    provider, sep, model_id = spec.partition(":")
    if not sep or not model_id or not provider:
        raise ConfigurationError(
            f"model string {spec!r} must look like 'provider:model-id', "
            "e.g. 'anthropic:claude-sonnet-5-5' or 'openai:gpt-5.5'"
        )
    factory = _providers.get(provider)
    if factory is not None:
        try:
            made = _load(factory)(model_id)
        except ImportError as exc:
            raise ConfigurationError(
                f"{spec!r} needs an optional dependency: {exc} "
                f"(pip install 'deepactors[{_EXTRAS.get(provider, provider)}]')"
            ) from exc
        return cast("ChatModel", made)
    missing: ImportError | None = None
    for resolver in list(_resolvers):
        try:
            resolve = _load(resolver)
        except (ImportError, AttributeError) as exc:
            # Its extra is not installed (or not built yet): try the next one.
            missing = ImportError(str(exc))
            continue
        found = resolve(spec)
        if found is not None:
            return found
    known = ", ".join(sorted(_providers))
    hint = (
        " With pip install 'deepactors[langchain]', LangChain's init_chat_model "
        "providers are known too."
        if missing is not None
        else ""
    )
    raise ConfigurationError(
        f"unknown model provider {provider!r} in {spec!r}; known: {known} "
        f"(or pass a ChatModel instance).{hint}"
    )


# The extra that brings each built-in provider's SDK.
_EXTRAS: Final = {
    "anthropic": "anthropic",
    **{name: "openai" for name in _BUILT_IN if name != "anthropic"},
}


# Reprs and tracebacks name the public package, not the private module (see _core.public).
_publish(__all__, __name__, globals())
