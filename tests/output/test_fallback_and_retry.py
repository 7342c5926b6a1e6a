"""Model fallback (down to a 529 storm on the Messages API) and tool retries."""

from __future__ import annotations

import threading
from typing import Any

import anyio
import pytest

from deepactors import (
    AssistantMessage,
    Budget,
    ToolCall,
    ToolError,
    ToolMessage,
    create_deep_agent,
    events,
)
from deepactors.errors import ConfigurationError, ModelAPIError, OverloadedError, RateLimitError
from deepactors.middleware import ModelFallbackMiddleware, ToolRetryMiddleware
from deepactors.models import FunctionModel, ModelRequest
from deepactors.models.anthropic import AnthropicModel
from tests.anthropic.conftest import MODEL_ID
from tests.anthropic.fake_api import FakeAnthropicAPI, error, message, text
from tests.output.conftest import tool_results

pytestmark = pytest.mark.anyio

BACKUP_ID = "claude-opus-5-5"


def failing(exc: Exception, name: str) -> FunctionModel:
    def answer(request: ModelRequest) -> AssistantMessage:
        raise exc

    return FunctionModel(answer, name=name)


async def streamed(agent: Any, *args: Any, **kwargs: Any) -> tuple[dict[str, Any], list[Any]]:
    seen: list[Any] = []
    with anyio.fail_after(10):
        async with agent.astream(*args, **kwargs) as stream:
            async for event in stream:
                seen.append(event)
    return stream.result, seen


async def test_fallback_after_a_529_storm_on_the_messages_api(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    storm = FakeAnthropicAPI(
        default=lambda body: error(529, "overloaded_error", "Overloaded", retry_after=0)
    )
    with storm, FakeAnthropicAPI() as backup:
        backup.reply(message(text("from the backup")))
        # The fallback is given as a model string, resolved like any other.
        monkeypatch.setenv("ANTHROPIC_BASE_URL", backup.base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        fallback = ModelFallbackMiddleware(f"anthropic:{BACKUP_ID}")
        primary = AnthropicModel(MODEL_ID, api_key="test-key", base_url=storm.base_url)
        async with primary, fallback.models[0]:  # type: ignore[attr-defined]
            agent = create_deep_agent(primary, middleware=[fallback])
            result, seen = await streamed(agent, "hello", budget=Budget(model_calls=10))
        # The default retries ran their course on the primary first.
        assert len(storm.requests) == 4
        assert len(backup.requests) == 1
    final = result["messages"][-1]
    assert final.text == "from the backup"
    assert final.model == BACKUP_ID
    (switch,) = [e for e in seen if isinstance(e, events.ModelFallback)]
    assert (switch.failed, switch.next) == (MODEL_ID, BACKUP_ID)
    assert switch.error.startswith("OverloadedError")
    # Every request to either model drew on the budget.
    assert result["budget"].model_calls == 5


async def test_the_chain_is_tried_in_order_and_the_last_error_is_raised() -> None:
    first = failing(RateLimitError("slow down", retry_after=0), "first")
    second = failing(OverloadedError("busy", retry_after=0), "second")
    third = failing(ModelAPIError("rejected"), "third")
    agent = create_deep_agent(first, middleware=[ModelFallbackMiddleware(second, third)])
    with pytest.raises(ModelAPIError, match="rejected"):
        await agent.ainvoke("go")
    assert (first.calls, second.calls, third.calls) == (4, 4, 1)


async def test_a_fallback_that_answers_is_named_on_the_message() -> None:
    backup = FunctionModel(lambda r: AssistantMessage(content="backup answer"), name="backup-model")
    agent = create_deep_agent(
        failing(ModelAPIError("no"), "primary"), middleware=[ModelFallbackMiddleware(backup)]
    )
    result = await agent.ainvoke("go")
    assert result["messages"][-1].model == "backup-model"


async def test_errors_outside_on_are_not_caught() -> None:
    backup = FunctionModel(lambda r: "never")
    agent = create_deep_agent(
        failing(ValueError("a bug"), "primary"), middleware=[ModelFallbackMiddleware(backup)]
    )
    with pytest.raises(ValueError, match="a bug"):
        await agent.ainvoke("go")
    assert backup.calls == 0
    with pytest.raises(ConfigurationError, match="at least one"):
        ModelFallbackMiddleware()
    with pytest.raises(ConfigurationError, match="provider"):
        ModelFallbackMiddleware("nobody:model")


def flaky_tool(failures: int, exc: Exception, *, sync: bool = False) -> Any:
    attempts = {"n": 0}
    lock = threading.Lock()

    def body(q: str) -> str:
        with lock:
            attempts["n"] += 1
            n = attempts["n"]
        if n <= failures:
            raise exc
        return f"result for {q} after {n} attempts"

    def fetch_sync(q: str) -> str:
        """Fetch something.

        Args:
            q: What to fetch.
        """
        return body(q)

    async def fetch_async(q: str) -> str:
        """Fetch something.

        Args:
            q: What to fetch.
        """
        return body(q)

    fetch: Any = fetch_sync if sync else fetch_async
    fetch.__name__ = "fetch"
    fetch.attempts = attempts
    return fetch


def calls_fetch_once(request: ModelRequest) -> AssistantMessage:
    if not tool_results(request):
        return AssistantMessage(tool_calls=[ToolCall(name="fetch", args={"q": "x"})])
    return AssistantMessage(content="done")


@pytest.mark.parametrize("sync", [False, True], ids=["async-tool", "sync-tool"])
async def test_a_flaky_tool_is_retried_with_backoff_until_it_works(sync: bool) -> None:
    fetch = flaky_tool(2, ConnectionError("reset"), sync=sync)
    agent = create_deep_agent(
        FunctionModel(calls_fetch_once),
        tools=[fetch],
        middleware=[ToolRetryMiddleware(max_retries=3, initial_delay=0.001, jitter=False)],
    )
    result, seen = await streamed(agent, "go")
    (answer,) = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert answer.status == "success"
    assert answer.text == "result for x after 3 attempts"
    retries = [e.data for e in seen if isinstance(e, events.CustomEvent)]
    assert [(r["type"], r["attempt"], r["delay"]) for r in retries] == [
        ("tool_retry", 1, 0.001),
        ("tool_retry", 2, 0.002),
    ]
    assert retries[0]["error"] == "ConnectionError: reset"


async def test_the_last_error_becomes_the_result_after_the_retries() -> None:
    fetch = flaky_tool(10, TimeoutError("upstream timed out"))
    agent = create_deep_agent(
        FunctionModel(calls_fetch_once),
        tools=[fetch],
        middleware=[ToolRetryMiddleware(max_retries=2, initial_delay=0)],
    )
    result = await agent.ainvoke("go")
    (answer,) = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert answer.status == "error"
    assert answer.text == "TimeoutError: upstream timed out (failed 3 time(s))"
    assert fetch.attempts["n"] == 3
    assert result["messages"][-1].text == "done"


@pytest.mark.parametrize(
    ("middleware", "exc", "attempts"),
    [
        (ToolRetryMiddleware(initial_delay=0), ToolError("bad query"), 1),
        (ToolRetryMiddleware(initial_delay=0, tools=["other"]), ConnectionError("x"), 1),
        (ToolRetryMiddleware(initial_delay=0, tools=lambda n: n == "fetch"), KeyError("k"), 3),
        (ToolRetryMiddleware(initial_delay=0, retry_on=(ConnectionError,)), KeyError("k"), 1),
        (
            ToolRetryMiddleware(initial_delay=0, retry_on=lambda e: "again" in str(e)),
            RuntimeError("try again"),
            3,
        ),
    ],
    ids=["tool-error", "not-selected", "selected", "not-retryable", "predicate"],
)
async def test_what_is_retried(
    middleware: ToolRetryMiddleware, exc: Exception, attempts: int
) -> None:
    fetch = flaky_tool(10, exc)
    agent = create_deep_agent(
        FunctionModel(calls_fetch_once), tools=[fetch], middleware=[middleware]
    )
    await agent.ainvoke("go")
    assert fetch.attempts["n"] == attempts


def test_retry_settings_are_checked() -> None:
    with pytest.raises(ConfigurationError, match="max_retries"):
        ToolRetryMiddleware(max_retries=-1)
    with pytest.raises(ConfigurationError, match="backoff_factor"):
        ToolRetryMiddleware(backoff_factor=0.5)
