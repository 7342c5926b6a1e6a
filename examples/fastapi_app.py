"""An agent inside an existing FastAPI app: one runtime in the app's lifespan.

Run it with ``uvicorn examples.fastapi_app:app`` (it uses the offline demo
agent; put your own ``create_deep_agent(...)`` in its place), then::

    curl -X POST localhost:8000/ask -H 'content-type: application/json' \\
         -d '{"question": "How do actors fit with cancellation?", "thread_id": "t1"}'
    curl -N -X POST localhost:8000/ask/stream -H 'content-type: application/json' \\
         -d '{"question": "And structured concurrency?"}'

Every request's run is an actor of the runtime the lifespan opened; runs of one
``thread_id`` take turns; a client that disconnects from ``/ask/stream`` cancels
its run's whole subtree (leaving the ``async with agent.astream(...)`` block does
it). To serve the LangGraph Agent Protocol instead (langgraph-sdk, Agent Chat
UI), run ``deepactors.server.create_app`` as an app of its own.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel

from deepactors import Runtime, open_runtime
from deepactors.assembly.demo import build_demo_agent
from deepactors.events import describe

agent = build_demo_agent(latency=0.01)


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    # One runtime for the app's life: leaving it (shutdown) waits for the runs.
    async with open_runtime() as runtime:
        app.state.runtime = runtime
        yield


app = FastAPI(lifespan=lifespan)


class Ask(BaseModel):
    question: str
    thread_id: str | None = None


def _runtime(request: Request) -> Runtime:
    runtime: Runtime = request.app.state.runtime
    return runtime


@app.post("/ask")
async def ask(body: Ask, request: Request) -> dict[str, object]:
    """Run the agent to the end; answer with its structured report (or last message)."""
    result = await agent.ainvoke(
        body.question, thread_id=body.thread_id, runtime=_runtime(request), timeout=60
    )
    report = result.get("structured_response")
    answer = report.model_dump() if report is not None else result["messages"][-1].text
    return {"answer": answer, "files": sorted(result["files"])}


@app.post("/ask/stream")
async def ask_stream(body: Ask, request: Request) -> StreamingResponse:
    """Stream the run's events as server-sent events, one line each."""
    stream = agent.astream(body.question, thread_id=body.thread_id, runtime=_runtime(request))

    async def lines() -> AsyncIterator[str]:
        # The run belongs to the runtime's task group, not to this generator; if
        # the client leaves, leaving the block cancels the run and waits for it.
        async with stream as events:
            async for event in events:
                data = {"path": event.path, "event": type(event).__name__, "text": describe(event)}
                yield f"data: {json.dumps(data)}\n\n"

    return StreamingResponse(lines(), media_type="text/event-stream")
