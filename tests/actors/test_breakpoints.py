"""Breakpoints: interrupt_before / interrupt_after on a deep agent's nodes (model, tools)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from deepactors import (
    AssistantMessage,
    Command,
    InputError,
    ToolCall,
    ToolMessage,
    create_deep_agent,
    events,
)
from deepactors.models import FunctionModel, ModelRequest
from deepactors.persistence import CheckpointWrite, MemoryCheckpointer, SqliteCheckpointer

pytestmark = pytest.mark.anyio


async def shout(text: str) -> str:
    """Shout.

    Args:
        text: What to shout.
    """
    return text.upper()


def call(i: int) -> AssistantMessage:
    return AssistantMessage(tool_calls=[ToolCall(id=f"c{i}", name="shout", args={"text": f"t{i}"})])


def two_tool_steps(request: ModelRequest) -> AssistantMessage:
    """Two turns with a tool call each, then an answer."""
    done = sum(isinstance(m, ToolMessage) for m in request.messages)
    return call(done + 1) if done < 2 else AssistantMessage(content="finished")


def agent(checkpointer: Any = None, **kwargs: Any) -> Any:
    return create_deep_agent(
        FunctionModel(two_tool_steps),
        tools=[shout],
        checkpointer=checkpointer if checkpointer is not None else MemoryCheckpointer(),
        **kwargs,
    )


def results(result: Any) -> list[str]:
    return [m.text for m in result["messages"] if isinstance(m, ToolMessage)]


async def test_interrupt_before_tools_stops_before_each_tool_step_and_resumes() -> None:
    a = agent()
    first = await a.ainvoke("go", thread_id="t", interrupt_before=["tools"])
    # Stopped after the model asked for a tool, before it ran.
    assert results(first) == []
    assert first["messages"][-1].tool_calls[0].id == "c1"
    assert "__interrupt__" not in first  # as LangGraph's invoke at a static breakpoint
    state = await a.aget_state("t")
    assert state.next == ("tools",)
    assert [(t.name, t.interrupts) for t in state.tasks] == [("tools", ())]
    assert state.stopped
    second = await a.ainvoke(None, thread_id="t", interrupt_before=["tools"])
    assert results(second) == ["T1"]
    assert second["messages"][-1].tool_calls[0].id == "c2"
    assert (await a.aget_state("t")).next == ("tools",)
    # Command(resume=...) goes past it too; without breakpoints, to the end.
    done = await a.ainvoke(Command(resume="go on"), thread_id="t")
    assert results(done) == ["T1", "T2"]
    assert done["messages"][-1].text == "finished"
    state = await a.aget_state("t")
    assert (state.next, state.tasks, state.stopped) == ((), (), False)


async def test_interrupt_after_model_stops_after_each_model_call() -> None:
    a = agent()
    seen: list[str] = []
    step = await a.ainvoke("go", thread_id="t", interrupt_after="model")
    while (await a.aget_state("t")).stopped:
        last = step["messages"][-1]
        seen.append(last.text or last.tool_calls[0].id)
        step = await a.ainvoke(None, thread_id="t", interrupt_after="model")
    assert seen == ["c1", "c2", "finished"]
    assert step["messages"][-1].text == "finished"
    assert results(step) == ["T1", "T2"]


async def test_interrupt_before_model_stops_before_the_first_call_and_star_means_all() -> None:
    a = agent()
    first = await a.ainvoke("go", thread_id="t", interrupt_before="*")
    assert [type(m).__name__ for m in first["messages"]] == ["UserMessage"]
    state = await a.aget_state("t")
    assert (state.next, [t.name for t in state.tasks]) == (("model",), ["model"])
    stops = 1
    while (await a.aget_state("t")).stopped:
        await a.ainvoke(None, thread_id="t", interrupt_before="*")
        stops += 1
    # before model, tools, model, tools, model: five stops, then the end.
    assert stops == 6
    assert (await a.aget_state("t"))["messages"][-1].text == "finished"


async def test_the_agents_breakpoints_hold_unless_a_run_gives_its_own() -> None:
    a = agent(interrupt_before=["tools"])
    first = await a.ainvoke("go", thread_id="t")
    assert results(first) == []
    assert (await a.aget_state("t")).next == ("tools",)
    done = await a.ainvoke(None, thread_id="t", interrupt_before=[])
    assert done["messages"][-1].text == "finished"


async def test_the_stream_says_the_run_stopped_at_a_breakpoint() -> None:
    a = agent()
    parts = [
        p
        async for p in a.astream(
            "go", thread_id="t", interrupt_before=["tools"], stream_mode="updates"
        )
    ]
    assert parts[-1] == {"__interrupt__": ()} or parts[-1] == {"__interrupt__": []}
    typed = [e async for e in a.astream(None, thread_id="t", interrupt_before=["tools"])]
    stops = [e for e in typed if isinstance(e, events.Interrupted)]
    assert [list(e.requests) for e in stops] == [[]]


async def test_a_stop_survives_the_process_on_sqlite(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    async with SqliteCheckpointer(db) as saver:
        await agent(saver).ainvoke("go", thread_id="t", interrupt_before=["tools"])
    # Another agent object on the same file: the stop is in the records.
    async with SqliteCheckpointer(db) as saver:
        again = agent(saver)
        assert (await again.aget_state("t")).next == ("tools",)
        done = await again.ainvoke(None, thread_id="t")
        assert results(done) == ["T1", "T2"]


async def test_a_hitl_stop_and_a_breakpoint_at_one_tool_step_compose() -> None:
    a = agent(interrupt_on={"shout": True})
    first = await a.ainvoke("go", thread_id="t", interrupt_before=["tools"])
    # The approval comes first (as LangGraph's, after the model and before the
    # tools node), and nothing of the step ran.
    (request,) = first["__interrupt__"]
    assert request["id"] == "c1"
    assert results(first) == []
    state = await a.aget_state("t")
    assert (state.next, state.stopped, len(state.interrupts)) == (("tools",), False, 1)
    # The decision answers it and the step runs; at the next tool step, again
    # the approval first.
    second = await a.ainvoke(
        Command(resume=[{"type": "approve"}]), thread_id="t", interrupt_before=["tools"]
    )
    assert results(second) == ["T1"]
    assert [r["id"] for r in second["__interrupt__"]] == ["c2"]
    done = await a.ainvoke(Command(resume=[{"type": "approve"}]), thread_id="t")
    assert done["messages"][-1].text == "finished"


async def test_a_breakpoint_with_nothing_to_approve_stops_for_itself() -> None:
    # interrupt_on guards a tool this step does not call: the breakpoint stops.
    a = agent(interrupt_on={"write_file": True})
    first = await a.ainvoke("go", thread_id="t", interrupt_before=["tools"])
    assert "__interrupt__" not in first
    assert (await a.aget_state("t")).stopped


async def test_unknown_nodes_and_no_checkpointer_are_refused_before_anything_runs() -> None:
    with pytest.raises(InputError, match=r"unknown node\(s\) 'agent'.*'model', 'tools'"):
        agent(interrupt_before=["agent"])
    a = agent()
    with pytest.raises(InputError, match="interrupt_after: unknown"):
        await a.ainvoke("go", thread_id="t", interrupt_after=["tool"])
    with pytest.raises(InputError, match="interrupt_before must be"):
        await a.ainvoke("go", thread_id="t", interrupt_before=3)
    plain = create_deep_agent(FunctionModel(two_tool_steps), tools=[shout])
    with pytest.raises(InputError, match="checkpointer"):
        await plain.ainvoke("go", interrupt_before=["tools"])
    assert (await a.aget_state("t")).values.get("messages", []) == []


async def test_command_update_with_resume_applies_the_update_then_resumes() -> None:
    a = agent(interrupt_on={"shout": True})
    first = await a.ainvoke("go", thread_id="t")
    assert first["__interrupt__"]
    done = await a.ainvoke(
        Command(
            update={"todos": [{"content": "check", "status": "pending"}]},
            resume=[{"type": "approve"}],
        ),
        thread_id="t",
    )
    assert done["todos"][0].content == "check"
    assert results(done)[0] == "T1"


async def test_command_goto_continues_the_thread_at_that_node() -> None:
    a = agent()
    await a.ainvoke("go", thread_id="t", interrupt_before=["tools"])
    # goto 'model' while a call waits for its result: refused, saying why.
    with pytest.raises(InputError, match=r"goto 'model'.*shout"):
        await a.ainvoke(Command(goto="model"), thread_id="t")
    step = await a.ainvoke(Command(goto="tools"), thread_id="t", interrupt_after=["tools"])
    assert results(step) == ["T1"]
    assert (await a.aget_state("t")).next == ("model",)
    done = await a.ainvoke(Command(goto="model"), thread_id="t")
    assert done["messages"][-1].text == "finished"
    with pytest.raises(InputError, match=r"goto 'tools'.*no tool call waiting"):
        await a.ainvoke(Command(goto="tools"), thread_id="t")
    with pytest.raises(InputError, match="goto must be one of"):
        await a.ainvoke(Command(goto="agent"), thread_id="t")
    # Asked again from the end, the model answers once more.
    again = await a.ainvoke(
        Command(goto="model", update={"messages": [{"role": "user", "content": "more"}]}),
        thread_id="t",
    )
    assert again["messages"][-2].text == "more"


async def test_command_goto_is_judged_after_its_update() -> None:
    # LangGraph applies a Command's update, then goes to the node: a tool call the
    # update adds is one goto 'tools' runs.
    a = agent()
    done = await a.ainvoke("go", thread_id="t")
    assert done["messages"][-1].text == "finished"
    before = len(done["messages"])
    call_it = {"messages": [call(9).model_dump()]}
    ran = await a.ainvoke(
        Command(goto="tools", update=call_it), thread_id="t", interrupt_after=["tools"]
    )
    assert results(ran)[-1] == "T9"
    assert len(ran["messages"]) == before + 2
    # And one the update answers leaves nothing for 'tools': refused, nothing applied.
    answer = {"messages": [{"role": "tool", "tool_call_id": "c9", "content": "x"}]}
    state = await a.aget_state("t")
    with pytest.raises(InputError, match=r"goto 'tools'.*no tool call waiting"):
        await a.ainvoke(Command(goto="tools", update=answer), thread_id="t")
    assert (await a.aget_state("t")).values == state.values


async def test_a_run_continued_after_a_crash_stops_at_the_breakpoint_it_had_not_reached() -> None:
    saver = MemoryCheckpointer()
    a = agent(saver)
    await a.ainvoke("go", thread_id="t", interrupt_before=["tools"])
    records = await saver.read("t")
    assert records[-1].kind == "breakpoint"
    # As if the process died after the model's answer was stored, before the stop was.
    await saver.replace(
        "t",
        [CheckpointWrite(path=r.path, step=r.step, kind=r.kind, data=r.data) for r in records[:-1]],
    )
    assert not (await a.aget_state("t")).stopped
    again = await a.ainvoke(None, thread_id="t", interrupt_before=["tools"])
    assert results(again) == []  # stopped before the tools, as the first run would have
    assert (await a.aget_state("t")).stopped
    on = await a.ainvoke(None, thread_id="t", interrupt_before=["tools"])
    assert results(on) == ["T1"]
