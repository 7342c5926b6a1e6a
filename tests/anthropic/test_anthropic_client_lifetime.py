"""The HTTP client a model makes for an event-loop run is closed when that run ends."""

from __future__ import annotations

import time
from typing import Any

import anyio

from deepactors.messages import UserMessage
from deepactors.models import ModelRequest
from deepactors.models.anthropic import AnthropicModel
from tests.anthropic.fake_api import FakeAnthropicAPI, message, text

REQUEST = ModelRequest(messages=[UserMessage(content="hi")])


def run(backend: Any, fn: Any, *args: Any) -> Any:
    name, options = backend if isinstance(backend, tuple) else (backend, {})
    return anyio.run(fn, *args, backend=name, backend_options=options)


def wait_until_closed(api: FakeAnthropicAPI) -> int:
    """The server's open connections, once they are 0 or after 3 s."""
    deadline = time.monotonic() + 3
    while api.open_connections and time.monotonic() < deadline:
        time.sleep(0.01)  # the server notices the close in its own thread
    return api.open_connections


def test_client_is_closed_when_the_run_that_made_it_ends(anyio_backend: Any) -> None:
    with FakeAnthropicAPI(default=lambda body: message(text("ok"))) as api:
        model = AnthropicModel("claude-sonnet-5-5", api_key="k", base_url=api.base_url)
        for _ in range(3):
            assert run(anyio_backend, model.generate, REQUEST).text == "ok"
            # Not closed by anyone: the end of the run closes it.
            assert wait_until_closed(api) == 0
        assert len(api.requests) == 3


def test_aclose_still_closes_at_once_and_the_next_call_reopens(anyio_backend: Any) -> None:
    with FakeAnthropicAPI(default=lambda body: message(text("ok"))) as api:
        model = AnthropicModel("claude-sonnet-5-5", api_key="k", base_url=api.base_url)

        async def main() -> None:
            await model.generate(REQUEST)
            await model.aclose()
            assert await anyio.to_thread.run_sync(wait_until_closed, api) == 0
            await model.generate(REQUEST)
            assert api.open_connections == 1

        run(anyio_backend, main)
        assert wait_until_closed(api) == 0
