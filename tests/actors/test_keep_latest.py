"""``ThreadHandle.keep_latest``: a thread's journal compacted to its latest state.

The thread reads as it did (values, what it waits for, what runs next), its
history starts at the compaction, and runs go on from it, on a memory and a
SQLite checkpointer (PostgreSQL: tests/persistence/test_replace.py).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from deepactors import (
    AssistantMessage,
    Command,
    ToolCall,
    ToolMessage,
    create_deep_agent,
    open_runtime,
)
from deepactors.actors import ThreadState
from deepactors.errors import ConfigurationError
from deepactors.models import FunctionModel, ModelRequest
from deepactors.persistence import (
    Checkpointer,
    CheckpointRecord,
    CheckpointWrite,
    MemoryCheckpointer,
    SqliteCheckpointer,
    ThreadInfo,
)

pytestmark = pytest.mark.anyio

SHOUTED: list[str] = []


async def shout(text: str) -> str:
    """Shout.

    Args:
        text: What to shout.
    """
    SHOUTED.append(text)
    return text.upper()


def turns(request: ModelRequest) -> AssistantMessage:
    """Per user message: a tool call and a file, then an answer."""
    last = request.messages[-1]
    n = sum(m.role == "user" for m in request.messages)
    if isinstance(last, ToolMessage):
        shouted = [m.text for m in request.messages if getattr(m, "tool_call_id", "") == f"s{n}"]
        return AssistantMessage(content=f"done: {' '.join(shouted)}")
    return AssistantMessage(
        tool_calls=[
            ToolCall(id=f"s{n}", name="shout", args={"text": last.text}),
            ToolCall(
                id=f"w{n}",
                name="write_file",
                args={"file_path": f"/notes/{n}.md", "content": last.text},
            ),
        ]
    )


@pytest.fixture(params=["memory", "sqlite"])
async def saver(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Checkpointer]:
    if request.param == "memory":
        yield MemoryCheckpointer()
    else:
        async with SqliteCheckpointer(tmp_path / "threads.db") as sqlite:
            yield sqlite


def agent(saver: Checkpointer, **kwargs: Any) -> Any:
    return create_deep_agent(FunctionModel(turns), tools=[shout], checkpointer=saver, **kwargs)


def reads(state: ThreadState) -> tuple[Any, ...]:
    values = dict(state.values)
    return (
        [(m.role, m.text, m.id) for m in values.pop("messages")],
        sorted(values.pop("files")),
        values,
        state.next,
        state.interrupts,
        state.stopped,
    )


async def test_a_thread_keeps_its_state_and_goes_on_from_it(saver: Checkpointer) -> None:
    a = agent(saver)
    async with open_runtime() as rt:
        thread = rt.thread(a, "t")
        for text in ("one", "two", "three"):
            await thread.ainvoke(text)
        before = await thread.state()
        records = await saver.read("t")
        dropped = await thread.keep_latest()
        assert dropped == len(records) - 1 > 0
        after = await thread.state()
        assert reads(after) == reads(before)
        assert [r.kind for r in await saver.read("t")] == ["update"]
        assert len(await thread.history()) == 1
        assert await thread.keep_latest() == 0  # nothing left to drop
        # The thread goes on from its one record, in this runtime and a new one.
        result = await thread.ainvoke("four")
        assert result["messages"][-1].text == "done: FOUR"
        assert [m.text for m in result["messages"] if m.role == "user"] == [
            "one",
            "two",
            "three",
            "four",
        ]
    async with open_runtime() as rt:
        state = await rt.thread(a, "t").state()
        assert sorted(state.values["files"]) == [f"/notes/{n}.md" for n in range(1, 5)]


async def test_a_pending_approval_survives_and_a_rejected_call_never_runs(
    saver: Checkpointer,
) -> None:
    SHOUTED.clear()
    a = agent(saver, interrupt_on={"shout": True})
    async with open_runtime() as rt:
        thread = rt.thread(a, "t")
        await thread.ainvoke("first")
        await thread.ainvoke(Command(resume={"decisions": [{"type": "approve"}]}))
        await thread.ainvoke("second")
        before = await thread.state()
        assert before.interrupts
        assert before.next == ("tools",)
        assert await thread.keep_latest() > 0
        assert reads(await thread.state()) == reads(before)
        # write_file (not guarded) ran in the interrupted step: its result is kept, not re-run.
        done = await thread.ainvoke(Command(resume={"decisions": [{"type": "reject"}]}))
        assert SHOUTED == ["first"]
        assert done["messages"][-1].text.startswith("done:")
        assert sorted(done["files"]) == ["/notes/1.md", "/notes/2.md"]


async def test_a_breakpoint_stop_survives(saver: Checkpointer) -> None:
    a = agent(saver)
    async with open_runtime() as rt:
        thread = rt.thread(a, "t")
        await thread.ainvoke("one")
        await thread.ainvoke("two", interrupt_before=["tools"])
        before = await thread.state()
        assert before.stopped
        assert before.next == ("tools",)
        assert await thread.keep_latest() > 0
        assert reads(await thread.state()) == reads(before)
        result = await thread.ainvoke(None)
        assert result["messages"][-1].text == "done: TWO"


async def test_a_rolled_back_thread_keeps_the_state_it_went_back_to(saver: Checkpointer) -> None:
    a = agent(saver)
    async with open_runtime() as rt:
        thread = rt.thread(a, "t")
        await thread.ainvoke("one")
        head = await thread.head()
        await thread.ainvoke("two")
        await thread.rollback(head)
        before = await thread.state()
        assert await thread.keep_latest() > 0
        assert reads(await thread.state()) == reads(before)
        assert "/notes/2.md" not in (await thread.state()).values["files"]


class AppendOnly:
    """A checkpointer of one's own without ``replace``: keep_latest says what it lacks."""

    def __init__(self) -> None:
        self._inner = MemoryCheckpointer()

    @property
    def location(self) -> str:
        return "append-only"

    def lease(self, thread_id: str) -> Any:
        return self._inner.lease(thread_id)

    async def put(self, thread_id: str, records: Sequence[CheckpointWrite]) -> None:
        await self._inner.put(thread_id, records)

    async def read(
        self, thread_id: str, *, path: str | None = None, upto_seq: int | None = None
    ) -> list[CheckpointRecord]:
        return await self._inner.read(thread_id, path=path, upto_seq=upto_seq)

    async def threads(self) -> list[ThreadInfo]:
        return await self._inner.threads()

    async def delete_thread(self, thread_id: str) -> None:
        await self._inner.delete_thread(thread_id)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> AppendOnly:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


async def test_a_checkpointer_that_cannot_rewrite_is_named() -> None:
    saver = AppendOnly()
    assert isinstance(saver, Checkpointer)
    a = agent(saver)
    async with open_runtime() as rt:
        thread = rt.thread(a, "t")
        await thread.ainvoke("one")
        with pytest.raises(ConfigurationError, match="AppendOnly cannot replace"):
            await thread.keep_latest()
        assert len(await saver.read("t")) > 1


SUB_CALLS: list[int] = []


def parent(request: ModelRequest) -> AssistantMessage:
    if isinstance(request.messages[-1], ToolMessage):
        return AssistantMessage(content="all done")
    return AssistantMessage(
        tool_calls=[
            ToolCall(id="t1", name="task", args={"description": "shout it", "subagent_type": "sub"})
        ]
    )


def sub(request: ModelRequest) -> AssistantMessage:
    SUB_CALLS.append(len(request.messages))
    if isinstance(request.messages[-1], ToolMessage):
        return AssistantMessage(content="sub done")
    return AssistantMessage(tool_calls=[ToolCall(id="s1", name="shout", args={"text": "sub"})])


async def test_a_subagent_waiting_for_an_approval_resumes_from_its_kept_records(
    saver: Checkpointer,
) -> None:
    SUB_CALLS.clear()
    SHOUTED.clear()
    a = create_deep_agent(
        FunctionModel(parent),
        tools=[shout],
        checkpointer=saver,
        interrupt_on={"shout": True},
        subagents=[
            {
                "name": "sub",
                "description": "shouts",
                "system_prompt": "shout",
                "model": FunctionModel(sub),
            }
        ],
    )
    async with open_runtime() as rt:
        thread = rt.thread(a, "t")
        approve = Command(resume={"decisions": [{"type": "approve"}]})
        await thread.ainvoke("one")  # a first turn, to have history to drop
        await thread.ainvoke(approve)
        first = await thread.ainvoke("two")
        assert first["__interrupt__"]
        assert await thread.keep_latest() > 0
        assert {r.path for r in await saver.read("t")} != {"main"}  # the subagent's kept
        done = await thread.ainvoke(approve)
    assert done["messages"][-1].text == "all done"
    assert SHOUTED == ["sub", "sub"]  # once per turn: the kept subagent did not start over
    assert len(SUB_CALLS) == 4  # two model calls per subagent run
