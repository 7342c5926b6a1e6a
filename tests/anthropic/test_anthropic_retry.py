"""ModelRetryMiddleware: backoff, retry-after, exhaustion, deadlines, events."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import anyio
import pytest

from deepactors.context import RunContext
from deepactors.errors import (
    ConfigurationError,
    ContextWindowExceeded,
    ModelAPIError,
    OverloadedError,
    RateLimitError,
)
from deepactors.events import Event, ModelRetry, describe
from deepactors.messages import AssistantMessage, UserMessage
from deepactors.middleware import ModelRetryMiddleware
from deepactors.models import ModelRequest
from deepactors.models.anthropic import AnthropicModel
from tests.anthropic.fake_api import FakeAnthropicAPI, error, message, text

# On virtual time: the handlers fail in this loop; call times are the virtual clock's.
pytestmark = [pytest.mark.anyio, pytest.mark.virtual_time]

REQUEST = ModelRequest(messages=[UserMessage(content="hi")])


def failing(*errors: Exception) -> tuple[Callable[[ModelRequest], Any], list[float]]:
    """A handler raising ``errors`` in turn, then answering; and its call times."""
    times: list[float] = []
    pending = list(errors)

    async def handler(request: ModelRequest) -> AssistantMessage:
        times.append(anyio.current_time())
        if pending:
            raise pending.pop(0)
        return AssistantMessage(content="finally")

    return handler, times


@pytest.mark.real_time  # the fake API is a server in a thread
async def test_retries_over_http_honour_retry_after(api: FakeAnthropicAPI) -> None:
    api.reply(
        error(429, "rate_limit_error", "slow down", retry_after=0.2),
        error(529, "overloaded_error", "Overloaded", retry_after=0.1),
        message(text("made it")),
    )
    mw = ModelRetryMiddleware(initial_delay=0.001)
    async with AnthropicModel("claude-sonnet-5-5", api_key="k", base_url=api.base_url) as model:
        with anyio.fail_after(5):
            answer = await mw.wrap_model_call(REQUEST, model.generate)
    assert answer.text == "made it"
    first, second, third = (r.at for r in api.requests)
    # Waits follow the server's retry-after, not the 1 ms backoff.
    assert second - first >= 0.2
    assert third - second >= 0.1


def test_backoff_doubles_up_to_max_delay_without_jitter() -> None:
    mw = ModelRetryMiddleware(initial_delay=1.0, max_delay=5.0, jitter=False)
    err = OverloadedError("busy")
    assert [mw.delay_for(n, err) for n in range(1, 6)] == [1.0, 2.0, 4.0, 5.0, 5.0]


def test_jitter_stays_within_bounds_and_never_shortens_retry_after() -> None:
    mw = ModelRetryMiddleware(initial_delay=2.0, max_delay=60.0)
    for _ in range(200):
        assert 1.0 <= mw.delay_for(1, OverloadedError("busy")) <= 2.0
        assert 3.0 <= mw.delay_for(1, RateLimitError("429", retry_after=3.0)) <= 3.75
    # Jitter never pushes a wait past max_delay.
    capped = ModelRetryMiddleware(max_delay=3.2)
    for _ in range(200):
        assert 3.0 <= capped.delay_for(1, RateLimitError("429", retry_after=3.0)) <= 3.2
        assert capped.delay_for(9, OverloadedError("busy")) <= 3.2
    # A server asking for an hour is capped at max_delay.
    assert ModelRetryMiddleware(max_delay=10, jitter=False).delay_for(
        1, RateLimitError("429", retry_after=3600)
    ) == pytest.approx(10.0)


async def test_exhausted_attempts_raise_the_last_error() -> None:
    handler, times = failing(*(OverloadedError(f"busy {i}") for i in range(5)))
    mw = ModelRetryMiddleware(3, initial_delay=0.001, jitter=False)
    with pytest.raises(OverloadedError, match="busy 2"):
        await mw.wrap_model_call(REQUEST, handler)
    assert len(times) == 3
    assert [b - a for a, b in itertools.pairwise(times)] == pytest.approx([0.001, 0.002])


async def test_exhausted_attempts_can_answer_with_a_message() -> None:
    handler, times = failing(*(RateLimitError("429 again") for _ in range(5)))
    mw = ModelRetryMiddleware(2, initial_delay=0.001, on_exhausted="message")
    answer = await mw.wrap_model_call(REQUEST, handler)
    assert answer.stop_reason == "error"
    assert answer.tool_calls == []
    assert "2 attempt(s)" in answer.text
    assert "429 again" in answer.text
    assert len(times) == 2


@pytest.mark.parametrize(
    "exc",
    [ModelAPIError("bad request", status_code=400), ContextWindowExceeded("too long"), KeyError()],
)
async def test_other_errors_are_not_retried(exc: Exception) -> None:
    handler, times = failing(exc)
    with pytest.raises(type(exc)):
        await ModelRetryMiddleware(initial_delay=0.001).wrap_model_call(REQUEST, handler)
    assert len(times) == 1


async def test_retry_on_is_configurable() -> None:
    handler, times = failing(ModelAPIError("flaky gateway", status_code=502))
    mw = ModelRetryMiddleware(retry_on=(ModelAPIError,), initial_delay=0.001)
    assert (await mw.wrap_model_call(REQUEST, handler)).text == "finally"
    assert len(times) == 2


async def test_a_wait_longer_than_the_deadline_raises_the_model_error_at_once() -> None:
    handler, times = failing(RateLimitError("429", retry_after=30))
    mw = ModelRetryMiddleware()
    start = anyio.current_time()
    with anyio.fail_after(1), pytest.raises(RateLimitError, match="429"):
        await mw.wrap_model_call(REQUEST, handler)
    # At once: not a TimeoutError a second later that would hide the rate limit.
    assert anyio.current_time() == start
    assert len(times) == 1


async def test_a_wait_past_the_deadline_counts_as_exhaustion() -> None:
    handler, _ = failing(OverloadedError("busy"))
    mw = ModelRetryMiddleware(initial_delay=10, jitter=False, on_exhausted="message")
    with anyio.fail_after(1):
        answer = await mw.wrap_model_call(REQUEST, handler)
    assert answer.stop_reason == "error"
    assert "busy" in answer.text


async def test_a_wait_that_fits_the_deadline_still_retries() -> None:
    handler, times = failing(RateLimitError("429", retry_after=0.05))
    with anyio.fail_after(2):
        answer = await ModelRetryMiddleware().wrap_model_call(REQUEST, handler)
    assert answer.text == "finally"
    assert len(times) == 2
    assert 0.05 <= times[1] - times[0] <= 0.05 * 1.25  # the server's wait, plus jitter


async def test_each_retry_is_announced_to_listeners() -> None:
    events: list[Event] = []
    run = RunContext(path="main/task-1:researcher", run_id="r1", emit=events.append)
    handler, _ = failing(RateLimitError("429", retry_after=0.01), OverloadedError("529"))
    mw = ModelRetryMiddleware(initial_delay=0.001)
    await mw.wrap_model_call(ModelRequest(messages=REQUEST.messages, run=run), handler)
    retries = [e for e in events if isinstance(e, ModelRetry)]
    assert retries == events
    assert [e.attempt for e in retries] == [1, 2]
    assert "RateLimitError" in retries[0].error
    assert describe(retries[0]).startswith("model call failed (attempt 1), retrying in")
    assert {e.path for e in events} == {"main/task-1:researcher"}


async def test_nothing_is_emitted_when_nobody_listens() -> None:
    run = RunContext(path="main", run_id="r1", emit=None)
    handler, times = failing(OverloadedError("529"))
    mw = ModelRetryMiddleware(initial_delay=0.001)
    answer = await mw.wrap_model_call(ModelRequest(messages=REQUEST.messages, run=run), handler)
    assert answer.text == "finally"
    assert len(times) == 2


def test_bad_arguments_are_configuration_errors() -> None:
    with pytest.raises(ConfigurationError):
        ModelRetryMiddleware(0)
    with pytest.raises(ConfigurationError):
        ModelRetryMiddleware(on_exhausted="ignore")  # type: ignore[arg-type]
