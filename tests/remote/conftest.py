"""Real ``deepactors serve`` processes on 127.0.0.1 serving ``remote_app``, for the
remote-subagent tests; the parent agent the tests run locally, on both loops.

Servers are processes of their own, whatever loop the test runs on, so they are
started once per module: one in-memory server, and a pair of ``--workers 2``
servers over one PostgreSQL database (one on uvicorn, one on hypercorn).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient

from deepactors import (
    AssistantMessage,
    Budget,
    DeepAgent,
    ToolCall,
    ToolMessage,
    UserMessage,
    create_deep_agent,
)
from deepactors.actors import open_runtime
from deepactors.events import CustomEvent, Event
from deepactors.models import FunctionModel, ModelRequest
from deepactors.remote import REMOTE_RUN
from tests.pgserver import PostgresServer
from tests.server.serve_process import serving
from tests.waiting import wait_until

APP = Path(__file__).with_name("remote_app.py")


def served_folder(tmp: Path) -> Path:
    """A folder holding the served module, as a user's project would."""
    shutil.copy(APP, tmp / "remote_app.py")
    return tmp


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One in-memory ``deepactors serve`` (asyncio)."""
    folder = served_folder(tmp_path_factory.mktemp("served"))
    with serving(["remote_app:agents", "--loop", "asyncio"], folder) as url:
        yield url


@pytest.fixture(scope="module")
def fleet(
    tmp_path_factory: pytest.TempPathFactory, postgres_server: PostgresServer
) -> Iterator[tuple[str, str]]:
    """Two ``deepactors serve --workers 2`` over one PostgreSQL database."""
    folder = served_folder(tmp_path_factory.mktemp("fleet"))
    dsn = postgres_server.new_database()
    common = ["remote_app:agents", "--db", dsn, "--workers", "2", "--max-streams-per-client", "0"]
    common += ["--max-runs-per-client", "0"]  # a parent's children all come from one address
    with (
        serving([*common, "--loop", "asyncio"], folder) as a,
        serving([*common, "--loop", "trio"], folder) as b,
    ):
        yield a, b


def parent_model(request: ModelRequest) -> AssistantMessage:
    """The parent: the user's message is a JSON list of ``[subagent_type, description]``;
    it makes one ``task`` call per item in one turn, then answers with every
    result as JSON ``[[status, text], ...]`` in the order of the calls."""
    last = request.messages[-1]
    if isinstance(last, UserMessage):
        orders = json.loads(last.text)
        return AssistantMessage(
            tool_calls=[
                ToolCall(
                    id=f"call-{i}",
                    name="task",
                    args={"subagent_type": kind, "description": text},
                )
                for i, (kind, text) in enumerate(orders)
            ]
        )
    results = [m for m in request.messages if isinstance(m, ToolMessage)]
    return AssistantMessage(content=json.dumps([[m.status, m.text] for m in results]))


def parent(subagents: Sequence[dict[str, Any]], name: str | None = None) -> DeepAgent:
    """A parent agent whose subagents are the given dicts (``name``: its root path,
    which its remote runs carry in their metadata as ``parent_path``)."""
    return create_deep_agent(FunctionModel(parent_model), subagents=list(subagents), name=name)


async def run_collecting(
    agent: DeepAgent,
    input: dict[str, Any],
    timeout: float | None = None,
    budget: Budget | None = None,
    events: list[Event] | None = None,
) -> tuple[dict[str, Any] | BaseException, list[Event]]:
    """Run the parent; its result (or its error) and every event it streamed (into
    ``events`` if given, as they come)."""
    events = [] if events is None else events
    async with open_runtime() as rt:
        handle = await rt.thread(agent).start(
            input,
            on_event=events.append,
            timeout=timeout,
            budget=budget,
        )
        try:
            return await handle.result(), events
        except Exception as exc:
            return exc, events


def remote_runs_in(events: Sequence[Event]) -> list[dict[str, str]]:
    """Where the remote children's runs are (``url``, ``thread_id``, ``run_id``), from
    the events the remote children emit as their runs start."""
    return [
        e.data[REMOTE_RUN]
        for e in events
        if isinstance(e, CustomEvent) and isinstance(e.data, dict) and REMOTE_RUN in e.data
    ]


def _statuses(wheres: Sequence[dict[str, str]]) -> list[str]:
    out = []
    clients: dict[str, SyncLangGraphClient] = {}
    try:
        for where in wheres:
            url = where["url"]
            if url not in clients:
                clients[url] = get_sync_client(url=url, api_key=None)
            run = clients[url].runs.get(where["thread_id"], where["run_id"])
            out.append(run["status"])
    finally:
        for client in clients.values():
            client.http.client.close()
    return out


async def statuses(wheres: Sequence[dict[str, str]]) -> list[str]:
    """The remote runs' statuses, read with langgraph-sdk's client (in a worker thread)."""
    return await anyio.to_thread.run_sync(_statuses, wheres)


async def settled(wheres: Sequence[dict[str, str]]) -> list[str]:
    """The runs' statuses once none is pending or running (they must be, within 15 s)."""

    async def ended() -> list[str] | None:
        found = await statuses(wheres)
        return None if any(s in ("pending", "running") for s in found) else found

    return await wait_until(ended, what="the remote runs ended", timeout=15, interval=0.05)


async def running(events: Sequence[Event], count: int = 1) -> list[dict[str, str]]:
    """The remote runs ``events`` tell of, once ``count`` are known and all running (in 30 s)."""

    async def started() -> list[dict[str, str]] | None:
        wheres = remote_runs_in(events)
        if len(wheres) >= count and set(await statuses(wheres)) == {"running"}:
            return wheres
        return None

    return await wait_until(started, what=f"{count} remote runs running", timeout=30, interval=0.05)


def _existing(url: str, thread_ids: Sequence[str]) -> list[str]:
    with get_sync_client(url=url, api_key=None) as client:
        found = client.threads.search(ids=list(thread_ids), limit=100)
    return sorted(t["thread_id"] for t in found)


async def existing(url: str, thread_ids: Sequence[str]) -> list[str]:
    """Which of these threads the server has (``threads.search``, in a worker thread)."""
    return await anyio.to_thread.run_sync(_existing, url, thread_ids)


def remote(name: str, url: str, graph_id: str = "agent", **extra: Any) -> dict[str, Any]:
    """A remote subagent dict, deepagents' AsyncSubAgent shape."""
    return {
        "name": name,
        "description": f"{graph_id} at {url}",
        "graph_id": graph_id,
        "url": url,
        **extra,
    }


def say(orders: Sequence[tuple[str, str]], **values: Any) -> dict[str, Any]:
    """The parent's input: its orders, and other input values (files)."""
    return {"messages": [{"role": "user", "content": json.dumps(orders)}], **values}


def answers(result: dict[str, Any]) -> list[tuple[str, str]]:
    """The parent's final answer: each task's status and text, in call order."""
    return [(s, t) for s, t in json.loads(result["messages"][-1].text)]
