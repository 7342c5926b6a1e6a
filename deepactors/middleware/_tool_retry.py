"""Retrying tools that raised a passing error (a flaky network call, a busy service)."""

from __future__ import annotations

import dataclasses
import functools
import random
from collections.abc import Callable, Collection, Sequence

import anyio
import anyio.to_thread

from ..context import RunContext
from ..errors import ConfigurationError, ToolError
from ..events import CustomEvent
from ..hooks import AgentMiddleware, ToolCallRequest, ToolHandler
from ..interrupts import Interrupt
from ..messages import ToolMessage
from ..tools import Command, Tool

__all__ = ["ToolRetryMiddleware"]


class ToolRetryMiddleware(AgentMiddleware):
    """Run a tool again when it raises one of ``retry_on``, with backoff and jitter.

    Only the tool's own function is retried: its arguments are validated once,
    and the other middleware around the call (human approval, result eviction)
    see one call. The wait before retry ``n`` is ``initial_delay * backoff_factor
    ** (n - 1)``, capped at ``max_delay``, scaled by a random factor in ``[0.5, 1]``
    with ``jitter``; a wait that would end past the run's deadline is not
    started. When the last attempt fails, its error becomes the call's error
    result (naming how many attempts were made), as any tool error does. Each
    retry is a :class:`~deepactors.events.CustomEvent` with ``data={"type":
    "tool_retry", "tool", "attempt", "delay", "error"}``.

    Args:
        max_retries: Retries after the first attempt (0 turns retrying off).
        tools: Which tools to retry: names, or a predicate on the name (None: all).
        retry_on: Exception types worth retrying, or a predicate on the exception.
            :class:`~deepactors.errors.ToolError` (a message meant for the model)
            is never retried.
        initial_delay: Seconds before the first retry.
        backoff_factor: How much each wait grows.
        max_delay: The longest wait.
        jitter: Randomise the waits, so calls that failed together do not retry together.
    """

    def __init__(
        self,
        max_retries: int = 2,
        *,
        tools: Collection[str] | Callable[[str], bool] | None = None,
        retry_on: Sequence[type[Exception]] | Callable[[Exception], bool] = (Exception,),
        initial_delay: float = 1.0,
        backoff_factor: float = 2.0,
        max_delay: float = 60.0,
        jitter: bool = True,
    ) -> None:
        if isinstance(max_retries, bool) or max_retries < 0:
            raise ConfigurationError(f"max_retries must be 0 or more, not {max_retries!r}")
        if initial_delay < 0 or max_delay < 0 or backoff_factor < 1:
            raise ConfigurationError(
                "initial_delay and max_delay must be >= 0 and backoff_factor >= 1"
            )
        self.max_retries = max_retries
        if tools is None or callable(tools):
            self._selects: Callable[[str], bool] | None = tools
        else:
            names = frozenset(tools)
            self._selects = names.__contains__
        if callable(retry_on):
            self._retryable: Callable[[Exception], bool] = retry_on
        else:
            kinds = tuple(retry_on)
            self._retryable = lambda exc: isinstance(exc, kinds)
        self.initial_delay = initial_delay
        self.backoff_factor = backoff_factor
        self.max_delay = max_delay
        self.jitter = jitter

    def delay_for(self, attempt: int) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        base = min(self.initial_delay * self.backoff_factor ** (attempt - 1), self.max_delay)
        return base * (0.5 + 0.5 * random.random()) if self.jitter else base

    async def wrap_tool_call(
        self, request: ToolCallRequest, handler: ToolHandler
    ) -> ToolMessage | Command:
        tool = request.tool
        if tool is None or self.max_retries == 0:
            return await handler(request)
        if self._selects is not None and not self._selects(tool.name):
            return await handler(request)
        return await handler(request.replace(tool=self._retrying(tool, request.run)))

    def _retrying(self, tool: Tool, run: RunContext) -> Tool:
        """A copy of ``tool`` whose function retries (always async: waits are ``anyio.sleep``)."""
        fn, is_async = tool.fn, tool.is_async

        async def attempt_once(kwargs: dict[str, object]) -> object:
            if is_async:
                return await fn(**kwargs)
            return await anyio.to_thread.run_sync(functools.partial(fn, **kwargs))

        async def with_retries(**kwargs: object) -> object:
            attempt = 1
            while True:
                try:
                    return await attempt_once(kwargs)
                except (ToolError, Interrupt):
                    raise
                except Exception as exc:
                    if not self._retryable(exc):
                        raise
                    delay = self.delay_for(attempt)
                    too_late = anyio.current_time() + delay >= anyio.current_effective_deadline()
                    if attempt > self.max_retries or too_late:
                        raise ToolError(
                            f"{type(exc).__name__}: {exc} (failed {attempt} time(s))"
                        ) from exc
                    self._announce(run, tool.name, attempt, delay, exc)
                    await anyio.sleep(delay)
                    attempt += 1

        return dataclasses.replace(tool, fn=with_retries, is_async=True)

    @staticmethod
    def _announce(run: RunContext, name: str, attempt: int, delay: float, exc: Exception) -> None:
        if run.emit is None:
            return
        run.emit(
            CustomEvent(
                path=run.path,
                run_id=run.run_id,
                data={
                    "type": "tool_retry",
                    "tool": name,
                    "attempt": attempt,
                    "delay": delay,
                    "error": f"{type(exc).__name__}: {exc}",
                },
            )
        )
