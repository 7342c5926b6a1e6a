"""The other protocols' endpoints keep the server's rules: authentication, each
thread its owner's, the streams-per-client cap, and clear errors for bad input
(under uvicorn on asyncio and hypercorn on trio). What they stream is checked
by their own clients in ``tests/clients``."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

import anyio
import httpx
import pytest

from deepactors import AssistantMessage, create_deep_agent
from deepactors.models import FunctionModel, ModelRequest
from deepactors.persistence import MemoryCheckpointer
from deepactors.server import create_app
from deepactors.server.auth import api_keys

from .conftest import Served

ALICE = "alice-key-0123456789"
BOB = "bob-key-0123456789ab"


def _agent(gate: threading.Event) -> Any:
    async def model(request: ModelRequest) -> AssistantMessage:
        said = request.messages[-1].text
        if said == "wait":
            await anyio.to_thread.run_sync(gate.wait, abandon_on_cancel=True)
        return AssistantMessage(content=f"echo: {said}")

    return create_deep_agent(FunctionModel(model), checkpointer=MemoryCheckpointer())


def _agui(thread: str, text: str) -> dict[str, Any]:
    return {
        "threadId": thread,
        "runId": f"run-{text}",
        "messages": [{"id": f"u-{thread}-{text}", "role": "user", "content": text}],
    }


def _ai_sdk(thread: str, text: str) -> dict[str, Any]:
    parts = [{"type": "text", "text": text}]
    return {
        "id": thread,
        "messages": [{"id": f"u-{thread}-{text}", "role": "user", "parts": parts}],
    }


# Each endpoint: its path, a request's body, what its stream ends with, and the
# field a body without a thread lacks.
ENDPOINTS = {
    "agui": (_agui, '"RUN_FINISHED"', "threadId"),
    "ai-sdk": (_ai_sdk, "[DONE]", "id"),
}


def _last(response: httpx.Response) -> str:
    lines = [line for line in response.text.splitlines() if line.startswith("data: ")]
    return lines[-1]


@pytest.mark.parametrize("endpoint", list(ENDPOINTS))
def test_protocol_endpoint_is_authenticated_owned_and_capped(
    serve: Callable[..., Served], endpoint: str
) -> None:
    gate = threading.Event()
    app = create_app(
        {"agent": _agent(gate)},
        auth=api_keys({ALICE: "alice", BOB: "bob"}),
        max_streams_per_client=1,
    )
    served = serve(app)
    alice = {"authorization": f"Bearer {ALICE}"}
    bob = {"authorization": f"Bearer {BOB}"}
    path = f"/{endpoint}/agent"
    body, finished, thread_field = ENDPOINTS[endpoint]
    try:
        with httpx.Client(base_url=served.url, timeout=30) as http:
            assert http.post(path, json=body("t1", "hi")).status_code == 401
            ran = http.post(path, json=body("t1", "hi"), headers=alice)
            assert ran.status_code == 200
            assert finished in _last(ran)
            # Ids are each owner's: bob's t1 is a thread of his own, as an absent
            # id would be, and alice's t1 is untouched by it.
            assert http.post(path, json=body("t1", "again"), headers=bob).status_code == 200
            assert http.get("/threads/t1", headers=bob).json()["metadata"]["owner"] == "bob"
            assert http.get("/threads/t1", headers=alice).json()["metadata"]["owner"] == "alice"
            hers = http.get("/threads/t1/state", headers=alice).json()["values"]["messages"]
            assert "again" not in json.dumps(hers)
            # Bad input, an unknown assistant: said, and nothing runs.
            bad = http.post(path, json={"messages": []}, headers=alice)
            assert bad.status_code == 422
            assert thread_field in bad.text
            unknown = http.post(f"/{endpoint}/nobody", json=body("t2", "x"), headers=alice)
            assert unknown.status_code == 404
            # One stream open per client here: a second one is refused while it is.
            with http.stream("POST", path, json=body("t3", "wait"), headers=alice) as held:
                assert held.status_code == 200
                lines = held.iter_lines()
                assert next(lines).startswith("data: ")
                refused = http.post(path, json=body("t4", "x"), headers=alice)
                assert refused.status_code == 429
                gate.set()
                assert any(finished in line for line in lines)
            # Its slot is given back once the server's response has returned,
            # a moment after the client read the last byte.
            for _ in range(500):
                if not served.app.guard.open_streams("alice"):
                    break
                threading.Event().wait(0.01)
            assert http.post(path, json=body("t4", "x"), headers=alice).status_code == 200
    finally:
        gate.set()


def test_a2a_is_authenticated_and_owned(serve: Callable[..., Served]) -> None:
    gate = threading.Event()
    gate.set()
    app = create_app({"agent": _agent(gate)}, auth=api_keys({ALICE: "alice", BOB: "bob"}))
    served = serve(app)
    alice = {"authorization": f"Bearer {ALICE}"}
    bob = {"authorization": f"Bearer {BOB}"}

    def send(text: str, context: str | None = None) -> dict[str, Any]:
        message: dict[str, Any] = {
            "messageId": text,
            "role": "ROLE_USER",
            "parts": [{"text": text}],
        }
        if context is not None:
            message["contextId"] = context
        return {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}

    with httpx.Client(base_url=served.url, timeout=30) as http:
        assert http.get("/a2a/agent/.well-known/agent-card.json").status_code == 401
        assert http.post("/a2a/agent", json=send("hi")).status_code == 401
        done = http.post("/a2a/agent", json=send("hi"), headers=alice).json()["result"]["task"]
        assert done["status"]["state"] == "TASK_STATE_COMPLETED"
        get = {"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": done["id"]}}
        assert http.post("/a2a/agent", json=get, headers=alice).json()["result"]["id"] == done["id"]
        # Bob finds neither alice's task nor her context.
        assert http.post("/a2a/agent", json=get, headers=bob).json()["error"]["code"] == -32001
        # Her context's id is bob's own context (ids are each owner's): a task of
        # his, which neither reads nor changes hers.
        theirs = http.post("/a2a/agent", json=send("x", done["contextId"]), headers=bob).json()
        assert theirs["result"]["task"]["id"] != done["id"]
        mine = http.post("/a2a/agent", json=get, headers=alice).json()["result"]
        assert "x" not in json.dumps(mine.get("history", []))
        unknown = {"jsonrpc": "2.0", "id": 3, "method": "Nope", "params": {}}
        assert (
            http.post("/a2a/agent", json=unknown, headers=alice).json()["error"]["code"] == -32601
        )
