"""One RequestLimiter (one model) used from several threads' event loops at once."""

from __future__ import annotations

import threading
from typing import Any

import anyio
import pytest

from deepactors.messages import UserMessage
from deepactors.models import ModelRequest
from deepactors.models._limiter import RequestLimiter
from deepactors.models.anthropic import AnthropicModel
from tests.anthropic.fake_api import FakeAnthropicAPI, message, text
from tests.waiting import wait_until


def backend_args(backend: Any) -> dict[str, Any]:
    name, options = backend if isinstance(backend, tuple) else (backend, {})
    return {"backend": name, "backend_options": options}


def in_threads(*targets: Any) -> list[BaseException]:
    """Run each target in its own thread; the exceptions they raised."""
    errors: list[BaseException] = []

    def guard(fn: Any) -> None:
        try:
            fn()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=guard, args=(t,)) for t in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    return errors


@pytest.mark.parametrize("other", ["asyncio", "trio"])
def test_release_in_one_thread_wakes_a_waiter_in_another(anyio_backend: Any, other: str) -> None:
    limiter = RequestLimiter(1)
    held = threading.Event()
    log: list[str] = []

    async def holder() -> None:
        await limiter.acquire()
        held.set()
        # The waiter, on another thread's loop, queues meanwhile.
        await wait_until(lambda: limiter.statistics().waiting == 1, what="the waiter queued")
        log.append("released")
        limiter.release()

    async def waiter() -> None:
        await anyio.to_thread.run_sync(held.wait)
        with anyio.fail_after(3):
            waited = await limiter.acquire()
        log.append("acquired after a wait" if waited > 0 else "acquired at once")
        limiter.release()

    errors = in_threads(
        lambda: anyio.run(holder, **backend_args(anyio_backend)),
        lambda: anyio.run(waiter, backend=other),
    )
    assert errors == []  # no TimeoutError: the release woke it, across threads
    assert log == ["released", "acquired after a wait"]
    stats = limiter.statistics()
    assert (stats.in_flight, stats.waiting, stats.total_acquired) == (0, 0, 2)


def test_a_model_shared_by_threads_never_exceeds_its_limit(anyio_backend: Any) -> None:
    with FakeAnthropicAPI(default=lambda body: message(text("ok"), delay=0.005)) as api:
        model = AnthropicModel(
            "claude-sonnet-5-5", api_key="k", base_url=api.base_url, max_concurrent_requests=2
        )

        async def burst() -> None:
            with anyio.fail_after(8):
                async with anyio.create_task_group() as tg:
                    for _ in range(10):
                        tg.start_soon(
                            model.generate, ModelRequest(messages=[UserMessage(content="q")])
                        )

        runs = [
            (lambda b=b: anyio.run(burst, **backend_args(b)))
            for b in (anyio_backend, "trio", "asyncio", anyio_backend)
        ]
        errors = in_threads(*runs)
    assert errors == []
    assert len(api.requests) == 40
    assert api.max_in_flight <= 2
    stats = model.limiter.statistics()
    assert (stats.in_flight, stats.waiting, stats.total_acquired) == (0, 0, 40)
