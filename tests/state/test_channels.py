"""Channels own their behaviour: a middleware channel of pydantic values survives a checkpoint."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from deepactors import AgentMiddleware, RunContext, create_deep_agent
from deepactors.filediff import FileDiff, FileRecord, diff_files
from deepactors.models import FunctionModel, ModelRequest
from deepactors.persistence import MemoryCheckpointer, SqliteCheckpointer
from deepactors.state import Channel, State, default_channels

pytestmark = pytest.mark.anyio


class Visit(BaseModel):
    url: str
    ok: bool


def _visits(value: Any) -> list[Visit]:
    return [v if isinstance(v, Visit) else Visit.model_validate(v) for v in value]


class VisitLog(AgentMiddleware):
    """Keeps a typed list of visits in state; appends one per model call."""

    channels = {  # noqa: RUF012 - a class-level declaration, as middleware do
        "visits": Channel(
            reducer=lambda current, new: [*current, *new], default=list, coerce=_visits
        )
    }

    async def before_model(self, state: State, run: RunContext) -> dict[str, Any]:
        return {"visits": [Visit(url=f"https://x/{len(state['visits'])}", ok=True)]}


@pytest.fixture(params=["memory", "sqlite"])
def checkpointer(request: pytest.FixtureRequest, tmp_path: Any) -> Any:
    if request.param == "memory":
        return MemoryCheckpointer()
    return SqliteCheckpointer(tmp_path / "t.db")


async def test_a_middleware_channel_of_models_round_trips_through_a_checkpoint(
    checkpointer: Any,
) -> None:
    def model(request: ModelRequest) -> str:
        return "done"

    agent = create_deep_agent(
        FunctionModel(model), middleware=[VisitLog()], checkpointer=checkpointer
    )
    first = await agent.ainvoke("go", thread_id="t")
    assert first["visits"] == [Visit(url="https://x/0", ok=True)]
    # A new agent object: nothing in memory, the thread is read back from disk.
    again = create_deep_agent(
        FunctionModel(model), middleware=[VisitLog()], checkpointer=checkpointer
    )
    saved = await again.aget_state("t")
    assert saved["visits"] == [Visit(url="https://x/0", ok=True)]
    assert all(isinstance(v, Visit) for v in saved["visits"])
    second = await again.ainvoke("more", thread_id="t")
    assert [v.url for v in second["visits"]] == ["https://x/0", "https://x/1"]


def test_applying_a_diff_reports_its_effect_and_leaves_the_diff_untouched() -> None:
    state = State(default_channels())
    base = FileRecord(content="a\nb\n")
    state.apply({"files": {"/f.md": base}})
    sibling = base.changed("a\nB\n")
    state.apply({"files": {"/f.md": sibling}})
    child = {"/f.md": base.changed("A\nb\n"), "/new.md": FileRecord(content="n")}
    diff = FileDiff(changes=diff_files({"/f.md": base}, child), label="task-1")
    seen: list[Any] = []
    state.listener = seen.append
    applied = state.apply({"files": diff})
    assert state.files["/f.md"].content == "A\nB\n"  # three-way merged
    assert state.files["/new.md"].content == "n"
    # Listeners and the journal see the effect (records now at the paths), never the diff.
    assert seen == [applied]
    assert set(applied.update["files"]) == {"/f.md", "/new.md"}
    assert applied.merge is not None
    assert {o.path: o.how for o in applied.merge.outcomes} == {
        "/f.md": "merged",
        "/new.md": "applied",
    }
    assert "merged" in applied.note()
    # The diff is a value: merging did not write into it.
    assert set(diff.changes) == {"/f.md", "/new.md"}
