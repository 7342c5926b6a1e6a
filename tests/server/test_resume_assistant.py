"""A resume names another assistant than the one that stopped (faults III, item 0).

deep-agents-ui lists every assistant's threads and resumes with the one it shows;
the built-in page resets its picker on reload. A human's decision must be carried
out by the assistant that asked (or refused), never turned into another's approval.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from deepactors import AssistantMessage, ToolCall, ToolMessage, create_deep_agent
from deepactors.models import FunctionModel, ModelRequest
from deepactors.persistence import MemoryCheckpointer
from deepactors.server import create_app

from .conftest import Served

Serve = Callable[..., Served]
WRITE = {"messages": [{"role": "user", "content": "write it"}]}


def writer(tag: str, **kwargs: Any) -> Any:
    """Asks to write /notes.txt, then says what came of it, signed ``tag``."""

    def model(request: ModelRequest) -> AssistantMessage:
        last = request.messages[-1]
        if isinstance(last, ToolMessage):
            return AssistantMessage(content=f"{tag}: {last.status}")
        return AssistantMessage(
            tool_calls=[
                ToolCall(name="write_file", args={"file_path": "/notes.txt", "content": tag})
            ]
        )

    return create_deep_agent(FunctionModel(model), **kwargs)


def two_assistants(serve: Serve) -> Any:
    saver = MemoryCheckpointer()
    app = create_app(
        {
            "hitl": writer("hitl", interrupt_on={"write_file": True}, checkpointer=saver),
            "agent": writer("agent", checkpointer=saver),
        }
    )
    return serve(app).client()


def test_a_rejection_sent_through_another_assistant_is_carried_out_by_the_one_that_asked(
    serve: Serve,
) -> None:
    client = two_assistants(serve)
    thread_id = client.threads.create()["thread_id"]
    stopped = client.runs.wait(thread_id, "hitl", input=WRITE)
    assert stopped["__interrupt__"]
    reject = {"decisions": [{"type": "reject", "message": "no"}]}
    run = client.runs.create(thread_id, "agent", command={"resume": reject})
    done = client.runs.join(thread_id, run["run_id"])
    assert "/notes.txt" not in done.get("files", {})
    assert done["messages"][-2]["status"] == "error"
    assert "A human rejected this call (no)" in done["messages"][-2]["content"]
    # The assistant that asked goes on: its script, not the other's.
    assert done["messages"][-1]["content"] == "hitl: error"
    hitl = client.assistants.get("hitl")
    assert client.runs.get(thread_id, run["run_id"])["assistant_id"] == hitl["assistant_id"]


def test_mark_as_resolved_through_another_assistant_runs_nothing(serve: Serve) -> None:
    client = two_assistants(serve)
    thread_id = client.threads.create()["thread_id"]
    assert client.runs.wait(thread_id, "hitl", input=WRITE)["__interrupt__"]
    done = client.runs.wait(thread_id, "agent", command={"goto": "__end__"})
    assert "/notes.txt" not in done.get("files", {})
    assert client.threads.get_state(thread_id)["next"] == []


def test_continuing_with_another_assistant_and_no_decision_stops_again(serve: Serve) -> None:
    client = two_assistants(serve)
    thread_id = client.threads.create()["thread_id"]
    first = client.runs.wait(thread_id, "hitl", input=WRITE)
    again = client.runs.wait(thread_id, "agent", input=None)
    assert again["__interrupt__"] == first["__interrupt__"]
    assert "/notes.txt" not in again.get("files", {})
    assert client.threads.get(thread_id)["status"] == "interrupted"
