"""The journal's two roads to a stored record keep the same thing.

A checkpointer of this package takes a state change encoded as it happens
(``EncodedPut.put_encoded``: messages through pydantic's JSON serializer); one
of a user's gets ``CheckpointWrite`` dicts through ``put``. Both must store the
same records, read back the same, including the cases the fast road hands to
the general one (a lone surrogate pydantic will not write, a removal).
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import pytest
from anyio.abc import AsyncResource

from deepactors import (
    AssistantMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
    create_deep_agent,
    tool,
)
from deepactors.actors._codec import encode_update, encode_update_text
from deepactors.models import FunctionModel, ModelRequest
from deepactors.persistence import (
    Checkpointer,
    CheckpointRecord,
    CheckpointWrite,
    EncodedPut,
    MemoryCheckpointer,
    SqliteCheckpointer,
    ThreadInfo,
    ThreadLease,
    encode_writes,
    encoded_put,
)
from deepactors.state import RemoveMessage, State, default_channels

pytestmark = pytest.mark.anyio


class OwnCheckpointer(AsyncResource):
    """A checkpointer as a user writes one: the protocol only (no ``put_encoded``);
    ``async with`` from anyio's ``AsyncResource``, as this package's own."""

    def __init__(self) -> None:
        self.inner = MemoryCheckpointer()
        self.puts: list[list[CheckpointWrite]] = []

    @property
    def location(self) -> str:
        return "own"

    def lease(self, thread_id: str) -> AbstractAsyncContextManager[ThreadLease]:
        return self.inner.lease(thread_id)

    async def put(self, thread_id: str, records: Sequence[CheckpointWrite]) -> None:
        assert all(isinstance(r, CheckpointWrite) for r in records)
        self.puts.append(list(records))
        await self.inner.put(thread_id, records)

    async def read(
        self, thread_id: str, *, path: str | None = None, upto_seq: int | None = None
    ) -> list[CheckpointRecord]:
        return await self.inner.read(thread_id, path=path, upto_seq=upto_seq)

    async def threads(self) -> list[ThreadInfo]:
        return await self.inner.threads()

    async def delete_thread(self, thread_id: str) -> None:
        await self.inner.delete_thread(thread_id)

    async def aclose(self) -> None:
        await self.inner.aclose()


@tool
def look(query: str, deep: dict[str, Any]) -> str:
    """Look something up."""
    return f"found {query} \u00e9\u4e2d \udcff"


def _answer(request: ModelRequest) -> AssistantMessage:
    turn = sum(isinstance(m, AssistantMessage) for m in request.messages)
    if turn < 2:
        args: dict[str, Any] = {"query": f'q{turn} \u2028"\\', "deep": {"n": [1, 2.5, None]}}
        return AssistantMessage(content="", tool_calls=[ToolCall(name="look", args=args)])
    return AssistantMessage(content="done \U0001f600")


async def _records(checkpointer: Any) -> list[tuple[str, int, str, dict[str, Any]]]:
    agent = create_deep_agent(FunctionModel(_answer), tools=[look], checkpointer=checkpointer)
    await agent.ainvoke(
        {"messages": [UserMessage(content="lone \udcff surrogate, and \u00e9")]}, thread_id="t"
    )
    return [(r.path, r.step, r.kind, r.data) for r in await checkpointer.read("t")]


def _ids_dropped(records: list[tuple[str, int, str, dict[str, Any]]]) -> list[Any]:
    # Message ids and call ids are fresh per run; everything else must match.
    def scrub(value: Any) -> Any:
        if isinstance(value, dict):
            return {
                k: ("<id>" if k in ("id", "tool_call_id") else scrub(v)) for k, v in value.items()
            }
        if isinstance(value, list):
            return [scrub(v) for v in value]
        return value

    return [(path, step, kind, scrub(data)) for path, step, kind, data in records]


@pytest.fixture(params=["memory", "sqlite"])
def ours(request: pytest.FixtureRequest, tmp_path: Path) -> MemoryCheckpointer | SqliteCheckpointer:
    if request.param == "memory":
        return MemoryCheckpointer()
    return SqliteCheckpointer(tmp_path / "t.db")


async def test_both_roads_store_the_same_records(
    ours: MemoryCheckpointer | SqliteCheckpointer,
) -> None:
    assert isinstance(ours, EncodedPut)
    own = OwnCheckpointer()
    assert isinstance(own, Checkpointer)
    assert not isinstance(own, EncodedPut)
    async with ours:
        fast = await _records(ours)
    slow = await _records(own)
    assert own.puts  # the user's checkpointer was given dicts
    assert _ids_dropped(fast) == _ids_dropped(slow)
    kinds = [kind for _, _, kind, _ in fast]
    assert kinds.count("update") >= 6
    first, last = fast[0][3]["messages"][0], fast[-1][3]["messages"][-1]
    assert first["content"] == "lone \udcff surrogate, and \u00e9"
    assert last["content"] == "done \U0001f600"
    calls = [
        m["tool_calls"]
        for *_, data in fast
        for m in data.get("messages", [])
        if m.get("tool_calls")
    ]
    assert calls[0][0]["args"]["query"] == 'q0 \u2028"\\'


async def test_a_thread_written_on_the_fast_road_resumes(tmp_path: Path) -> None:
    file = tmp_path / "t.db"
    async with SqliteCheckpointer(file) as checkpointer:
        await _records(checkpointer)
    async with SqliteCheckpointer(file) as again:
        agent = create_deep_agent(FunctionModel(_answer), tools=[look], checkpointer=again)
        state = await agent.aget_state("t")
    messages = state.values["messages"]
    assert messages[0].text == "lone \udcff surrogate, and \u00e9"
    results = [m for m in messages if isinstance(m, ToolMessage)]
    assert len(results) == 2
    assert all(m.text.endswith("\u00e9\u4e2d \udcff") for m in results)
    assert messages[-1].text == "done \U0001f600"


UPDATES: dict[str, dict[str, Any]] = {
    "turn": {
        "messages": [
            AssistantMessage(content="", tool_calls=[ToolCall(id="c", name="n", args={"a": 1})]),
            ToolMessage(tool_call_id="c", name="n", content="ok"),
        ]
    },
    "escapes": {"messages": [UserMessage(content='h\u00e9llo \u2028 "q" \\ \n \x00')]},
    "removal": {"messages": [RemoveMessage("x")]},
    "lone-surrogate": {"messages": [UserMessage(content="a\udcffb")]},
    "other-channel": {"todos": []},
    "mixed": {"todos": [], "messages": [UserMessage(content="x")], "structured_response": None},
    "nan-and-int-keys-in-args": {
        "messages": [
            AssistantMessage(
                content="",
                tool_calls=[ToolCall(id="a", name="n", args={"x": {1: float("nan"), "y": 0.1}})],
            )
        ]
    },
}


@pytest.mark.parametrize("case", list(UPDATES))
def test_the_encoded_road_writes_what_encode_writes_writes(case: str) -> None:
    state = State(default_channels())
    update = UPDATES[case]
    fast = encode_update_text(update, state)
    slow = encode_writes(
        [CheckpointWrite(path="p", step=1, kind="update", data=encode_update(update, state))]
    )
    assert fast == slow[0][3]


class CountingSaver(MemoryCheckpointer):
    """A subclass of ours that overrides ``put`` (to count, check or encrypt, say)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen = 0

    async def put(self, thread_id: str, records: Sequence[CheckpointWrite]) -> None:
        self.seen += len(records)
        await super().put(thread_id, records)


async def test_a_subclass_that_overrides_put_gets_every_record_through_it() -> None:
    saver = CountingSaver()
    assert encoded_put(saver) is None
    assert encoded_put(MemoryCheckpointer()) is not None
    agent = create_deep_agent(FunctionModel(_answer), tools=[look], checkpointer=saver)
    await agent.ainvoke("go", thread_id="t")
    assert saver.seen == len(await saver.read("t")) > 0
