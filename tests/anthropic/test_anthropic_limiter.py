"""RequestLimiter: at most M requests in flight, FIFO, cancellable, shared per model."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
import pytest

from deepactors.context import RunContext
from deepactors.errors import ConfigurationError
from deepactors.events import CustomEvent, Event
from deepactors.messages import UserMessage
from deepactors.models import ModelRequest
from deepactors.models._limiter import RequestLimiter
from deepactors.models.anthropic import AnthropicModel
from tests.anthropic.fake_api import FakeAnthropicAPI, Reply, message, text

pytestmark = pytest.mark.anyio


async def test_200_concurrent_calls_never_exceed_8_in_flight_at_the_server(
    api: FakeAnthropicAPI,
) -> None:
    api.default = lambda body: message(text(body["messages"][0]["content"][0]["text"]), delay=0.01)
    answers: dict[int, str] = {}
    async with AnthropicModel(
        "claude-sonnet-5-5", api_key="k", base_url=api.base_url, max_concurrent_requests=8
    ) as model:

        async def one(i: int) -> None:
            request = ModelRequest(messages=[UserMessage(content=f"q{i}")])
            answers[i] = (await model.generate(request)).text

        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                for i in range(200):
                    tg.start_soon(one, i)
        stats = model.limiter.statistics()
    assert answers == {i: f"q{i}" for i in range(200)}
    assert len(api.requests) == 200
    assert api.max_in_flight <= 8
    assert stats.peak_in_flight == 8
    assert stats.total_acquired == 200
    assert stats.in_flight == 0
    assert stats.waiting == 0
    assert stats.peak_waiting >= 150  # they really queued
    assert stats.total_wait_seconds > 0


async def test_streams_hold_their_slot_too(api: FakeAnthropicAPI) -> None:
    api.default = lambda body: Reply(
        content=({"type": "text", "text": "x" * 12},), event_delay=0.002
    )
    async with AnthropicModel(
        "claude-sonnet-5-5", api_key="k", base_url=api.base_url, max_concurrent_requests=3
    ) as model:

        async def one() -> None:
            async for _ in model.stream(ModelRequest(messages=[UserMessage(content="q")])):
                pass

        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                for _ in range(20):
                    tg.start_soon(one)
    assert len(api.requests) == 20
    assert api.max_in_flight <= 3


async def test_one_limiter_can_be_shared_by_two_models(api: FakeAnthropicAPI) -> None:
    api.default = lambda body: message(text("ok"), delay=0.01)
    shared = RequestLimiter(2)
    async with (
        AnthropicModel(
            "claude-sonnet-5-5", api_key="k", base_url=api.base_url, limiter=shared
        ) as a,
        AnthropicModel("claude-haiku-4-5", api_key="k", base_url=api.base_url, limiter=shared) as b,
    ):
        request = ModelRequest(messages=[UserMessage(content="q")])
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                for i in range(10):
                    tg.start_soon((a if i % 2 else b).generate, request)
    assert api.max_in_flight <= 2
    assert shared.statistics().total_acquired == 10


async def test_waiting_for_a_slot_is_visible_to_listeners(api: FakeAnthropicAPI) -> None:
    token = anyio.lowlevel.current_token()
    a_at_server = anyio.Event()

    def answer(body: dict[str, Any]) -> Reply:
        if body["messages"][0]["content"][0]["text"] == "a":
            anyio.from_thread.run_sync(a_at_server.set, token=token)
        return message(text("ok"), delay=0.02)

    api.default = answer
    events: list[Event] = []
    run = RunContext(path="main/task-1:r", run_id="r1", emit=events.append)
    quiet = RunContext(path="main", run_id="r0", emit=None)
    async with AnthropicModel(
        "claude-sonnet-5-5", api_key="k", base_url=api.base_url, max_concurrent_requests=1
    ) as model:
        with anyio.fail_after(10):
            # Made first, so that the calls below queue for the slot, not for the client.
            await model.generate(ModelRequest(messages=[UserMessage(content="warm")], run=quiet))
            async with anyio.create_task_group() as tg:
                tg.start_soon(
                    model.generate, ModelRequest(messages=[UserMessage(content="a")], run=quiet)
                )
                await a_at_server.wait()  # "a" holds the slot for 20 ms from now
                # This one queues behind the first, streaming or not.
                tg.start_soon(
                    model.generate, ModelRequest(messages=[UserMessage(content="b")], run=run)
                )
                parts = model.stream(ModelRequest(messages=[UserMessage(content="c")], run=run))
                tg.start_soon(_drain, parts)
    queued = [e.data for e in events if isinstance(e, CustomEvent)]
    assert [d["type"] for d in queued] == ["model_request_queued"] * 2
    assert all(d["waited"] > 0 and d["model"] == "claude-sonnet-5-5" for d in queued)
    assert {e.path for e in events} == {"main/task-1:r"}


async def _drain(parts: AsyncGenerator[Any, None]) -> None:
    async with aclosing(parts):
        async for _ in parts:
            pass


@pytest.mark.virtual_time
async def test_acquire_says_how_long_it_waited() -> None:
    limiter = RequestLimiter(1)
    assert await limiter.acquire() == 0.0
    waited: list[float] = []

    async def second() -> None:
        waited.append(await limiter.acquire())
        limiter.release()

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(second)  # queues at once: its wait begins now
            await anyio.sleep(0.5)  # virtual: it waits exactly this long
            assert limiter.statistics().waiting == 1
            limiter.release()
    assert waited == [pytest.approx(0.5)]
    assert limiter.statistics().total_wait_seconds == waited[0]


async def test_waiters_are_served_first_come_first_served() -> None:
    limiter = RequestLimiter(1)
    order: list[int] = []

    async def worker(i: int) -> None:
        async with limiter:
            order.append(i)
            await anyio.lowlevel.checkpoint()

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            await limiter.acquire()
            for i in range(10):
                tg.start_soon(worker, i)
                # Each worker is queued before the next one starts.
                await anyio.wait_all_tasks_blocked()
            assert limiter.statistics().waiting == 10
            limiter.release()
    assert order == list(range(10))


async def test_a_newcomer_does_not_overtake_the_queue() -> None:
    limiter = RequestLimiter(1)
    order: list[str] = []

    async def worker(name: str) -> None:
        async with limiter:
            order.append(name)

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            await limiter.acquire()
            tg.start_soon(worker, "queued")
            await anyio.wait_all_tasks_blocked()
            # The slot goes to the waiter at once; a newcomer finds none free.
            limiter.release()
            tg.start_soon(worker, "newcomer")
    assert order == ["queued", "newcomer"]


async def test_a_deadline_while_waiting_takes_nothing() -> None:
    limiter = RequestLimiter(1)
    await limiter.acquire()
    with pytest.raises(TimeoutError), anyio.fail_after(0.05):
        await limiter.acquire()
    stats = limiter.statistics()
    assert (stats.in_flight, stats.waiting) == (1, 0)
    limiter.release()
    assert limiter.statistics().in_flight == 0


async def test_a_waiter_cancelled_as_it_is_handed_the_slot_passes_it_on() -> None:
    limiter = RequestLimiter(1)
    got: list[str] = []

    async def waiter(name: str, scope_box: list[anyio.CancelScope]) -> None:
        with anyio.CancelScope() as scope:
            scope_box.append(scope)
            async with limiter:
                got.append(name)

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            await limiter.acquire()
            first: list[anyio.CancelScope] = []
            second: list[anyio.CancelScope] = []
            tg.start_soon(waiter, "first", first)
            await anyio.wait_all_tasks_blocked()
            tg.start_soon(waiter, "second", second)
            await anyio.wait_all_tasks_blocked()
            # Cancel "first", then hand it the slot before it runs to notice.
            first[0].cancel()
            limiter.release()
    assert got == ["second"]
    assert limiter.statistics().in_flight == 0


async def test_release_without_acquire_is_an_error() -> None:
    with pytest.raises(RuntimeError):
        RequestLimiter(1).release()


def test_limit_must_be_positive() -> None:
    with pytest.raises(ConfigurationError):
        RequestLimiter(0)


def test_one_limiter_serves_successive_event_loops() -> None:
    limiter = RequestLimiter(1)

    async def contend() -> None:
        async with anyio.create_task_group() as tg:
            for _ in range(3):
                tg.start_soon(_hold, limiter)

    anyio.run(contend, backend="asyncio")
    anyio.run(contend, backend="trio")
    assert limiter.statistics().total_acquired == 6


async def _hold(limiter: RequestLimiter) -> None:
    async with limiter:
        await anyio.lowlevel.checkpoint()  # the others queue meanwhile
