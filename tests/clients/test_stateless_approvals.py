"""Stateless runs of an agent with ``interrupt_on`` on ``deepactors serve`` (issue 42 item 4).

The served agent stops for approval before ``send_email``. A run without a
thread (``runs.wait(None, ...)``, ``RemoteGraph.invoke`` with no thread id, a
``RemoteGraph`` node of a local LangGraph graph) runs on a thread thrown away
when it ends; only when it actually stops for a human is it an error, which
says to run it on a thread.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, TypedDict

import pytest
from langgraph.graph import START, StateGraph
from langgraph.pregel.remote import RemoteGraph
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient

NEEDS_THREAD = "InterruptNeedsThread"


@pytest.fixture
def client(url: str) -> Iterator[SyncLangGraphClient]:
    with get_sync_client(url=url) as client:
        yield client


def say(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def test_a_stateless_run_of_an_approval_agent_runs(client: SyncLangGraphClient) -> None:
    result = client.runs.wait(None, "agent", input=say("hello"))
    assert isinstance(result, dict)
    assert result["messages"][-1]["content"] == "echo #1: hello"


def test_remote_graph_without_a_thread_runs(client: SyncLangGraphClient) -> None:
    graph = RemoteGraph("agent", sync_client=client)
    assert graph.invoke(say("hi"))["messages"][-1]["content"] == "echo #1: hi"


def test_remote_graph_as_a_node_of_a_local_graph_runs(client: SyncLangGraphClient) -> None:
    class State(TypedDict):
        messages: list[Any]

    builder = StateGraph(State)
    builder.add_node("remote", RemoteGraph("agent", sync_client=client))
    builder.add_edge(START, "remote")
    result = builder.compile().invoke(say("from a node"))
    assert result["messages"][-1]["content"] == "echo #1: from a node"


def test_only_an_actual_stop_needs_a_thread_and_says_so(client: SyncLangGraphClient) -> None:
    # The SDK raises a plain Exception with the run's error; RemoteGraph its own.
    with pytest.raises(Exception, match=NEEDS_THREAD) as stopped:
        client.runs.wait(None, "agent", input=say("email bob"))
    text = str(stopped.value)
    assert NEEDS_THREAD in text
    assert "send_email" in text
    assert "threads.create()" in text
    with pytest.raises(Exception, match=NEEDS_THREAD):
        RemoteGraph("agent", sync_client=client).invoke(say("email ann"))
