"""Resumable streams with the Python SDK: ``id:`` lines, and a rejoin with
``Last-Event-ID`` after a dropped connection gets exactly the frames missed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient

_BODY = {
    "assistant_id": "agent",
    "input": {"messages": [{"role": "user", "content": "hello"}]},
    "stream_mode": ["values", "updates", "messages-tuple"],
    "stream_resumable": True,
    "on_disconnect": "continue",
}


@pytest.fixture
def client(url: str) -> Iterator[SyncLangGraphClient]:
    with get_sync_client(url=url) as client:
        yield client


def _frames(client: SyncLangGraphClient, thread_id: str, run_id: str, last: str) -> list[Any]:
    parts = client.runs.join_stream(thread_id, run_id, last_event_id=last)
    return [(p.id, p.event, p.data) for p in parts]


def test_a_resumable_stream_numbers_its_events(client: SyncLangGraphClient) -> None:
    thread_id = client.threads.create()["thread_id"]
    parts = list(
        client.runs.stream(
            thread_id,
            "agent",
            input=_BODY["input"],
            stream_mode=_BODY["stream_mode"],
            stream_resumable=True,
        )
    )
    assert parts[0].event == "metadata"
    assert [p.id for p in parts] == [str(i) for i in range(len(parts))]
    run_id = parts[0].data["run_id"]
    # Replayed from the first (-1), and from any id on, as they were.
    whole = _frames(client, thread_id, run_id, "-1")
    assert whole == [(p.id, p.event, p.data) for p in parts]
    assert _frames(client, thread_id, run_id, parts[2].id) == whole[3:]


def test_a_dropped_stream_is_picked_up_where_it_left_off(
    client: SyncLangGraphClient, url: str
) -> None:
    thread_id = client.threads.create()["thread_id"]
    seen: list[tuple[str, str]] = []
    with httpx.stream("POST", f"{url}/threads/{thread_id}/runs/stream", json=_BODY) as answer:
        location = answer.headers["content-location"]
        fields: dict[str, str] = {}
        for line in answer.iter_lines():
            if line:
                name, _, value = line.partition(": ")
                fields[name] = value
                continue
            seen.append((fields["id"], fields["event"]))
            fields = {}
            if len(seen) == 2:
                break  # the connection is dropped here, the run goes on
    run_id = location.rsplit("/", 1)[-1]
    rest = _frames(client, thread_id, run_id, seen[-1][0])
    whole = _frames(client, thread_id, run_id, "-1")
    assert [(i, e) for i, e, _ in whole] == seen + [(i, e) for i, e, _ in rest]
    final = [data for _, event, data in rest if event == "values"][-1]
    assert final["messages"][-1]["content"] == "echo #1: hello"
    assert json.dumps(final)  # plain JSON, as sent
