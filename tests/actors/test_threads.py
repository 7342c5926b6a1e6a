"""Durable threads on a checkpointer: continuation, resume after a stop, human in the loop."""

from __future__ import annotations

import itertools
import time
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest

from deepactors import (
    AssistantMessage,
    Command,
    InputError,
    ToolCall,
    ToolMessage,
    ToolRuntime,
    create_deep_agent,
    events,
    open_runtime,
)
from deepactors.errors import ConfigurationError
from deepactors.interrupts import END_PENDING
from deepactors.models import FunctionModel, ModelRequest
from deepactors.persistence import MemoryCheckpointer, SqliteCheckpointer

pytestmark = pytest.mark.anyio


async def note(path: str, text: str, runtime: ToolRuntime) -> str:
    """Write a note file.

    Args:
        path: Where.
        text: What.
    """
    assert runtime.backend is not None
    await runtime.backend.write(path, text)
    return f"wrote {path}"


async def shout(text: str) -> str:
    """Shout.

    Args:
        text: What to shout.
    """
    return text.upper()


def fan_out(*briefs: str, kind: str = "w") -> AssistantMessage:
    return AssistantMessage(
        tool_calls=[
            ToolCall(name="task", args={"description": b, "subagent_type": kind}) for b in briefs
        ]
    )


def parent_model(first: AssistantMessage) -> FunctionModel:
    def answer(request: ModelRequest) -> AssistantMessage:
        if not any(isinstance(m, ToolMessage) for m in request.messages):
            return first
        return AssistantMessage(content="all done")

    return FunctionModel(answer)


async def test_a_thread_continues_from_its_checkpoint_in_a_new_actor() -> None:
    saver = MemoryCheckpointer()

    def answer(request: ModelRequest) -> str:
        return f"turn with {len(request.messages)} messages"

    agent = create_deep_agent(FunctionModel(answer), checkpointer=saver)
    await agent.ainvoke("hello", thread_id="t1")
    # ainvoke without a runtime starts a fresh actor: the state comes from the saver.
    second = await agent.ainvoke({"messages": "again", "files": {"/a.md": "x"}}, thread_id="t1")
    assert [m.text for m in second["messages"]] == [
        "hello",
        "turn with 1 messages",
        "again",
        "turn with 3 messages",
    ]
    other = await agent.ainvoke("fresh", thread_id="t2")
    assert len(other["messages"]) == 2
    third = await agent.ainvoke("and again", thread_id="t1")
    assert third["files"]["/a.md"].content == "x"
    assert len(third["messages"]) == 6


async def test_a_checkpointer_needs_a_thread_id() -> None:
    agent = create_deep_agent(FunctionModel(lambda r: "x"), checkpointer=MemoryCheckpointer())
    with pytest.raises(InputError, match="thread_id"):
        await agent.ainvoke("hi")


@pytest.mark.virtual_time
async def test_a_stopped_fan_out_resumes_without_redoing_finished_children() -> None:
    saver = MemoryCheckpointer()
    calls: Counter[str] = Counter()
    release = anyio.Event()

    async def child(request: ModelRequest) -> AssistantMessage:
        brief = request.messages[0].text
        calls[brief] += 1
        if not any(isinstance(m, ToolMessage) for m in request.messages):
            if brief.startswith("slow") and not release.is_set():
                await anyio.sleep_forever()  # until the run's deadline
            return AssistantMessage(
                tool_calls=[ToolCall(name="note", args={"path": f"/{brief}.md", "text": brief})]
            )
        return AssistantMessage(content=f"finished {brief}")

    briefs = [f"fast{i}" for i in range(5)] + [f"slow{i}" for i in range(5)]
    agent = create_deep_agent(
        parent_model(fan_out(*briefs)),
        subagents=[
            {
                "name": "w",
                "description": "w",
                "system_prompt": "w",
                "tools": [note],
                "model": FunctionModel(child),
            }
        ],
        checkpointer=saver,
    )
    # On virtual time the fast children finish before any time passes; the slow
    # ones sleep until released, so the deadline always stops the run.
    with pytest.raises(TimeoutError):
        await agent.ainvoke("go", thread_id="t", timeout=2.0)
    assert all(calls[f"fast{i}"] == 2 for i in range(5))
    release.set()
    result = await agent.ainvoke(None, thread_id="t")
    # Finished children were not run again; the stopped ones continued.
    assert all(calls[f"fast{i}"] == 2 for i in range(5))
    assert all(calls[f"slow{i}"] == 3 for i in range(5))
    assert sorted(result["files"]) == sorted(f"/{b}.md" for b in briefs)
    results = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert [m.text for m in results][:1] == [
        "finished fast0\n\nFiles changed by the subagent: /fast0.md."
    ]
    assert len(results) == 10
    assert result["messages"][-1].text == "all done"


def guarded(*, checkpointer: Any, script: list[AssistantMessage], **kwargs: Any) -> Any:
    answers = iter(script)
    return create_deep_agent(
        FunctionModel(lambda r: next(answers)),
        tools=[note, shout],
        checkpointer=checkpointer,
        **kwargs,
    )


TWO_CALLS = AssistantMessage(
    tool_calls=[
        ToolCall(id="c-note", name="note", args={"path": "/x.md", "text": "draft"}),
        ToolCall(id="c-shout", name="shout", args={"text": "hi"}),
    ]
)


@pytest.mark.parametrize(
    ("decision", "content", "status"),
    [
        ({"type": "approve"}, "draft", "success"),
        ({"type": "edit", "args": {"path": "/x.md", "text": "edited"}}, "edited", "success"),
        ({"type": "reject", "message": "not now"}, None, "error"),
    ],
)
async def test_interrupt_before_a_guarded_call_then_each_decision(
    decision: dict[str, Any], content: str | None, status: str
) -> None:
    saver = MemoryCheckpointer()
    agent = guarded(
        checkpointer=saver,
        script=[TWO_CALLS, AssistantMessage(content="finished")],
        interrupt_on={"note": True},
    )
    first = await agent.ainvoke("go", thread_id="h")
    (request,) = first["__interrupt__"]
    assert request["tool"] == "note"
    assert request["path"] == "main"
    assert request["args"] == {"path": "/x.md", "text": "draft"}
    # The unguarded call of the same turn ran; the guarded one did not.
    assert [m.text for m in first["messages"] if isinstance(m, ToolMessage)] == ["HI"]
    assert first["files"] == {}
    done = await agent.ainvoke(Command(resume=[decision]), thread_id="h")
    assert "__interrupt__" not in done
    note_result = next(
        m for m in done["messages"] if isinstance(m, ToolMessage) and m.name == "note"
    )
    assert note_result.status == status
    if content is None:
        assert "not now" in note_result.text
        assert done["files"] == {}
    else:
        assert done["files"]["/x.md"].content == content
    assert done["messages"][-1].text == "finished"
    if decision["type"] == "edit":
        ai = next(m for m in done["messages"] if isinstance(m, AssistantMessage) and m.tool_calls)
        assert ai.tool_calls[0].args["text"] == "edited"


async def test_ending_the_pending_work_answers_the_calls_without_a_model_call() -> None:
    # LangGraph's Command(goto=END): whatever the requests allow.
    agent = guarded(
        checkpointer=MemoryCheckpointer(),
        script=[TWO_CALLS, AssistantMessage(content="hi")],
        interrupt_on={"note": {"allowed_decisions": ["approve"]}},
    )
    first = await agent.ainvoke("go", thread_id="h")
    assert first["__interrupt__"]
    done = await agent.ainvoke(Command(resume=END_PENDING), thread_id="h")
    assert "__interrupt__" not in done
    ended = done["messages"][-1]
    assert isinstance(ended, ToolMessage)
    assert (ended.name, ended.status) == ("note", "error")
    assert ended.text == "Not run: the thread's pending work was ended (goto __end__)."
    assert done["files"] == {}
    state = await agent.aget_state("h")
    # Finished there, as a LangGraph thread whose run ended: nothing next.
    assert (state.next, state.tasks, state.interrupts) == ((), (), ())
    with pytest.raises(InputError, match="not waiting"):
        await agent.ainvoke(Command(resume=END_PENDING), thread_id="h")
    # Continuing it asks the model nothing; the next message runs as usual.
    again = await agent.ainvoke(None, thread_id="h")
    assert again["messages"] == done["messages"]
    assert (await agent.ainvoke("more", thread_id="h"))["messages"][-1].text == "hi"
    assert (await agent.aget_state("h")).next == ()


async def test_ending_a_subagents_pending_work_ends_its_parents_run_too() -> None:
    # The stop is in the subagent; the parent has no interrupt_on of its own.
    def parent(request: ModelRequest) -> AssistantMessage:
        if isinstance(request.messages[-1], ToolMessage):
            raise AssertionError("the parent's model was asked again after the end")
        return AssistantMessage(
            tool_calls=[ToolCall(name="task", args={"description": "go", "subagent_type": "w"})]
        )

    child_script = iter([TWO_CALLS])
    agent = create_deep_agent(
        FunctionModel(parent),
        tools=[note, shout],
        checkpointer=MemoryCheckpointer(),
        subagents=[
            {
                "name": "w",
                "description": "w",
                "system_prompt": "w",
                "model": FunctionModel(lambda r: next(child_script)),
                "interrupt_on": {"note": True},
            }
        ],
    )
    first = await agent.ainvoke("go", thread_id="s")
    assert first["__interrupt__"]
    done = await agent.ainvoke(Command(resume=END_PENDING), thread_id="s")
    assert "__interrupt__" not in done
    assert isinstance(done["messages"][-1], ToolMessage)
    assert done["files"] == {}
    assert (await agent.aget_state("s")).next == ()


async def test_allowed_decisions_are_enforced_and_counted() -> None:
    agent = guarded(
        checkpointer=MemoryCheckpointer(),
        script=[TWO_CALLS, AssistantMessage(content="finished")],
        interrupt_on={"note": {"allowed_decisions": ["approve", "reject"]}},
    )
    first = await agent.ainvoke("go", thread_id="h")
    assert first["__interrupt__"][0]["allowed_decisions"] == ["approve", "reject"]
    with pytest.raises(InputError, match="'edit' is not allowed"):
        await agent.ainvoke(Command(resume=[{"type": "edit", "args": {}}]), thread_id="h")
    with pytest.raises(InputError, match="1 request"):
        await agent.ainvoke(Command(resume=[{"type": "approve"}] * 2), thread_id="h")
    done = await agent.ainvoke(Command(resume={"c-note": {"type": "approve"}}), thread_id="h")
    assert done["files"]["/x.md"].content == "draft"
    with pytest.raises(InputError, match="not waiting"):
        await agent.ainvoke(Command(resume=[{"type": "approve"}]), thread_id="h")


async def test_interrupt_on_builds_without_a_checkpointer_and_refuses_to_run_without_one() -> None:
    calls: list[object] = []

    def model(request: object) -> str:
        calls.append(request)
        return "x"

    # Built (a server gives it its checkpointer); run without one, refused
    # before its first model call, naming the ways to give it one.
    agent = create_deep_agent(FunctionModel(model), tools=[note], interrupt_on={"note": True})
    with pytest.raises(ConfigurationError, match="interrupt_on") as refused:
        await agent.ainvoke({"messages": [{"role": "user", "content": "hi"}]})
    assert "checkpointer=MemoryCheckpointer()" in str(refused.value)
    assert "deepactors serve" in str(refused.value)
    assert calls == []

    # A subagent's own interrupt_on: refused when that subagent starts, and
    # the parent's model is told why.
    def delegate(request: ModelRequest) -> AssistantMessage:
        last = request.messages[-1]
        if isinstance(last, ToolMessage):
            return AssistantMessage(content=last.text)
        return AssistantMessage(
            tool_calls=[ToolCall(name="task", args={"description": "go", "subagent_type": "r"})]
        )

    sub = {"name": "r", "description": "d", "system_prompt": "s", "interrupt_on": {"note": True}}
    helper = create_deep_agent(FunctionModel(delegate), tools=[note], subagents=[sub])
    told = await helper.ainvoke({"messages": [{"role": "user", "content": "hi"}]})
    assert "checkpointer=MemoryCheckpointer()" in told["messages"][-1].text
    # With one, the same agent runs.
    saved = create_deep_agent(
        FunctionModel(model),
        tools=[note],
        interrupt_on={"note": True},
        checkpointer=MemoryCheckpointer(),
    )
    done = await saved.ainvoke({"messages": [{"role": "user", "content": "hi"}]}, thread_id="t")
    assert done["messages"][-1].text == "x"


@pytest.mark.parametrize(
    ("decision", "expected"),
    [
        ({"type": "approve"}, "g"),
        ({"type": "edit", "args": {"path": "/g.md", "text": "edited"}}, "edited"),
        ({"type": "reject", "message": "no"}, None),
    ],
)
async def test_an_interrupt_inside_a_subagent_resumes_that_subagent_alone(
    decision: dict[str, Any], expected: str | None
) -> None:
    saver = MemoryCheckpointer()
    calls: Counter[str] = Counter()

    def child(request: ModelRequest) -> AssistantMessage:
        brief = request.messages[0].text
        calls[brief] += 1
        if not any(isinstance(m, ToolMessage) for m in request.messages):
            tool = "note" if brief == "guarded" else "shout"
            args = {"path": "/g.md", "text": "g"} if tool == "note" else {"text": brief}
            return AssistantMessage(tool_calls=[ToolCall(name=tool, args=args)])
        return AssistantMessage(content=f"finished {brief}")

    agent = create_deep_agent(
        parent_model(fan_out("free1", "guarded", "free2")),
        subagents=[
            {
                "name": "w",
                "description": "w",
                "system_prompt": "w",
                "tools": [note, shout],
                "model": FunctionModel(child),
            }
        ],
        checkpointer=saver,
        interrupt_on={"note": True},
    )
    seen: list[Any] = []
    async with open_runtime() as rt:
        handle = await rt.thread(agent, "s").start("go", stream=True)
        assert handle.events is not None
        async with handle.events:
            async for event in handle.events:
                seen.append(event)
        first = await handle.result()
    (request,) = first["__interrupt__"]
    assert request["path"] == "main/task-2:w"
    assert any(isinstance(e, events.Interrupted) for e in seen)
    assert calls == {"free1": 2, "guarded": 1, "free2": 2}
    done = await agent.ainvoke(Command(resume=[decision]), thread_id="s")
    assert calls == {"free1": 2, "guarded": 2, "free2": 2}  # siblings untouched
    if expected is None:
        assert "/g.md" not in done["files"]
    else:
        assert done["files"]["/g.md"].content == expected
    assert done["messages"][-1].text == "all done"
    finished = [m.text for m in done["messages"] if isinstance(m, ToolMessage)]
    # The siblings' results were kept at the interrupt; the resumed one joins them.
    assert [t.split("\n")[0] for t in finished] == [
        "finished free1",
        "finished free2",
        "finished guarded",
    ]


async def test_history_lists_checkpoints_and_state_can_be_read_at_any_step() -> None:
    saver = MemoryCheckpointer()
    agent = create_deep_agent(
        FunctionModel(lambda r: f"answer {len(r.messages)}"), checkpointer=saver
    )
    await agent.ainvoke("one", thread_id="h")
    await agent.ainvoke("two", thread_id="h")
    history = await agent.ahistory("h")
    assert [r.kind for r in history] == ["update"] * 4
    assert {r.path for r in history} == {"main"}
    now = await agent.aget_state("h")
    assert [m.text for m in now["messages"]] == ["one", "answer 1", "two", "answer 3"]
    then = await agent.aget_state("h", upto_seq=history[1].seq)
    assert [m.text for m in then["messages"]] == ["one", "answer 1"]
    with pytest.raises(ConfigurationError, match="no checkpointer"):
        await create_deep_agent(FunctionModel(lambda r: "x")).ahistory("h")


async def test_a_thread_round_trips_through_a_sqlite_file(tmp_path: Any) -> None:
    from deepactors.persistence import SqliteCheckpointer

    db = tmp_path / "threads.db"
    model = FunctionModel(lambda r: f"answer {len(r.messages)}")
    async with SqliteCheckpointer(db) as saver:
        agent = create_deep_agent(model, checkpointer=saver)
        await agent.ainvoke({"messages": "one", "files": {"/n.md": "x\r\ny"}}, thread_id="s")
    async with SqliteCheckpointer(db) as reopened:
        again = create_deep_agent(model, checkpointer=reopened)
        result = await again.ainvoke("two", thread_id="s")
    assert [m.text for m in result["messages"]] == ["one", "answer 1", "two", "answer 3"]
    assert result["files"]["/n.md"].content == "x\r\ny"


async def test_an_unreadable_checkpoint_names_the_thread() -> None:
    from deepactors.errors import CheckpointCorrupt
    from deepactors.persistence import CheckpointWrite

    saver = MemoryCheckpointer()
    await saver.put(
        "bad",
        [
            CheckpointWrite(
                path="main", step=0, kind="update", data={"messages": [{"role": "robot"}]}
            )
        ],
    )
    agent = create_deep_agent(FunctionModel(lambda r: "x"), checkpointer=saver)
    with pytest.raises(CheckpointCorrupt, match="thread 'bad'"):
        await agent.ainvoke("hi", thread_id="bad")


class FlakySaver(MemoryCheckpointer):
    """Stores until told to fail; then every put fails."""

    def __init__(self) -> None:
        super().__init__()
        self.broken = False

    async def put(self, thread_id: str, records: Any) -> None:
        if self.broken:
            raise OSError("disk full")
        await super().put(thread_id, records)


async def test_a_failed_save_fails_the_run_and_leaves_a_clean_prefix() -> None:
    from deepactors.errors import CheckpointError

    saver = FlakySaver()

    def answer(request: ModelRequest) -> AssistantMessage:
        if not any(isinstance(m, ToolMessage) for m in request.messages):
            return AssistantMessage(tool_calls=[ToolCall(name="shout", args={"text": "a"})])
        saver.broken = True  # the disk fills up while the model answers
        return AssistantMessage(content="done")

    agent = create_deep_agent(FunctionModel(answer), tools=[shout], checkpointer=saver)
    with pytest.raises(CheckpointError, match="disk full"):
        await agent.ainvoke("go", thread_id="f")
    saver.broken = False
    kinds = [r.kind for r in await saver.read("f")]
    # Everything up to the failure, nothing after it: no final answer pretends to be saved.
    state = await agent.aget_state("f")
    assert [m.role for m in state["messages"]] == ["user", "assistant", "tool"]
    assert kinds.count("update") == 3


@pytest.mark.parametrize(
    ("decision", "text"),
    [
        ({"type": "reject", "message": "not now"}, "A human rejected this call (not now)."),
        ({"type": "respond", "message": "done by hand"}, "done by hand"),
        (END_PENDING, "Not run: the thread's pending work was ended"),
    ],
)
async def test_a_refused_call_never_runs_when_another_agent_resumes_the_thread(
    decision: dict[str, Any], text: str
) -> None:
    # Faults III, item 0: the agent that continues the thread asks about no tool.
    saver = MemoryCheckpointer()
    asking = guarded(checkpointer=saver, script=[TWO_CALLS], interrupt_on={"note": True})
    other = guarded(checkpointer=saver, script=[AssistantMessage(content="carried on")])
    assert (await asking.ainvoke("go", thread_id="h"))["__interrupt__"]
    resume = decision if decision is END_PENDING else [decision]
    done = await other.ainvoke(Command(resume=resume), thread_id="h")
    assert "__interrupt__" not in done
    assert done["files"] == {}
    result = next(m for m in done["messages"] if isinstance(m, ToolMessage) and m.name == "note")
    assert result.text.startswith(text)


async def test_an_edit_runs_with_the_humans_arguments_whichever_agent_resumes() -> None:
    saver = MemoryCheckpointer()
    asking = guarded(checkpointer=saver, script=[TWO_CALLS], interrupt_on={"note": True})
    other = guarded(checkpointer=saver, script=[AssistantMessage(content="carried on")])
    assert (await asking.ainvoke("go", thread_id="h"))["__interrupt__"]
    edit = {"type": "edit", "args": {"path": "/x.md", "text": "edited"}}
    done = await other.ainvoke(Command(resume=[edit]), thread_id="h")
    assert done["files"]["/x.md"].content == "edited"


async def test_a_call_waiting_for_a_human_stops_again_when_continued_without_a_decision() -> None:
    saver = MemoryCheckpointer()
    asking = guarded(checkpointer=saver, script=[TWO_CALLS], interrupt_on={"note": True})
    other = guarded(checkpointer=saver, script=[AssistantMessage(content="carried on")])
    first = await asking.ainvoke("go", thread_id="h")
    again = await other.ainvoke(None, thread_id="h")
    assert again["__interrupt__"] == first["__interrupt__"]
    assert again["files"] == {}
    # Still waiting: the decision, given later, is the one that counts.
    done = await other.ainvoke(Command(resume=[{"type": "reject"}]), thread_id="h")
    assert done["files"] == {}
    assert done["messages"][-1].text == "carried on"


async def waits(text: str) -> str:
    """A tool that waits until every other task waits too.

    Args:
        text: Echoed.
    """
    # Every task ready meanwhile runs first: a writer woken by what the turn has
    # queued so far would take it and store it on its own.
    await anyio.wait_all_tasks_blocked()
    return text


async def test_a_turn_is_one_commit_even_when_its_tool_waits(tmp_path: Path) -> None:
    # Each put stamps its records with one clock reading; this clock never
    # repeats one, so records that share a time were stored together.
    ticks = itertools.count()
    saver = SqliteCheckpointer(tmp_path / "t.db", clock=lambda: time.time() + next(ticks) * 1e-3)
    turns = 3

    def answer(request: ModelRequest) -> AssistantMessage:
        done = sum(isinstance(m, ToolMessage) for m in request.messages)
        if done == turns:
            return AssistantMessage(content="done")
        return AssistantMessage(tool_calls=[ToolCall(name="waits", args={"text": str(done)})])

    agent = create_deep_agent(FunctionModel(answer), tools=[waits], checkpointer=saver)
    await agent.ainvoke("go", thread_id="t")
    stored_at: dict[str, float] = {}
    for record in await saver.read("t"):
        for message in record.data.get("messages", ()):
            for call in message.get("tool_calls") or ():
                stored_at[f"call {call['id']}"] = record.created_at
            if message.get("role") == "tool":
                stored_at[f"result {message['tool_call_id']}"] = record.created_at
    calls = [key.split()[1] for key in stored_at if key.startswith("call ")]
    assert len(calls) == turns
    # A turn's answer and its tool's result: one commit, not one each.
    for call in calls:
        assert stored_at[f"call {call}"] == stored_at[f"result {call}"]
