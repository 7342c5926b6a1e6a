"""``agui_app``: one agent as an AG-UI app, mounted in a FastAPI app whose lifespan
opens the runtime, and served on its own (its lifespan opens one), under
uvicorn on asyncio and hypercorn on trio. Every event it streams is checked
against AG-UI's own models (``ag-ui-protocol``); the JS client's flows run
against ``deepactors serve`` in ``tests/clients/test_agui.py``."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pydantic
import pytest
from fastapi import FastAPI, Request

from deepactors import AssistantMessage, ToolCall, ToolMessage, create_deep_agent, open_runtime
from deepactors.models import FunctionModel, ModelRequest
from deepactors.server.agui import agui_app

from .conftest import Served

ag_ui = pytest.importorskip("ag_ui.core.events", reason="ag-ui-protocol is in the dev extra")
EVENT = pydantic.TypeAdapter(ag_ui.Event)


def send_email(to: str) -> str:
    """Send an email.

    Args:
        to: The recipient.
    """
    return f"sent to {to}"


def _agent() -> Any:
    def model(request: ModelRequest) -> AssistantMessage:
        last = request.messages[-1]
        if isinstance(last, ToolMessage):
            return AssistantMessage(content=f"tool said: {last.text}")
        users = [m for m in request.messages if m.role == "user"]
        if last.text == "email":
            return AssistantMessage(tool_calls=[ToolCall(name="send_email", args={"to": "bob"})])
        return AssistantMessage(content=f"echo #{len(users)}: {last.text}")

    # No checkpointer: agui_app keeps the threads in memory itself.
    return create_deep_agent(
        FunctionModel(model), tools=[send_email], interrupt_on={"send_email": True}
    )


def _run(http: httpx.Client, url: str, body: dict[str, Any], **kw: Any) -> list[dict[str, Any]]:
    response = http.post(url, json=body, **kw)
    assert response.status_code == 200, response.text
    events = [
        json.loads(line.removeprefix("data: "))
        for line in response.text.splitlines()
        if line.startswith("data: ")
    ]
    for event in events:
        EVENT.validate_python(event)
    assert events[0]["type"] == "RUN_STARTED"
    assert events[-1]["type"] == "RUN_FINISHED"
    return events


def _text(events: list[dict[str, Any]]) -> str:
    return "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")


def _say(thread: str, *texts: str) -> dict[str, Any]:
    messages = [{"id": f"{thread}-{i}", "role": "user", "content": t} for i, t in enumerate(texts)]
    return {"threadId": thread, "runId": f"run-{len(texts)}", "messages": messages}


def test_agui_app_mounted_in_fastapi(serve: Callable[..., Served]) -> None:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with open_runtime() as runtime:
            app.state.runtime = runtime
            yield

    def per_user(request: Request, thread_id: str) -> str:
        return f"{request.headers['x-user']}:{thread_id}"

    app = FastAPI(lifespan=lifespan)
    app.mount("/agent", agui_app(_agent(), lambda: app.state.runtime, thread_key=per_user))
    served = serve(app)
    with httpx.Client(base_url=served.url, timeout=30) as http:
        ann, bob = {"x-user": "ann"}, {"x-user": "bob"}
        assert _text(_run(http, "/agent/", _say("t", "hi"), headers=ann)) == "echo #1: hi"
        # The thread holds the history: only the new message is taken.
        assert (
            _text(_run(http, "/agent/", _say("t", "hi", "again"), headers=ann)) == "echo #2: again"
        )
        # Another user's "t" is another thread.
        assert _text(_run(http, "/agent/", _say("t", "yo"), headers=bob)) == "echo #1: yo"
        stopped = _run(http, "/agent/", _say("m", "email"), headers=ann)
        [interrupt] = stopped[-1]["outcome"]["interrupts"]
        assert interrupt["metadata"]["deepactors"]["tool"] == "send_email"
        resume = {
            "threadId": "m",
            "runId": "r2",
            "messages": [],
            "resume": [{"interruptId": interrupt["id"], "status": "resolved"}],
        }
        resumed = _run(http, "/agent/", resume, headers=ann)
        assert _text(resumed) == "tool said: sent to bob"
        assert resumed[-1]["outcome"] == {"type": "success"}
        bad = http.post("/agent/", json={"threadId": "x"}, headers=ann)
        assert bad.status_code == 422


def test_agui_app_served_on_its_own(serve: Callable[..., Served]) -> None:
    served = serve(agui_app(_agent()))
    with httpx.Client(base_url=served.url, timeout=30) as http:
        assert _text(_run(http, "/", _say("t", "hi"))) == "echo #1: hi"
