"""Caps belong to clients: runs in flight and streams per identity, else per address.

One key could start 2,000 background runs (all 200), spending the whole
server's model budget and memory; without authentication, every client behind a
reverse proxy shared the proxy's address, and uvicorn believed any local
program's ``X-Forwarded-For``. Now a client (its identity, else its address,
which a trusted proxy may name) has at most ``max_runs_per_client`` runs in
flight, of every kind; a run past it is refused (429, ``Retry-After``) before
anything of it is done. On uvicorn (asyncio) and hypercorn (trio), with the real
``langgraph-sdk`` and httpx over 127.0.0.1.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from deepactors.errors import ConfigurationError
from deepactors.server import create_app
from deepactors.server.auth import api_keys
from tests.waiting import wait_until_sync

from .agents import Probe, blocking_agent
from .conftest import Served
from .serve_process import serve_process

Serve = Callable[..., Served]
ALICE = "alice-key-0123456789abcdef"
BOB = "bob-key-0123456789abcdef00"


def say(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def run(text: str, **more: Any) -> dict[str, Any]:
    return {"assistant_id": "echo", "input": say(text), **more}


def _refused(answer: httpx.Response, held: int) -> None:
    assert answer.status_code == 429, answer.text
    assert answer.headers["retry-after"] == "1"
    assert f"{held} runs in flight" in answer.json()["detail"]
    assert "--max-runs-per-client" in answer.json()["detail"]


def test_one_key_has_at_most_its_runs_in_flight(serve: Serve) -> None:
    probe = Probe()
    auth = api_keys({ALICE: "alice", BOB: "bob"})
    served = serve(create_app({"echo": blocking_agent(probe)}, auth=auth, max_runs_per_client=3))
    alice, bob = {"x-api-key": ALICE}, {"x-api-key": BOB}
    with httpx.Client(base_url=served.url, timeout=10) as http:
        threads = [http.post("/threads", json={}, headers=alice).json()["thread_id"] for _ in "ab"]
        # Background runs count, queued ones too (the second waits behind the first).
        for thread_id in (threads[0], threads[0], threads[1]):
            made = http.post(f"/threads/{thread_id}/runs", json=run("wait"), headers=alice)
            assert made.status_code == 200, made.text
        wait_until_sync(lambda: probe.active == 2)  # two runs in their tool, one queued
        calls = probe.calls
        busy = http.get(f"/threads/{threads[1]}/runs", headers=alice).json()
        for path, body in [
            ("/runs", run("hi")),  # stateless, in the background
            ("/runs/wait", run("hi")),
            ("/runs/stream", run("hi")),
            (f"/threads/{threads[1]}/runs/wait", run("hi")),
            # Refused before it makes room: the run it would interrupt goes on.
            (f"/threads/{threads[1]}/runs", run("hi", multitask_strategy="interrupt")),
            (f"/threads/{threads[1]}/runs/wait", run("hi", checkpoint_id="1")),
            ("/threads/new/runs", run("hi", if_not_exists="create")),
        ]:
            _refused(http.post(path, json=body, headers=alice), 3)
        assert probe.calls == calls  # no model was called for any of them
        assert http.get(f"/threads/{threads[1]}/runs", headers=alice).json() == busy
        assert [r["status"] for r in busy] == ["running"]
        assert served.runs.slots.held("alice") == 3
        # Another identity has its own runs.
        assert http.post("/runs/wait", json=run("hi"), headers=bob).status_code == 200
        # A run that ends gives its place back.
        probe.release.set()
        wait_until_sync(lambda: served.runs.slots.held("alice") == 0)
        answer = http.post("/runs/wait", json=run("again"), headers=alice)
        assert answer.status_code == 200, answer.text


def test_without_auth_an_address_is_a_client_and_a_trusted_proxy_names_it(
    serve: Serve,
) -> None:
    probe = Probe()
    agent = blocking_agent(probe)
    proxied = serve(
        create_app(
            {"echo": agent},
            max_runs_per_client=2,
            max_streams_per_client=1,
            trusted_proxies=["127.0.0.1"],
        )
    )
    direct = serve(create_app({"echo": blocking_agent(probe)}, max_runs_per_client=2))

    def via(address: str) -> dict[str, str]:
        return {"X-Forwarded-For": address}

    with ExitStack() as held, httpx.Client(timeout=10) as http:
        for _ in range(2):
            made = http.post(f"{proxied.url}/runs", json=run("wait"), headers=via("10.0.0.1"))
            assert made.status_code == 200, made.text
        _refused(http.post(f"{proxied.url}/runs", json=run("hi"), headers=via("10.0.0.1")), 2)
        # The proxy's other clients are clients of their own.
        answer = http.post(f"{proxied.url}/runs/wait", json=run("hi"), headers=via("10.0.0.2"))
        assert answer.status_code == 200, answer.text
        # Streams too: one each.
        body = run("wait", stream_mode="custom")
        for address in ("10.0.0.3", "10.0.0.4"):
            stream = held.enter_context(
                http.stream("POST", f"{proxied.url}/runs/stream", json=body, headers=via(address))
            )
            assert stream.status_code == 200
        again = http.post(f"{proxied.url}/runs/wait", json=run("hi"), headers=via("10.0.0.3"))
        assert again.status_code == 429
        assert "streams open" in again.json()["detail"]
        # Where no proxy is trusted, the header names nobody: one address, one client.
        for address in ("10.0.0.5", "10.0.0.6"):
            made = http.post(f"{direct.url}/runs", json=run("wait"), headers=via(address))
            assert made.status_code == 200
        _refused(http.post(f"{direct.url}/runs", json=run("hi"), headers=via("10.0.0.7")), 2)
        assert direct.runs.slots.held("127.0.0.1") == 2
        # A trusted proxy's scheme is its client's: a page on https behind it
        # calls as its own origin.
        for served, status in ((proxied, 200), (direct, 403)):
            own = f"https://{urlsplit(served.url).netloc}"
            made = http.post(
                f"{served.url}/threads",
                json={},
                headers={"Origin": own, "X-Forwarded-Proto": "https", **via("10.0.0.8")},
            )
            assert made.status_code == status, made.text
        probe.release.set()


def test_bad_caps_and_proxies_are_refused_at_once() -> None:
    agent = blocking_agent(Probe())
    for cap in (0, -1, True, 2.5):
        with pytest.raises(ConfigurationError, match="max_runs_per_client"):
            create_app({"echo": agent}, max_runs_per_client=cap)  # type: ignore[arg-type]
    for proxy in ("10.0.0.1/8", "proxy.example", "", "unix:/run/proxy.sock"):
        with pytest.raises(ConfigurationError, match="trusted_proxies"):
            create_app({"echo": agent}, trusted_proxies=[proxy])
    create_app(
        {"echo": agent}, trusted_proxies=["10.0.0.0/8", "::1", "*"], max_runs_per_client=None
    )


HELD = {"assistant_id": "agent", "input": say("x")}

SLOW_APP = '''
import anyio

from deepactors import AssistantMessage, ToolCall, ToolMessage, create_deep_agent
from deepactors.models import FunctionModel


async def hold() -> str:
    """Hold the run until the server shuts down."""
    await anyio.sleep_forever()
    return "held"


def model(request):
    if isinstance(request.messages[-1], ToolMessage):
        return AssistantMessage(content="done")
    return AssistantMessage(tool_calls=[ToolCall(name="hold", args={})])


agent = create_deep_agent(FunctionModel(model), tools=[hold])
'''


@pytest.mark.parametrize("loop", ["asyncio", "trio"])
def test_serve_believes_forwarded_addresses_only_from_trusted_proxies(
    loop: str, tmp_path: Path
) -> None:
    (tmp_path / "slow_app.py").write_text(SLOW_APP)
    # uvicorn believes X-Forwarded-For from 127.0.0.1 by itself: any program
    # on the machine could pass for as many clients as it liked.
    streams = ["slow_app:agent", "--loop", loop, "--max-streams-per-client", "1"]
    body = {**HELD, "stream_mode": "custom"}
    with (
        serve_process(streams, tmp_path) as (url, _),
        httpx.Client(base_url=url, timeout=10) as http,
        http.stream("POST", "/runs/stream", json=body, headers={"X-Forwarded-For": "10.0.0.1"}),
    ):
        second = http.post("/runs/wait", json=HELD, headers={"X-Forwarded-For": "10.0.0.2"})
        assert second.status_code == 429, second.text
        assert "1 streams open" in second.json()["detail"]
    common = ["slow_app:agent", "--loop", loop, "--max-runs-per-client", "1"]
    with serve_process(common, tmp_path) as (url, _), httpx.Client(base_url=url) as http:
        first = http.post("/runs", json=HELD, headers={"X-Forwarded-For": "10.0.0.1"})
        assert first.status_code == 200, first.text
        second = http.post("/runs", json=HELD, headers={"X-Forwarded-For": "10.0.0.2"})
        _refused(second, 1)
    trusting = [*common, "--trusted-proxy", "127.0.0.1"]
    with serve_process(trusting, tmp_path) as (url, _), httpx.Client(base_url=url) as http:
        for address in ("10.0.0.1", "10.0.0.2"):
            made = http.post("/runs", json=HELD, headers={"X-Forwarded-For": address})
            assert made.status_code == 200, made.text
        again = http.post("/runs", json=HELD, headers={"X-Forwarded-For": "10.0.0.1"})
        _refused(again, 1)
