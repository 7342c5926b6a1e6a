"""``task`` calls that run on a real ``deepactors serve`` process, on both loops:
answers and file changes merge as a local child's do, failures of every kind
become errors the parent's model reads, events come back under the child's path."""

from __future__ import annotations

import socket

import anyio
import pytest

from deepactors.events import (
    CustomEvent,
    ModelCallFinished,
    StateUpdated,
    SubagentSpawned,
    ToolCallFinished,
)
from deepactors.remote import REMOTE_RUN

from .conftest import answers, parent, remote, say


async def test_answers_and_new_files_come_back_and_merge(server: str) -> None:
    agent = parent([remote("r", server)])
    with anyio.fail_after(30):
        result = await agent.ainvoke(
            say(
                [("r", "echo hello"), ("r", "write /notes.md from afar")],
                files={"/keep.md": "kept"},
            )
        )
    (s1, echo), (s2, wrote) = answers(result)
    assert (s1, echo) == ("success", "echo: hello")
    assert s2 == "success"
    assert wrote.startswith("wrote /notes.md")
    assert "Files changed by the subagent: /notes.md" in wrote
    files = result["files"]
    assert files["/notes.md"].content == "from afar"
    assert files["/keep.md"].content == "kept"


async def test_the_child_sees_the_parents_files_and_a_conflict_is_kept(server: str) -> None:
    # Two children edit the same line (the second conflicts, as between local
    # children), a third another line (merged by lines).
    agent = parent([remote("r", server)])
    text = "one\ntwo\nthree\n"
    with anyio.fail_after(30):
        result = await agent.ainvoke(
            say(
                [
                    ("r", "edit /shared.md two TWO-a"),
                    ("r", "edit /shared.md two TWO-b"),
                    ("r", "edit /shared.md three THREE"),
                ],
                files={"/shared.md": text},
            )
        )
    results = answers(result)
    assert all(status == "success" for status, _ in results), results
    files = result["files"]
    assert files["/shared.md"].content == "one\nTWO-a\nTHREE\n"
    assert files["/shared.conflict-task-2.md"].content == "one\nTWO-b\nthree\n"
    assert "CONFLICT: /shared.md" in results[1][1]
    assert "merged" in results[2][1]


async def test_remote_failures_are_errors_the_parent_model_reads(server: str) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}"
    agent = parent(
        [
            remote("r", server),
            remote("nograph", server, graph_id="no-such-graph"),
            remote("down", closed),
        ]
    )
    with anyio.fail_after(30):
        result = await agent.ainvoke(
            say([("r", "fail"), ("nograph", "echo x"), ("down", "echo x")])
        )
    (s1, broke), (s2, unknown), (s3, down) = answers(result)
    assert (s1, s2, s3) == ("error", "error", "error")
    assert "main/task-1:r failed" in broke
    assert "RuntimeError: the model broke" in broke
    assert "404" in unknown
    assert "graph_id" in unknown
    assert "could not connect" in down
    assert closed in down


async def test_a_remote_interrupt_is_a_failure_that_says_where_it_waits(server: str) -> None:
    agent = parent([remote("asker", server, graph_id="asker")])
    with anyio.fail_after(30):
        result = await agent.ainvoke(say([("asker", "ask")]))
    [(status, text)] = answers(result)
    assert status == "error"
    assert "human decision" in text
    assert "send_email" in text
    assert server in text


async def test_events_stream_back_under_the_childs_path(server: str) -> None:
    agent = parent([remote("r", server)])
    seen = []
    with anyio.fail_after(30):
        async for event in agent.astream(say([("r", "write /a.md x")])):
            seen.append(event)
    spawned = [e for e in seen if isinstance(e, SubagentSpawned)]
    assert [e.child for e in spawned] == ["main/task-1:r"]
    child = [e for e in seen if e.path == "main/task-1:r"]
    assert any(isinstance(e, ModelCallFinished) for e in child)
    calls = [e.call.name for e in child if isinstance(e, ToolCallFinished)]
    assert calls == ["write_file"]
    # The remote state's values (LangChain's shapes) are not relayed.
    assert not any(isinstance(e, StateUpdated) for e in child)
    # Where the child's run is, for a UI to link to.
    [where] = [e.data[REMOTE_RUN] for e in child if isinstance(e, CustomEvent)]
    assert where["url"] == server
    assert set(where) == {"url", "thread_id", "run_id"}


@pytest.mark.parametrize("bad", ["ftp://x", "http://", "not a url"])
def test_a_bad_url_is_refused_when_the_agent_is_made(bad: str) -> None:
    from deepactors.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="url"):
        parent([remote("r", bad)])


def test_the_server_streams_events_lite_without_state_updates(server: str) -> None:
    # What a remote child asks for: every typed event but the state updates,
    # whose values are the child's whole state (its parent's files with it).
    from langgraph_sdk import get_sync_client

    order = {"messages": [{"role": "user", "content": "write /a.md x"}], "files": {"/b.md": "b"}}
    names: dict[str, list[str]] = {}
    with get_sync_client(url=server, api_key=None) as client:
        for mode in ("events", "events-lite"):
            thread = client.threads.create()["thread_id"]
            parts = client.runs.stream(thread, "agent", input=order, stream_mode=mode)
            names[mode] = [p.data["event"] for p in parts if p.event == mode]
    assert "state_updated" in names["events"]
    assert "state_updated" not in names["events-lite"]
    assert names["events-lite"] == [n for n in names["events"] if n != "state_updated"]
