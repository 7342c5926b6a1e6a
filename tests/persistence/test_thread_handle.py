"""One owner per thread: every write to a thread goes through its handle, under its lease.

Over every kind of checkpointer (memory, SQLite, PostgreSQL), on both loops.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

import deepactors
from deepactors import ToolCall, create_deep_agent, open_runtime
from deepactors.actors import ThreadHandle
from deepactors.errors import CheckpointCorrupt, ConfigurationError, InputError, RunCancelled
from deepactors.messages import AssistantMessage, UserMessage
from deepactors.models import FunctionModel, ModelRequest
from deepactors.persistence import Checkpointer, CheckpointWrite

pytestmark = pytest.mark.anyio


def echo(request: ModelRequest) -> str:
    """Answer with the last user message, upper-cased."""
    last = [m for m in request.messages if isinstance(m, UserMessage)][-1]
    return f"re: {last.text}"


def said(values: dict[str, Any] | Any) -> list[str]:
    return [m.text for m in values["messages"]]


async def test_a_handle_has_no_public_constructor() -> None:
    agent = create_deep_agent(FunctionModel(echo))
    with pytest.raises(TypeError, match=r"Runtime\.thread"):
        ThreadHandle(None, agent.spec, "t")  # type: ignore[arg-type]
    async with open_runtime() as rt:
        with pytest.raises(InputError, match="thread_id"):
            rt.thread(agent, "")
        assert "ThreadHandle" in repr(rt.thread(agent, "t"))


async def test_rollback_takes_the_thread_back_and_keeps_the_log_append_only(
    make_checkpointer: Callable[..., Checkpointer],
) -> None:
    async with make_checkpointer() as cp:
        agent = create_deep_agent(FunctionModel(echo), checkpointer=cp)
        async with open_runtime() as rt:
            t = rt.thread(agent, "t")
            await (await t.start("one")).result()
            after_one = await t.head()
            await (await t.start("two")).result()
            before = await t.head()
            assert before > after_one

            head = await t.rollback(after_one)
            # A marker is appended: the head only grows (no other actor's
            # memory of a head can match the thread after a rollback).
            assert head == before + 1 == await t.head()
            state = await t.state()
            assert said(state) == ["one", "re: one"]
            assert state.seq == after_one
            assert [r.seq for r in await t.history()] == list(range(1, after_one + 1))
            # The next run continues from where the rollback went back to.
            result = await (await t.start("three")).result()
            assert said(result) == ["one", "re: one", "three", "re: three"]
            # Rolling back to or past the head changes nothing.
            assert await t.rollback(10_000) == await t.head()


async def test_a_rollback_goes_back_to_any_point_the_thread_passed(
    make_checkpointer: Callable[..., Checkpointer],
) -> None:
    # Back to record 4 after a rollback to 2 took 3 and 4 back: the thread is
    # again what it was right after record 4, as state(upto_seq=4) shows it.
    async with make_checkpointer() as cp:
        agent = create_deep_agent(FunctionModel(echo), checkpointer=cp)
        async with open_runtime() as rt:
            t = rt.thread(agent, "t")
            await (await t.start("a")).result()
            two = await t.head()
            await (await t.start("b")).result()
            four = await t.head()
            at_four = said(await t.state(upto_seq=four))
            await t.rollback(two)
            assert said(await t.state()) == ["a", "re: a"]
            marker = await t.head()
            await t.update_state({"messages": [{"role": "user", "content": "c"}]})
            await t.rollback(four)
            assert said(await t.state()) == at_four == ["a", "re: a", "b", "re: b"]
            await t.rollback(marker)  # a marker's seq: the thread right after it
            assert said(await t.state()) == ["a", "re: a"]
            await t.rollback(0)
            assert said(await t.state()) == []
            assert await t.history() == []


async def test_an_actor_of_another_runtime_sees_a_rollback_as_news(
    make_checkpointer: Callable[..., Checkpointer],
) -> None:
    async with make_checkpointer() as cp:
        agent = create_deep_agent(FunctionModel(echo), checkpointer=cp)
        async with open_runtime() as keeper, open_runtime() as other:
            kept = keeper.thread(agent, "t")
            await (await kept.start("one")).result()
            first = await kept.head()
            await (await kept.start("two")).result()  # kept in this actor's memory
            await other.thread(agent, "t").rollback(first)
            result = await (await kept.start("three")).result()
            assert said(result) == ["one", "re: one", "three", "re: three"]


async def test_delete_in_turn_and_the_actor_forgets_what_it_kept(
    make_checkpointer: Callable[..., Checkpointer],
) -> None:
    async with make_checkpointer() as cp:
        agent = create_deep_agent(FunctionModel(echo), checkpointer=cp)
        async with open_runtime() as rt:
            t = rt.thread(agent, "t")
            await (await t.start("one")).result()
            await t.delete()
            assert await t.head() == 0
            assert await t.history() == []
            result = await (await t.start("again")).result()
            assert said(result) == ["again", "re: again"]


async def test_orders_of_one_thread_run_in_arrival_order(
    make_checkpointer: Callable[..., Checkpointer],
) -> None:
    gate, reached = anyio.Event(), anyio.Event()

    async def slow(request: ModelRequest) -> str:
        reached.set()
        await gate.wait()
        return echo(request)

    async with make_checkpointer() as cp:
        agent = create_deep_agent(FunctionModel(slow), checkpointer=cp)
        async with open_runtime() as rt:
            t = rt.thread(agent, "t")
            first = await t.start("one")
            await reached.wait()  # the run holds the thread, in its model call
            heads: list[int] = []
            async with anyio.create_task_group() as tg:

                async def head_then_delete() -> None:
                    heads.append(await t.head())  # queued behind the run
                    await t.delete()

                tg.start_soon(head_then_delete)
                await anyio.wait_all_tasks_blocked()  # it asked, and was not answered
                assert heads == []  # still waiting for its turn
                gate.set()
            assert said(await first.result()) == ["one", "re: one"]
            assert heads[0] > 0
            assert await t.head() == 0


async def test_undo_takes_back_the_runs_it_is_given(
    make_checkpointer: Callable[..., Checkpointer],
) -> None:
    hold, reached = anyio.Event(), anyio.Event()

    async def answer(request: ModelRequest) -> AssistantMessage | str:
        last = [m for m in request.messages if isinstance(m, UserMessage)][-1]
        if last.text == "slow" and len(request.messages) == 3:
            # Its second model call: the first step is saved (a run syncs its
            # records before it calls its model), and it is stuck here.
            reached.set()
            await hold.wait()
        if last.text == "slow" and len(request.messages) == 1:
            return AssistantMessage(tool_calls=[ToolCall(name="write_todos", args={"todos": []})])
        return echo(request)

    async with make_checkpointer() as cp:
        agent = create_deep_agent(FunctionModel(answer), checkpointer=cp)
        async with open_runtime() as rt:
            t = rt.thread(agent, "t")
            await (await t.start("keep")).result()
            kept = await t.head()
            doomed = await t.start("slow")
            await reached.wait()
            assert (await t.history())[-1].seq > kept
            assert doomed.head_before == kept
            doomed.cancel()
            await t.undo([doomed])
            with pytest.raises(RunCancelled):
                await doomed.result()
            assert said(await t.state()) == ["keep", "re: keep"]


async def test_update_state_through_the_facade(
    make_checkpointer: Callable[..., Checkpointer],
) -> None:
    async with make_checkpointer() as cp:
        agent = create_deep_agent(FunctionModel(echo), checkpointer=cp)
        await agent.ainvoke("one", thread_id="t")
        config = await agent.aupdate_state(
            {"configurable": {"thread_id": "t"}},
            {"messages": [{"role": "user", "content": "noted"}]},
        )
        assert config == {"configurable": {"thread_id": "t"}}
        assert said(await agent.aget_state("t")) == ["one", "re: one", "noted"]
        with pytest.raises(InputError, match="as_node"):
            await agent.aupdate_state("t", {}, as_node="model")
        with pytest.raises(InputError):
            await agent.aupdate_state("t", {"nonsense": 1})
        assert said(await agent.aget_state("t")) == ["one", "re: one", "noted"]


async def test_update_state_needs_somewhere_to_keep_it() -> None:
    agent = create_deep_agent(FunctionModel(echo))
    with pytest.raises(ConfigurationError, match="checkpointer"):
        await agent.aupdate_state("t", {"messages": [{"role": "user", "content": "x"}]})
    async with open_runtime() as rt:
        await rt.thread(agent, "t").ainvoke("one")
        await agent.aupdate_state("t", {"messages": [{"role": "user", "content": "x"}]}, runtime=rt)
        result = await rt.thread(agent, "t").ainvoke("two")
        assert said(result) == ["one", "re: one", "x", "two", "re: two"]


async def test_a_damaged_rollback_marker_is_named(
    make_checkpointer: Callable[..., Checkpointer],
) -> None:
    async with make_checkpointer() as cp:
        agent = create_deep_agent(FunctionModel(echo), checkpointer=cp)
        await agent.ainvoke("one", thread_id="t")
        head = (await agent.ahistory("t"))[-1].seq
        async with cp.lease("t"):
            bad = CheckpointWrite(path="main", step=0, kind="rollback", data={"to": head + 5})
            await cp.put("t", [bad])
        with pytest.raises(CheckpointCorrupt, match="rollback marker"):
            await agent.aget_state("t")


def test_nothing_outside_the_runtime_and_storage_touches_thread_records() -> None:
    """The road from a request to a checkpointer goes through the thread's handle.

    Outside ``actors/`` (the thread actor, its journal and handle) and
    ``persistence/`` (the checkpointers), no module calls a checkpointer's
    thread methods.
    """
    root = Path(deepactors.__file__).parent
    methods = {"put", "read", "threads", "delete_thread", "lease"}
    found = []
    for path in root.rglob("*.py"):
        if path.relative_to(root).parts[0] in ("actors", "persistence"):
            continue
        tree = ast.parse(path.read_text())
        # Names that hold a checkpointer: assigned from anything that names one.
        holders = {"checkpointer", "saver"}
        for node in ast.walk(tree):
            value = getattr(node, "value", None)
            if isinstance(node, ast.Assign | ast.AnnAssign) and value is not None:
                names = node.targets if isinstance(node, ast.Assign) else [node.target]
                if "checkpointer" in ast.unparse(value).lower():
                    holders.update(ast.unparse(t) for t in names)
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            name, target = node.func.attr, ast.unparse(node.func.value)
            if name in methods and (
                target in holders or any(h in target.lower() for h in ("checkpointer", "saver"))
            ):
                found.append(f"{path.relative_to(root)}:{node.lineno}: {target}.{name}()")
    assert not found, "\n".join(found)


async def test_a_thread_id_no_database_can_store_is_bad_input(
    make_checkpointer: Callable[..., Checkpointer],
) -> None:
    async with make_checkpointer() as cp:
        agent = create_deep_agent(FunctionModel(echo), checkpointer=cp)
        with pytest.raises(InputError, match="surrogate"):
            await agent.ainvoke("x", thread_id="\ud800")
        async with open_runtime() as rt:
            with pytest.raises(InputError, match="surrogate"):
                rt.thread(agent, "a\udfffb")
