"""Retrying model calls that failed for a passing reason (rate limits, overload)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Literal

import anyio

from deepactors.errors import (
    ConfigurationError,
    ModelConnectionError,
    OverloadedError,
    RateLimitError,
)
from deepactors.events import ModelRetry
from deepactors.messages import AssistantMessage
from deepactors.models import ModelRequest

from ..hooks import AgentMiddleware, ModelHandler

__all__ = ["ModelRetryMiddleware"]


class ModelRetryMiddleware(AgentMiddleware):
    """Retry a model call that raised a retryable error, with backoff.

    The wait before retry ``n`` (1-based) is ``initial_delay * 2 ** (n - 1)``,
    capped at ``max_delay``; with ``jitter`` it is scaled by a random factor in
    ``[0.5, 1]`` so that many subagents throttled together do not come back
    together. When the error carries the server's ``retry_after``, that is the
    wait instead (capped at ``max_delay``), and jitter only ever lengthens it
    (never past ``max_delay``).

    Waiting is ``anyio.sleep``: cancellation interrupts it. A wait that could not
    end before the effective deadline (``anyio.current_effective_deadline()``,
    e.g. a run's ``timeout``) is not started: the attempts count as exhausted
    there and then, so the caller sees the model's error (a rate limit, say)
    rather than a ``TimeoutError`` that hides it.
    Each retry is announced to the run's listeners as a
    :class:`~deepactors.events.ModelRetry` event (``attempt``, ``delay``,
    ``error``); nothing is built when nobody listens.

    Put it last in the stack (innermost, right around the model), so that a retry
    repeats only the model call and not the work of other middleware.

    Args:
        max_attempts: Calls in all, the first one included (>= 1).
        retry_on: The error types worth retrying.
        initial_delay: Seconds before the first retry.
        max_delay: The longest wait between two attempts.
        jitter: Randomise the waits.
        on_exhausted: ``"raise"`` the last error, or answer with an
            :class:`AssistantMessage` saying what failed (``stop_reason="error"``),
            which ends the run (or the subagent) with that text instead of an
            exception.
    """

    def __init__(
        self,
        max_attempts: int = 4,
        *,
        retry_on: Sequence[type[Exception]] = (
            RateLimitError,
            OverloadedError,
            ModelConnectionError,
        ),
        initial_delay: float = 1.0,
        max_delay: float = 60.0,
        jitter: bool = True,
        on_exhausted: Literal["raise", "message"] = "raise",
    ) -> None:
        if max_attempts < 1:
            raise ConfigurationError(f"max_attempts must be >= 1, not {max_attempts}")
        if initial_delay < 0 or max_delay < 0:
            raise ConfigurationError("initial_delay and max_delay must be >= 0")
        if on_exhausted not in ("raise", "message"):
            raise ConfigurationError(
                f"on_exhausted must be 'raise' or 'message', not {on_exhausted!r}"
            )
        self.max_attempts = max_attempts
        self.retry_on = tuple(retry_on)
        self.initial_delay = initial_delay
        self.max_delay = max_delay
        self.jitter = jitter
        self.on_exhausted = on_exhausted

    def delay_for(self, attempt: int, error: BaseException) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        retry_after: object = getattr(error, "retry_after", None)
        if isinstance(retry_after, int | float) and retry_after >= 0:
            base = min(float(retry_after), self.max_delay)
            # The server named the earliest sensible time: spread out after it, never before.
            if not self.jitter:
                return base
            return min(base * (1 + 0.25 * random.random()), self.max_delay)
        base = min(self.initial_delay * 2.0 ** (attempt - 1), self.max_delay)
        return base * (0.5 + 0.5 * random.random()) if self.jitter else base

    async def wrap_model_call(
        self, request: ModelRequest, handler: ModelHandler
    ) -> AssistantMessage:
        """Call ``handler``; on a retryable error wait and call it again."""
        attempt = 1
        while True:
            try:
                return await handler(request)
            except self.retry_on as exc:
                delay = self.delay_for(attempt, exc)
                # A wait cut short by the deadline would only trade this error for a
                # TimeoutError; give up now instead, with the cause intact.
                too_late = anyio.current_time() + delay >= anyio.current_effective_deadline()
                if attempt >= self.max_attempts or too_late:
                    if self.on_exhausted == "message":
                        return _failure_message(exc, attempt)
                    raise
                run = request.run
                if run is not None and run.emit is not None:
                    run.emit(
                        ModelRetry(
                            path=run.path,
                            run_id=run.run_id,
                            attempt=attempt,
                            delay=delay,
                            error=f"{type(exc).__name__}: {exc}",
                        )
                    )
                await anyio.sleep(delay)
                attempt += 1


def _failure_message(exc: Exception, attempts: int) -> AssistantMessage:
    return AssistantMessage(
        content=f"The model call failed after {attempts} attempt(s): {type(exc).__name__}: {exc}",
        stop_reason="error",
    )
