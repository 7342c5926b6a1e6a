"""Webhooks: a run's outcome POSTed when it ends, signed, retried, never to a private host unasked.

The receiver is a real HTTP server on 127.0.0.1 (allowed by name in the app's
settings, as an operator would allow an internal host).
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from deepactors.persistence import MemoryCheckpointer
from deepactors.server import create_app
from deepactors.server.webhooks import (
    SIGNATURE_HEADER,
    Webhooks,
    deliver,
    sign,
    verify_signature,
)

from .agents import Probe, blocking_agent
from .conftest import Served

Serve = Callable[..., Served]
SECRET = "test-secret"


@dataclass
class Receiver:
    """A webhook receiver: what it was sent, and the answers it gives in turn."""

    url: str
    answers: list[int] = field(default_factory=list)
    got: list[tuple[dict[str, str], bytes]] = field(default_factory=list)
    arrived: threading.Condition = field(default_factory=threading.Condition)

    def wait_for(self, count: int, timeout: float = 20.0) -> None:
        with self.arrived:
            assert self.arrived.wait_for(lambda: len(self.got) >= count, timeout), self.got


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    box: list[Receiver] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            me = box[0]
            with me.arrived:  # recorded before the answer: the sender goes on after it
                status = me.answers.pop(0) if me.answers else 200
                me.got.append(({k.lower(): v for k, v in self.headers.items()}, body))
                me.arrived.notify_all()
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    box.append(Receiver(url=f"http://127.0.0.1:{server.server_address[1]}/hook"))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield box[0]
    server.shutdown()
    server.server_close()


def app(**webhooks: Any) -> Any:
    settings = {"secret": SECRET, "allowed_hosts": ["127.0.0.1"], "backoff": 0.01, **webhooks}
    agent = blocking_agent(Probe(), checkpointer=MemoryCheckpointer())
    return create_app({"echo": agent}, webhooks=Webhooks(**settings))


def say(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def test_a_finished_run_is_posted_once_signed(serve: Serve, receiver: Receiver) -> None:
    client = serve(app()).client()
    thread_id = client.threads.create()["thread_id"]
    run = client.runs.create(thread_id, "echo", input=say("hello"), webhook=receiver.url)
    client.runs.join(thread_id, run["run_id"])
    receiver.wait_for(1)
    ((headers, body),) = receiver.got
    assert verify_signature(SECRET, body, headers[SIGNATURE_HEADER.lower()])
    assert not verify_signature("another secret", body, headers[SIGNATURE_HEADER.lower()])
    assert headers["x-deepactors-delivery"] == run["run_id"]
    sent = json.loads(body)
    assert (sent["run_id"], sent["thread_id"], sent["status"]) == (
        run["run_id"],
        thread_id,
        "success",
    )
    assert sent["values"]["messages"][-1]["content"] == "echo: hello"


def test_a_failed_delivery_is_retried_with_the_same_delivery_id(
    serve: Serve, receiver: Receiver
) -> None:
    receiver.answers = [500, 503]
    client = serve(app()).client()
    done = client.runs.wait(None, "echo", input=say("stateless"), webhook=receiver.url)
    assert done["messages"][-1]["content"] == "echo: stateless"
    receiver.wait_for(3)
    assert len({h["x-deepactors-delivery"] for h, _ in receiver.got}) == 1
    assert json.loads(receiver.got[-1][1])["status"] == "success"


def test_a_cancelled_run_is_posted_with_its_status(serve: Serve, receiver: Receiver) -> None:
    probe = Probe()
    agent = blocking_agent(probe, checkpointer=MemoryCheckpointer())
    webhooks = Webhooks(allowed_hosts=["127.0.0.1"], backoff=0.01)
    client = serve(create_app({"echo": agent}, webhooks=webhooks)).client()
    thread_id = client.threads.create()["thread_id"]
    run = client.runs.create(thread_id, "echo", input=say("wait here"), webhook=receiver.url)
    assert probe.blocked.wait(10)
    client.runs.cancel(thread_id, run["run_id"], wait=True)
    receiver.wait_for(1)
    headers, body = receiver.got[0]
    assert SIGNATURE_HEADER.lower() not in headers  # no secret: unsigned
    assert json.loads(body)["status"] == "interrupted"


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:9/hook",
        "http://localhost:9/hook",
        "http://[::1]:9/hook",
        "http://10.1.2.3/hook",
        "http://169.254.169.254/latest/meta-data",
        "ftp://example.com/hook",
        "http://user:pw@example.com/hook",
        "not a url",
    ],
)
def test_private_or_bad_targets_are_refused_when_the_run_is_made(serve: Serve, url: str) -> None:
    agent = blocking_agent(Probe(), checkpointer=MemoryCheckpointer())
    client = serve(create_app({"echo": agent})).client()  # the default: public hosts only
    with pytest.raises(httpx.HTTPStatusError) as refused:
        client.runs.wait(None, "echo", input=say("hi"), webhook=url)
    assert refused.value.response.status_code == 422
    assert "webhook" in refused.value.response.json()["detail"]


def test_no_webhooks_refuses_a_run_that_names_one(serve: Serve) -> None:
    agent = blocking_agent(Probe(), checkpointer=MemoryCheckpointer())
    client = serve(create_app({"echo": agent}, webhooks=None)).client()
    with pytest.raises(httpx.HTTPStatusError) as refused:
        client.runs.wait(None, "echo", input=say("hi"), webhook="https://example.com/hook")
    assert refused.value.response.status_code == 422


@pytest.mark.anyio
async def test_a_name_that_resolves_to_this_machine_is_not_called(receiver: Receiver) -> None:
    # Not a literal address, so it passes the check at creation; resolved at
    # delivery, it is this machine: nothing is sent.
    name = socket.gethostname()
    resolved = {info[4][0] for info in socket.getaddrinfo(name, 80)}
    if not any(a.startswith("127.") or a == "::1" for a in resolved):
        pytest.skip(f"{name} does not resolve to loopback here ({resolved})")
    port = receiver.url.rsplit(":", 1)[1].split("/")[0]
    ok = await deliver(f"http://{name}:{port}/hook", b"{}", Webhooks(backoff=0.01))
    assert ok is False
    assert receiver.got == []
    # Allowed by name, the same delivery goes through.
    assert await deliver(f"http://{name}:{port}/hook", b"{}", Webhooks(allowed_hosts=[name]))
    assert len(receiver.got) == 1


@pytest.mark.anyio
async def test_deliveries_give_up_after_the_attempts_or_on_a_4xx(receiver: Receiver) -> None:
    receiver.answers = [500, 500, 500]
    hooks = Webhooks(allowed_hosts=["127.0.0.1"], attempts=3, backoff=0.01)
    assert await deliver(receiver.url, b"{}", hooks) is False
    assert len(receiver.got) == 3
    receiver.answers = [404]
    assert await deliver(receiver.url, b"{}", hooks) is False
    assert len(receiver.got) == 4


def test_signatures_expire_and_bind_the_body() -> None:
    body = b'{"run_id": "r"}'
    header = sign(SECRET, body)
    assert verify_signature(SECRET, body, header)
    assert not verify_signature(SECRET, body + b" ", header)
    old = sign(SECRET, body, timestamp=1_000_000)
    assert not verify_signature(SECRET, body, old)
    assert not verify_signature(SECRET, body, None)
    assert not verify_signature(SECRET, body, "garbage")
