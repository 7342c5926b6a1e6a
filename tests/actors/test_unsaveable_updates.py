"""A tool's state update that a checkpoint cannot keep is refused at the tool (issue 41, item 2).

A tool returning ``Command(update=...)`` with NaN, an infinity or a value JSON
has no form for used to be applied, then written behind the run: the next run
on the thread raised ``CheckpointCorrupt`` (the ``todos`` channel kept the
tool's dicts as given, which its reader refuses) or a reader of the thread (the
server's ``/state``) failed on the number. Now the model reads an error for the
call, nothing of the update is applied, and the thread stays readable.
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import pytest

from deepactors import (
    AgentMiddleware,
    AssistantMessage,
    Command,
    ToolCall,
    ToolMessage,
    create_deep_agent,
    tool,
)
from deepactors.models import FunctionModel, ModelRequest
from deepactors.persistence import MemoryCheckpointer, SqliteCheckpointer
from deepactors.state import Channel

pytestmark = pytest.mark.anyio

NAN = float("nan")

UPDATES: dict[str, dict[str, Any]] = {
    "todo-with-nan": {"todos": [{"content": "rate it", "status": "pending", "score": NAN}]},
    "nan": {"structured_response": {"score": NAN}},
    "infinity": {"notes": [{"weight": float("-inf")}]},
    "set": {"notes": [{"tags": {"a", "b"}}]},
    "datetime": {"structured_response": {"at": datetime.datetime(2026, 1, 1)}},
    "int-key": {"structured_response": {1: "one"}},
}


class Notes(AgentMiddleware):
    """A middleware channel with no checks of its own: any value a tool sets."""

    channels = {"notes": Channel(default=list)}  # noqa: RUF012 - a class-level declaration


def _agent(update: dict[str, Any], checkpointer: Any) -> Any:
    @tool
    def rate() -> Command:
        """Rate the work."""
        return Command(update=update)

    def answer(request: ModelRequest) -> AssistantMessage:
        turn = sum(isinstance(m, AssistantMessage) for m in request.messages)
        if turn % 2 == 0:
            return AssistantMessage(tool_calls=[ToolCall(name="rate", args={})])
        last = [m for m in request.messages if isinstance(m, ToolMessage)][-1]
        return AssistantMessage(content=last.text)

    return create_deep_agent(
        FunctionModel(answer), tools=[rate], middleware=[Notes()], checkpointer=checkpointer
    )


@pytest.fixture(params=["memory", "sqlite"])
def checkpointer(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "memory":
        return MemoryCheckpointer()
    return SqliteCheckpointer(tmp_path / "t.db")


@pytest.mark.parametrize("case", list(UPDATES))
async def test_an_update_a_checkpoint_cannot_keep_is_refused_and_the_thread_stays_readable(
    case: str, checkpointer: Any
) -> None:
    agent = _agent(UPDATES[case], checkpointer)
    first = await agent.ainvoke("go", thread_id="t")
    refused = [m for m in first["messages"] if isinstance(m, ToolMessage)][-1]
    assert refused.status == "error"
    assert "the tool's state update was refused" in refused.text
    assert first["todos"] == []
    assert first["notes"] == []
    assert first["structured_response"] is None
    # The next run reads the thread back (from disk, for SQLite) and goes on.
    again = _agent(UPDATES[case], checkpointer)
    second = await again.ainvoke("again", thread_id="t")
    assert second["messages"][-1].text == refused.text
    saved = await again.aget_state("t")
    assert len(saved.values["messages"]) == len(second["messages"])


async def test_the_refusal_names_the_place_and_the_number(checkpointer: Any) -> None:
    state = await _agent(UPDATES["nan"], checkpointer).ainvoke("go", thread_id="t")
    refused = [m for m in state["messages"] if isinstance(m, ToolMessage)][-1]
    assert "'structured_response' cannot be saved: ['score']: nan is not a finite number" in (
        refused.text
    )


async def test_finite_updates_of_the_same_shapes_are_kept(checkpointer: Any) -> None:
    update = {
        "todos": [{"content": "rate it", "status": "completed"}],
        "structured_response": {"score": 1e308, "at": "2026-01-01"},
        "notes": [{"weight": -0.0, "tags": ["a", "b"]}],
    }
    agent = _agent(update, checkpointer)
    await agent.ainvoke("go", thread_id="t")
    saved = await _agent(update, checkpointer).aget_state("t")
    assert [t.content for t in saved.values["todos"]] == ["rate it"]
    assert saved.values["structured_response"] == {"score": 1e308, "at": "2026-01-01"}
    assert saved.values["notes"] == [{"weight": -0.0, "tags": ["a", "b"]}]
