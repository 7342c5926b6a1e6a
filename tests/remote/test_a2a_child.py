"""An A2A agent as a subagent (``deepactors.remote.a2a.A2AAgent``): the vendor's
server is written with ``a2a-sdk``'s own server side (``a2a_vendor.py``) and
served by uvicorn; the parent runs on asyncio and on trio. Its answer comes back
as the ``task`` result (streamed or not), the time left to the deadline travels
with the message, and a subagent past its timeout cancels the vendor's task."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import anyio
import pytest
import uvicorn

from deepactors import create_deep_agent
from deepactors.middleware import SubAgentSpec
from deepactors.models import FunctionModel
from deepactors.remote.a2a import A2AAgent

from .conftest import answers, parent_model, run_collecting, say

vendor = pytest.importorskip("tests.remote.a2a_vendor", reason="a2a-sdk is in the dev extra")


@pytest.fixture(scope="module")
def vendor_url() -> Iterator[str]:
    """The vendor's agent under uvicorn, in a thread with its own event loop."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    server = uvicorn.Server(uvicorn.Config(vendor.vendor_app(f"{url}/"), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        assert thread.is_alive(), "the vendor's server did not start"
        threading.Event().wait(0.01)
    try:
        yield url
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()


def _parent(url: str, timeout: float | None = None) -> object:
    spec = SubAgentSpec(
        name="vendor",
        description="another vendor's agent",
        agent=A2AAgent(name="vendor", url=url),
        timeout=timeout,
    )
    return create_deep_agent(FunctionModel(parent_model), subagents=[spec])


async def test_an_a2a_agent_answers_as_a_subagent(vendor_url: str) -> None:
    with anyio.fail_after(30):
        result, _ = await run_collecting(
            _parent(vendor_url), say([("vendor", "hello"), ("vendor", "again")]), timeout=20
        )
    assert not isinstance(result, BaseException), result
    assert answers(result) == [
        ("success", "vendor says: hello"),
        ("success", "vendor says: again"),
    ]
    # The time left before the parent's deadline went with each message.
    sent = vendor.SEEN["metadata"][-1]["deepactors"]["timeout"]
    assert 0 < sent <= 20


async def test_a_timed_out_a2a_subagent_cancels_its_task(vendor_url: str) -> None:
    vendor.SEEN["cancelled"].clear()
    with anyio.fail_after(30):
        result, _ = await run_collecting(
            _parent(vendor_url, timeout=1.0), say([("vendor", "slow")])
        )
    assert not isinstance(result, BaseException), result
    [(status, text)] = answers(result)
    assert status == "error"
    assert "timeout" in text
    assert vendor.SEEN["cancelled"].wait(10)
