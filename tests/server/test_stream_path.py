"""The streaming-run endpoints' direct path answers exactly as the routed one.

``POST /runs/stream`` and ``POST /threads/{id}/runs/stream`` skip Starlette's
middleware stack and router while the app is as ``create_app`` built it. A
request with an ``Origin`` header takes the routed way (CORS), so each case is
sent both ways and must get the same status and the same ``detail``.
"""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
import pytest
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from deepactors.server import create_app
from deepactors.server._records import ThreadRecord, new_uuid
from deepactors.server._schemas import RunCreate

from .agents import Probe, blocking_agent
from .conftest import Served

Serve = Callable[..., Served]
USER = {"messages": [{"role": "user", "content": "go"}]}
ORIGIN = {"Origin": "http://ui.example"}


def _events(text: str) -> list[str]:
    return [line[len("event: ") :] for line in text.splitlines() if line.startswith("event: ")]


def test_direct_and_routed_answers_are_the_same(serve: Serve) -> None:
    # An allowed origin takes the routed way (CORS); none takes the direct one.
    app = create_app({"echo": blocking_agent(Probe())}, cors_origins=(ORIGIN["Origin"],))
    served = serve(app)
    thread_id = served.client().threads.create()["thread_id"]
    cases: list[tuple[str, Any, int, str]] = [
        ("/runs/stream", b"{not json", 422, "not valid JSON"),
        ("/runs/stream", b"[1]", 422, "JSON object"),
        ("/runs/stream", {"input": USER}, 422, "assistant_id"),
        ("/runs/stream", {"assistant_id": "nobody", "input": USER}, 404, "nobody"),
        ("/runs/stream", {"assistant_id": "echo", "stream_mode": "tokens"}, 422, "stream_mode"),
        ("/runs/stream", {"assistant_id": "echo", "input": {"todos": [1]}}, 422, "todos"),
        (
            "/runs/stream",
            {"assistant_id": "echo", "input": USER, "webhook": "ftp://example.com/hook"},
            422,
            "webhook",
        ),
        ("/threads/nope/runs/stream", {"assistant_id": "echo", "input": USER}, 404, "nope"),
        (
            f"/threads/{thread_id}/runs/stream",
            {"assistant_id": "echo", "command": {"resume": {}}},
            422,
            "not waiting",
        ),
    ]
    with httpx.Client(base_url=served.url) as http:
        for path, body, status, words in cases:
            content = body if isinstance(body, bytes) else None
            json = None if content else body
            direct = http.post(path, content=content, json=json)
            routed = http.post(path, content=content, json=json, headers=ORIGIN)
            assert direct.status_code == routed.status_code == status, (path, direct.text)
            assert direct.json() == routed.json(), path
            assert words in direct.json()["detail"], (path, direct.json())
            assert routed.headers["access-control-allow-origin"] == ORIGIN["Origin"]
            assert "access-control-allow-origin" not in direct.headers
        for path in ("/runs/stream", f"/threads/{thread_id}/runs/stream"):
            body = {"assistant_id": "echo", "input": USER, "stream_mode": "values"}
            direct = http.post(path, json=body)
            routed = http.post(path, json=body, headers=ORIGIN)
            for response in (direct, routed):
                assert response.status_code == 200
                assert response.headers["content-type"].startswith("text/event-stream")
                assert _events(response.text)[0] == "metadata"
                assert "error" not in _events(response.text)
                assert "echo: go" in response.text
            assert routed.headers["access-control-allow-origin"] == ORIGIN["Origin"]
        # A path that only looks like the endpoint is the router's (404).
        assert http.post("/threads/a/b/runs/stream", json={"assistant_id": "echo"}).status_code == (
            404
        )
        assert http.get("/runs/stream").status_code == 405


class _Deny:
    """A user's own middleware: refuses every request without a key."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and (b"x-key", b"k") not in scope["headers"]:
            await JSONResponse({"detail": "no key"}, status_code=401)(scope, receive, send)
            return
        await self.app(scope, receive, send)


def test_a_middleware_added_later_sees_the_stream_requests(serve: Serve) -> None:
    app = create_app({"echo": blocking_agent(Probe())})
    app.add_middleware(_Deny)
    served = serve(app)
    body = {"assistant_id": "echo", "input": USER}
    with httpx.Client(base_url=served.url) as http:
        assert http.post("/runs/stream", json=body).status_code == 401
        allowed = http.post("/runs/stream", json=body, headers={"x-key": "k"})
        assert allowed.status_code == 200
        assert "echo: go" in allowed.text


@asynccontextmanager
async def _lifespan(app: Starlette) -> AsyncIterator[None]:
    """The app's lifespan, run in this task's loop (startup, then shutdown on exit)."""
    inbox, outbox = anyio.create_memory_object_stream[dict[str, Any]](4)
    up, down = anyio.Event(), anyio.Event()

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "lifespan.startup.complete":
            up.set()
        elif message["type"] == "lifespan.shutdown.complete":
            down.set()
        else:
            raise AssertionError(message)

    async with inbox, outbox, anyio.create_task_group() as tg:
        scope = {"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}
        tg.start_soon(app, scope, outbox.receive, send)
        await inbox.send({"type": "lifespan.startup"})
        with anyio.fail_after(5):
            await up.wait()
        try:
            yield
        finally:
            await inbox.send({"type": "lifespan.shutdown"})
            with anyio.fail_after(5):
                await down.wait()


@pytest.mark.anyio
async def test_a_run_created_but_not_started_is_never_left_pending() -> None:
    """A stream's run starts after its first event; cancelling it or shutting
    down before then still ends it (no run waits for ever, nothing hangs)."""
    probe = Probe()
    app = create_app({"echo": blocking_agent(probe)})
    async with _lifespan(app):
        manager = app.state.runs
        body = RunCreate.model_validate({"assistant_id": "echo", "input": USER})
        thread = ThreadRecord(thread_id=new_uuid(), temporary=True)
        manager.threads[thread.thread_id] = thread
        run = await manager.create(thread, body, launch=False)
        await anyio.wait_all_tasks_blocked()  # whatever would start it has had its turn
        assert run.status == "pending"
        assert not run.done.is_set()
        with anyio.fail_after(5):
            await manager.cancel([run], wait=True)
        assert run.status == "interrupted"
        assert probe.calls == 0  # its agent never ran
        assert thread.thread_id not in manager.threads  # a stateless run's thread is gone
        left = ThreadRecord(thread_id=new_uuid(), temporary=True)
        manager.threads[left.thread_id] = left
        pending = await manager.create(left, body, launch=False)
    assert pending.done.is_set()
    assert pending.status == "interrupted"
    assert probe.calls == 0


@pytest.mark.anyio
async def test_defer_gc_holds_while_runs_are_in_progress_and_leaves_nothing_behind() -> None:
    """``create_app(defer_gc=True)`` (what ``deepactors serve`` sets): the
    runtime's collector hook is in place while the app runs, and the app's
    shutdown leaves the process's collector as it found it."""
    hooks, frozen = len(gc.callbacks), gc.get_freeze_count()
    probe = Probe()
    app = create_app({"echo": blocking_agent(probe)}, defer_gc=True)
    async with _lifespan(app):
        assert len(gc.callbacks) == hooks + 1
        manager = app.state.runs
        body = RunCreate.model_validate({"assistant_id": "echo", "input": USER})
        thread = ThreadRecord(thread_id=new_uuid(), temporary=True)
        manager.threads[thread.thread_id] = thread
        run = await manager.create(thread, body)
        with anyio.fail_after(5):
            await run.done.wait()
        assert run.status == "success"
        assert run.result["messages"][-1]["content"] == "echo: go"
    assert len(gc.callbacks) == hooks
    assert gc.get_freeze_count() == frozen
