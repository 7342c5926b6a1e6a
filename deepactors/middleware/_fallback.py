"""Model fallback: when a model fails past its retries, the next one answers."""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import ConfigurationError, ModelAPIError
from ..events import ModelFallback
from ..hooks import AgentMiddleware, ModelHandler
from ..messages import AssistantMessage
from ..models import ChatModel, ModelRequest, resolve_model

__all__ = ["ModelFallbackMiddleware"]


class ModelFallbackMiddleware(AgentMiddleware):
    """Ask the next model when a model call fails with one of ``on``.

    Put it among your middleware (``middleware=[ModelFallbackMiddleware(...)]``):
    the default ``ModelRetryMiddleware`` sits inside it, so each model gets its
    retries before the next is asked. Each switch is a
    :class:`~deepactors.events.ModelFallback` event, and the answer's ``model``
    names the model that gave it. A run's budget reserves for every model asked.

    Args:
        *models: Fallback models in the order to try them:
            :class:`~deepactors.models.ChatModel` objects or ``"anthropic:<id>"``.
        on: The errors that move on to the next model (default: any
            :class:`~deepactors.errors.ModelAPIError`: rate limits and overload
            that retries did not fix, rejected requests, a context window too small).

    Raises:
        ConfigurationError: No models, or one that cannot be resolved.
    """

    def __init__(
        self, *models: str | ChatModel, on: Sequence[type[Exception]] = (ModelAPIError,)
    ) -> None:
        if not models:
            raise ConfigurationError("ModelFallbackMiddleware needs at least one fallback model")
        self.models: tuple[ChatModel, ...] = tuple(resolve_model(m) for m in models)
        self.on = tuple(on)

    async def wrap_model_call(
        self, request: ModelRequest, handler: ModelHandler
    ) -> AssistantMessage:
        """Call ``handler``; on an error in ``on``, again with each fallback model."""
        try:
            return await handler(request)
        except self.on as exc:
            error: Exception = exc
        failed = request.model
        for model in self.models:
            run = request.run
            if run is not None and run.emit is not None:
                run.emit(
                    ModelFallback(
                        path=run.path,
                        run_id=run.run_id,
                        failed=failed.model_name if failed is not None else "(the agent's model)",
                        error=f"{type(error).__name__}: {error}",
                        next=model.model_name,
                    )
                )
            try:
                message = await handler(request.replace(model=model))
            except self.on as exc:
                exc.__context__ = error
                error, failed = exc, model
                continue
            if message.model is None:
                message = message.model_copy(update={"model": model.model_name})
            return message
        raise error
