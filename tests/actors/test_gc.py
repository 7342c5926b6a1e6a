"""The garbage collector's work: runs free their objects without it; the opt-in heap freeze."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path
from typing import ClassVar

import anyio
import pytest

from deepactors import AssistantMessage, ToolCall, create_deep_agent, open_runtime
from deepactors.actors import _heap
from deepactors.actors._heap import FANOUT_WIDTH, FULL_EVERY
from deepactors.context import RunContext
from deepactors.history import MessageList
from deepactors.models import FunctionModel, ModelRequest
from deepactors.persistence import SqliteCheckpointer
from deepactors.state import State


def _child_answer(request: ModelRequest) -> AssistantMessage | str:
    if len(request.messages) == 1:
        return AssistantMessage(tool_calls=[ToolCall(name="write_file", args=_NOTE)])
    return "noted"


_NOTE = {"file_path": "/note.md", "content": "hello"}


def _main_answer(request: ModelRequest) -> AssistantMessage | str:
    if len(request.messages) == 1:
        brief = {"description": "write a note", "subagent_type": "w"}
        return AssistantMessage(tool_calls=[ToolCall(name="task", args=brief) for _ in range(3)])
    return "done"


async def test_a_finished_run_leaves_no_cycle_for_the_collector(tmp_path: Path) -> None:
    # Subagents, events and checkpoints: every listener and actor kind. What a
    # run leaves behind must be freed by reference counting alone, or every
    # thread's whole state waits for a full collection.
    child = {
        "name": "w",
        "description": "w",
        "system_prompt": "w",
        "model": FunctionModel(_child_answer),
    }
    agent = create_deep_agent(
        FunctionModel(_main_answer),
        subagents=[child],
        checkpointer=SqliteCheckpointer(tmp_path / "threads.db"),
    )
    gc.collect()
    gc.disable()
    try:
        async with agent.astream("go", thread_id="t1") as stream:
            seen = [event async for event in stream]
        result = await agent.ainvoke({"messages": "again"}, thread_id="t1")
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        ours = (State, MessageList, RunContext, AssistantMessage)
        left = [type(o).__name__ for o in gc.garbage if isinstance(o, ours)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert seen
    assert result["files"]["/note.md"].content == "hello"
    assert left == []


async def test_a_runtime_keeps_the_heap_frozen_only_when_asked_and_only_while_open() -> None:
    assert gc.get_freeze_count() == 0
    agent = create_deep_agent(FunctionModel(lambda request: "hi"))
    async with open_runtime() as rt:
        assert gc.get_freeze_count() == 0  # not without asking
        await rt.thread(agent).ainvoke("go")
    async with open_runtime(freeze_heap=True) as rt:
        frozen = gc.get_freeze_count()
        assert frozen > 1000  # modules, classes, the compiled agent
        result = await rt.thread(agent).ainvoke("go")
        assert result["messages"][-1].text == "hi"
        made_since = [[] for _ in range(5000)]  # tracked objects, not frozen
        async with open_runtime(freeze_heap=True):
            # Nested: nothing frozen again (these would be), nothing thawed.
            assert frozen // 2 < gc.get_freeze_count() < frozen + len(made_since)
        assert frozen // 2 < gc.get_freeze_count()  # the outer runtime still holds it
        del made_since
    assert gc.get_freeze_count() == 0


async def test_the_heap_thaws_when_the_runtime_fails() -> None:
    class Boom(Exception):
        pass

    try:
        with anyio.fail_after(5):
            async with open_runtime(freeze_heap=True):
                raise Boom
    except* Boom:
        pass
    assert gc.get_freeze_count() == 0


class _Junk:
    """Cyclic garbage, counted while it is alive."""

    alive: ClassVar[weakref.WeakSet[_Junk]] = weakref.WeakSet()

    def __init__(self) -> None:
        self.me = self
        _Junk.alive.add(self)


async def test_a_deferring_runtime_freezes_instead_of_collecting_only_during_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_heap, "HANDBACK_GAP", 0.0)  # no hand-back of another test in the way
    seen: dict[str, int] = {}

    async def probe() -> str:
        """Look at the collector from inside a run."""
        _Junk()  # cyclic garbage made during the run
        gc.collect()  # a full collection falls due: deferred, it freezes
        seen["frozen"] = gc.get_freeze_count()
        seen["junk"] = len(_Junk.alive)
        return "ok"

    def answer(request: ModelRequest) -> AssistantMessage | str:
        if len(request.messages) == 1:
            return AssistantMessage(tool_calls=[ToolCall(name="probe", args={})])
        return "done"

    agent = create_deep_agent(FunctionModel(answer), tools=[probe])
    callbacks = list(gc.callbacks)
    async with open_runtime(defer_gc=True) as rt:
        assert gc.get_freeze_count() == 0  # nothing before a run
        result = await rt.thread(agent).ainvoke("go")
        # The run is over: everything handed back to the collector, and collected.
        assert gc.get_freeze_count() == 0
        assert len(_Junk.alive) == 0
    assert result["messages"][-1].text == "done"
    assert seen["frozen"] > 1000
    assert seen["junk"] == 1  # not collected while the run was in progress
    assert gc.callbacks == callbacks  # the hook leaves with the runtime


async def test_cyclic_garbage_of_deferred_runs_is_collected_run_after_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Issue 41, item 7: what was frozen was handed back to the old generation,
    # where no full collection came before the next run's deferred collection
    # froze it again: a server's cyclic garbage (trio makes some per request)
    # was never collected.
    monkeypatch.setattr(_heap, "HANDBACK_GAP", 0.0)  # each run's end hands back (default 5 s)

    async def churn() -> str:
        """Make cyclic garbage, then let a full collection fall due."""
        for _ in range(50):
            _Junk()
        gc.collect()  # deferred: it freezes, the junk with the rest
        return "ok"

    def answer(request: ModelRequest) -> AssistantMessage | str:
        if len(request.messages) == 1:
            return AssistantMessage(tool_calls=[ToolCall(name="churn", args={})])
        return "done"

    agent = create_deep_agent(FunctionModel(answer), tools=[churn])
    async with open_runtime(defer_gc=True) as rt:
        # (Each hand-back is a full collection of the test process's whole heap:
        # a few runs show it, run after run, without paying for twenty.)
        for _ in range(3):
            await rt.thread(agent).ainvoke("go")
        assert len(_Junk.alive) == 0
        async with anyio.create_task_group() as tg:  # runs that overlap: one hand-back at the end
            for _ in range(3):
                tg.start_soon(rt.thread(agent).ainvoke, "go")
        assert len(_Junk.alive) == 0
    assert gc.get_freeze_count() == 0


async def test_deferring_and_a_frozen_heap_together() -> None:
    agent = create_deep_agent(FunctionModel(lambda request: "hi"))
    async with open_runtime(freeze_heap=True, defer_gc=True) as rt:
        frozen = gc.get_freeze_count()
        assert frozen > 1000
        await rt.thread(agent).ainvoke("go")
        gc.collect()  # no run in progress: a real collection, then the heap frozen again
        assert gc.get_freeze_count() > frozen // 2
    assert gc.get_freeze_count() == 0


def _wide_agent(n: int, seen: list[tuple[int, int, int]]) -> object:
    async def look(i: int) -> str:
        """Look at the collector's thresholds.

        Args:
            i: Which call.
        """
        seen.append(gc.get_threshold())
        return "ok"

    def answer(request: ModelRequest) -> AssistantMessage | str:
        if len(request.messages) == 1:
            calls = [ToolCall(name="look", args={"i": i}) for i in range(n)]
            return AssistantMessage(tool_calls=calls)
        if len(request.messages) == n + 2:
            # A narrow step later in the same run: the hold lasts to the run's end.
            return AssistantMessage(tool_calls=[ToolCall(name="look", args={"i": -1})])
        return "done"

    return create_deep_agent(FunctionModel(answer), tools=[look])


async def test_a_wide_fan_out_holds_full_collections_off_until_its_run_ends() -> None:
    before = gc.get_threshold()
    seen: list[tuple[int, int, int]] = []
    agent = _wide_agent(FANOUT_WIDTH, seen)
    result = await agent.ainvoke("go")  # type: ignore[attr-defined]
    assert result["messages"][-1].text == "done"
    assert len(seen) == FANOUT_WIDTH + 1
    # The young thresholds as they were; full collections rare, for the whole run.
    assert set(seen) == {(before[0], before[1], FULL_EVERY)}
    assert gc.get_threshold() == before  # put back when the run ended


async def test_a_narrow_step_leaves_the_thresholds_alone() -> None:
    before = gc.get_threshold()
    seen: list[tuple[int, int, int]] = []
    agent = _wide_agent(FANOUT_WIDTH - 1, seen)
    await agent.ainvoke("go")  # type: ignore[attr-defined]
    assert set(seen) == {before}


async def test_thresholds_set_during_a_held_run_are_kept() -> None:
    before = gc.get_threshold()
    mine = (before[0] + 1, before[1], 5)

    async def retune() -> str:
        """Set the collector's thresholds, as an application might."""
        gc.set_threshold(*mine)
        return "ok"

    def answer(request: ModelRequest) -> AssistantMessage | str:
        if len(request.messages) == 1:
            calls = [ToolCall(name="retune", args={}) for _ in range(FANOUT_WIDTH)]
            return AssistantMessage(tool_calls=calls)
        return "done"

    try:
        await create_deep_agent(FunctionModel(answer), tools=[retune]).ainvoke("go")
        assert gc.get_threshold() == mine  # the application's, not put back over
    finally:
        gc.set_threshold(*before)
