"""The HTTP client a model makes for an event-loop run is closed when that run ends."""

from __future__ import annotations

from typing import Any

import anyio

from deepactors.messages import UserMessage
from deepactors.models import ModelRequest
from deepactors.models.anthropic import AnthropicModel
from tests.anthropic.fake_api import FakeAnthropicAPI, message, text
from tests.waiting import wait_until_sync

REQUEST = ModelRequest(messages=[UserMessage(content="hi")])


def run(backend: Any, fn: Any, *args: Any) -> Any:
    name, options = backend if isinstance(backend, tuple) else (backend, {})
    return anyio.run(fn, *args, backend=name, backend_options=options)


def wait_until_closed(api: FakeAnthropicAPI) -> None:
    """Return once the server has no open connection (it notices a close in its own thread)."""
    wait_until_sync(lambda: api.open_connections == 0, what="every connection closed", timeout=3)


def test_client_is_closed_when_the_run_that_made_it_ends(anyio_backend: Any) -> None:
    with FakeAnthropicAPI(default=lambda body: message(text("ok"))) as api:
        model = AnthropicModel("claude-sonnet-5-5", api_key="k", base_url=api.base_url)
        for _ in range(3):
            assert run(anyio_backend, model.generate, REQUEST).text == "ok"
            # Not closed by anyone: the end of the run closes it.
            wait_until_closed(api)
        assert len(api.requests) == 3


def test_aclose_still_closes_at_once_and_the_next_call_reopens(anyio_backend: Any) -> None:
    with FakeAnthropicAPI(default=lambda body: message(text("ok"))) as api:
        model = AnthropicModel("claude-sonnet-5-5", api_key="k", base_url=api.base_url)

        async def main() -> None:
            await model.generate(REQUEST)
            await model.aclose()
            await anyio.to_thread.run_sync(wait_until_closed, api)
            await model.generate(REQUEST)
            assert api.open_connections == 1

        run(anyio_backend, main)
        wait_until_closed(api)
