"""A real server for the tests: the app under uvicorn (asyncio) or hypercorn (trio).

Each server runs in a thread with its own event loop, on a socket bound to a
free port of 127.0.0.1 before it starts, so the tests talk to it over real
sockets with the real ``langgraph-sdk`` clients, exactly as a separate client
process would. Shutting it down goes through the server's own shutdown (the
app's lifespan cancels and awaits every run).
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
import trio
import uvicorn
from hypercorn.config import Config as HypercornConfig
from hypercorn.trio import serve as hypercorn_serve
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient
from starlette.applications import Starlette

# The fixtures of the tests whose PostgreSQL goes away (a server of each module's own).
from .pg_outage import database as database
from .pg_outage import own_server as own_server


@dataclass
class Served:
    """A running server: its URL, its app, and how to stop it."""

    url: str
    app: Starlette
    _stop: Callable[[], None]
    # Every client a test makes of this server, closed at stop whether the test
    # passed or failed: one left open keeps a socket that the cyclic collector
    # finalizes during some later test (an unclosed-socket ResourceWarning there).
    _clients: list[SyncLangGraphClient | httpx.Client] = field(default_factory=list)
    _stopped: bool = False

    def client(
        self, *, timeout: float | None = None, api_key: str | None = None
    ) -> SyncLangGraphClient:
        """A sync langgraph-sdk client of this server (closed when the server stops).

        Args:
            timeout: Seconds a request may wait for the server before it fails
                (the SDK's default when None).
            api_key: The key it sends (when None, the SDK's own choice: its
                environment's key, if any).
        """
        keyed = {} if api_key is None else {"api_key": api_key}
        client = get_sync_client(url=self.url, timeout=timeout, **keyed)
        self._clients.append(client)
        return client

    def http(self, *, timeout: float) -> httpx.Client:
        """A plain HTTP client of this server (closed when the server stops).

        Args:
            timeout: Seconds a request may wait for the server before it fails.
        """
        client = httpx.Client(base_url=self.url, timeout=timeout)
        self._clients.append(client)
        return client

    def stop(self) -> None:
        """Close the clients, then shut the server down the way it shuts down."""
        if self._stopped:
            return
        self._stopped = True
        for client in self._clients:
            client.close()
        self._clients.clear()
        self._stop()

    @property
    def runs(self) -> Any:
        """The app's run manager (for assertions on what runs inside the server)."""
        return self.app.state.runs


def _bound_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def _start_uvicorn(app: Starlette) -> Served:
    sock = _bound_socket()
    # Proxy headers off, as deepactors serve runs it: the app believes them from
    # its trusted_proxies only (uvicorn would from 127.0.0.1, on its own).
    config = uvicorn.Config(
        app, lifespan="on", log_level="warning", timeout_graceful_shutdown=5, proxy_headers=False
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        threading.Event().wait(0.01)

    def stop() -> None:
        server.should_exit = True
        thread.join(30)
        sock.close()
        assert not thread.is_alive(), "uvicorn did not stop"

    return Served(url=f"http://127.0.0.1:{sock.getsockname()[1]}", app=app, _stop=stop)


def _start_hypercorn(app: Starlette) -> Served:
    sock = _bound_socket()
    config = HypercornConfig()
    config.bind = [f"fd://{sock.fileno()}"]
    config.graceful_timeout = 5
    config.loglevel = "WARNING"
    started = threading.Event()
    token: list[trio.lowlevel.TrioToken] = []
    stopping: list[trio.Event] = []
    failure: list[BaseException] = []

    async def main() -> None:
        token.append(trio.lowlevel.current_trio_token())
        stop_event = trio.Event()
        stopping.append(stop_event)
        async with trio.open_nursery() as nursery:
            await nursery.start(
                lambda task_status: hypercorn_serve(
                    app,  # type: ignore[arg-type]
                    config,
                    shutdown_trigger=stop_event.wait,
                    task_status=task_status,
                )
            )
            started.set()

    def run() -> None:
        try:
            trio.run(main)
        except BaseException as exc:
            failure.append(exc)
            started.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    started.wait(30)
    if failure:
        raise RuntimeError("hypercorn did not start") from failure[0]

    def stop() -> None:
        trio.from_thread.run_sync(stopping[0].set, trio_token=token[0])
        thread.join(30)
        with contextlib.suppress(OSError):  # hypercorn closes the socket it was given
            sock.close()
        assert not thread.is_alive(), "hypercorn did not stop"
        if failure:
            raise failure[0]

    return Served(url=f"http://127.0.0.1:{sock.getsockname()[1]}", app=app, _stop=stop)


@pytest.fixture(params=["uvicorn-asyncio", "hypercorn-trio"])
def serve(request: pytest.FixtureRequest) -> Iterator[Callable[[Starlette], Served]]:
    """Start an app under the server of the param; stopped at the end of the test."""
    started: list[Served] = []

    def start(app: Starlette) -> Served:
        served = (
            _start_uvicorn(app) if request.param == "uvicorn-asyncio" else _start_hypercorn(app)
        )
        started.append(served)
        return served

    yield start
    # Each one stopped (its clients closed) even if one stopped before it fails.
    with contextlib.ExitStack() as stops:
        for served in reversed(started):  # callbacks run last in, first out
            stops.callback(served.stop)
