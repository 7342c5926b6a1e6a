"""Background subagents: start, check, steer, cancel and collect while the parent works.

The children's models wait on gates the test opens, so "while they run" is a
fact of the test, not a matter of timing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from deepactors import (
    AssistantMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
    create_deep_agent,
    events,
)
from deepactors.actors import open_runtime
from deepactors.errors import ConfigurationError
from deepactors.models import FunctionModel, ModelRequest
from deepactors.persistence import SqliteCheckpointer
from tests.waiting import wait_until

pytestmark = pytest.mark.anyio

TOPICS = ["alpha", "beta", "gamma", "delta", "epsilon"]
LAUNCHED = re.compile(r"task_id: (\S+)")


class Gates:
    """One gate per topic: a child's final answer waits for its gate."""

    def __init__(self) -> None:
        self.events = {t: anyio.Event() for t in TOPICS}
        self.briefs: list[str] = []
        self.passed: list[str] = []  # children whose gate let them answer

    def open(self, *topics: str) -> None:
        for t in topics:
            self.events[t].set()


def researcher(gates: Gates) -> FunctionModel:
    async def answer(request: ModelRequest) -> AssistantMessage:
        brief = request.messages[0].text
        if not any(isinstance(m, ToolMessage) for m in request.messages):
            gates.briefs.append(brief)
            return AssistantMessage(
                tool_calls=[
                    ToolCall(
                        name="write_file",
                        args={"file_path": f"/notes/{brief}.md", "content": f"on {brief}\n"},
                    )
                ]
            )
        await gates.events[brief].wait()
        gates.passed.append(brief)
        extra = [m.text for m in request.messages[1:] if isinstance(m, UserMessage)]
        return AssistantMessage(content=f"report on {brief}" + "".join(f" +{x}" for x in extra))

    return FunctionModel(answer, name="researcher")


def ids_in(messages: list[Any]) -> dict[str, str]:
    """Topic -> task id, from the start_async_task calls and their results."""
    calls = {
        c.id: c.args["description"]
        for m in messages
        if isinstance(m, AssistantMessage)
        for c in m.tool_calls
        if c.name == "start_async_task"
    }
    out = {}
    for m in messages:
        if isinstance(m, ToolMessage) and m.tool_call_id in calls:
            found = LAUNCHED.search(m.text)
            if found:
                out[calls[m.tool_call_id]] = found.group(1)
    return out


def since_last_user(messages: list[Any]) -> list[Any]:
    for i in range(len(messages) - 1, -1, -1):
        if isinstance(messages[i], UserMessage) and not messages[i].text.startswith("["):
            return list(messages[i:])
    return list(messages)


def main_model(script: dict[str, Callable[[list[Any], dict[str, str]], Any]]) -> FunctionModel:
    """The parent: what it does depends on the user's latest message."""

    def answer(request: ModelRequest) -> AssistantMessage | str:
        messages = list(request.messages)
        turn = since_last_user(messages)
        user = turn[0].text
        return script[user](turn, ids_in(messages))  # type: ignore[no-any-return]

    return FunctionModel(answer, name="main")


def calls(*pairs: tuple[str, dict[str, Any]]) -> AssistantMessage:
    return AssistantMessage(tool_calls=[ToolCall(name=n, args=a) for n, a in pairs])


def once(first: Callable[[dict[str, str]], AssistantMessage], then: str) -> Any:
    """A turn that makes its tool calls, then answers ``then`` after their results."""

    def step(turn: list[Any], ids: dict[str, str]) -> AssistantMessage | str:
        if not any(isinstance(m, ToolMessage) for m in turn):
            return first(ids)
        results = [m.text for m in turn if isinstance(m, ToolMessage)]
        return then + " | " + " | ".join(results)

    return step


def build(gates: Gates, tmp_path: Path, **kwargs: Any) -> Any:
    script = {
        "research": once(
            lambda ids: calls(
                *[
                    ("start_async_task", {"description": t, "subagent_type": "researcher"})
                    for t in TOPICS
                ]
            ),
            "started",
        ),
        "how is it going?": once(lambda ids: calls(("list_async_tasks", {})), "still working"),
        "steer": once(
            lambda ids: calls(
                ("update_async_task", {"task_id": ids["beta"], "message": "focus on cost"}),
                ("cancel_async_task", {"task_id": ids["gamma"]}),
            ),
            "steered",
        ),
        "collect": once(
            lambda ids: calls(
                *[("check_async_task", {"task_id": ids[t]}) for t in TOPICS if t != "gamma"]
            ),
            "collected",
        ),
    }
    return create_deep_agent(
        main_model(script),
        subagents=[
            {
                "name": "researcher",
                "description": "researches one topic",
                "system_prompt": "research",
                "model": researcher(gates),
                "background": True,
            }
        ],
        checkpointer=SqliteCheckpointer(tmp_path / "threads.db"),
        **kwargs,
    )


async def test_five_tasks_run_while_the_parent_answers_is_steered_cancelled_and_collected(
    tmp_path: Path,
) -> None:
    gates = Gates()
    agent = build(gates, tmp_path)
    async with open_runtime() as rt:
        thread = rt.thread(agent, "t")
        first = await (await thread.start({"messages": "research"})).result()
        tasks = first["async_tasks"]
        assert sorted(e["description"] for e in tasks.values()) == sorted(TOPICS)
        assert {e["status"] for e in tasks.values()} == {"running"}
        assert first["messages"][-1].text.startswith("started")
        ids = ids_in(first["messages"])

        # The parent answers twice while every task still runs.
        second = await (await thread.start({"messages": "how is it going?"})).result()
        listing = second["messages"][-1].text
        assert listing.startswith("still working")
        assert listing.count("status: running") == 5
        third = await (await thread.start({"messages": "steer"})).result()
        reply = third["messages"][-1].text
        assert f"Updated async subagent. task_id: {ids['beta']}" in reply
        assert f"Cancelled async subagent task: {ids['gamma']}" in reply
        assert third["async_tasks"][ids["gamma"]]["status"] == "cancelled"

        # The rest finish while the thread is idle: its actor folds them in.
        gates.open("alpha", "beta", "delta", "epsilon")

        async def all_ended() -> bool:
            values = (await thread.state()).values
            return all(e["status"] != "running" for e in values["async_tasks"].values())

        await wait_until(all_ended)
        state = (await thread.state()).values
        assert sorted(state["files"]) == sorted(f"/notes/{t}.md" for t in TOPICS if t != "gamma")
        notices = [m.text for m in state["messages"] if m.text.startswith("[Background task")]
        assert len(notices) == 4

        last = await (await thread.start({"messages": "collect"})).result()
    reports = [
        json.loads(m.text)
        for m in last["messages"]
        if isinstance(m, ToolMessage) and m.name == "check_async_task"
    ]
    results = sorted(r["result"] for r in reports)
    assert results == sorted(
        ["report on alpha", "report on beta +focus on cost", "report on delta", "report on epsilon"]
    )
    assert {r["status"] for r in reports} == {"success"}
    assert sorted(gates.briefs) == sorted(TOPICS)  # each started once


async def test_a_one_call_invoke_waits_for_its_tasks_and_hears_of_each(tmp_path: Path) -> None:
    # No runtime held: the run cannot leave tasks behind, so it waits for them.
    gates = Gates()
    gates.open(*TOPICS)
    agent = build(gates, tmp_path)
    result = await agent.ainvoke({"messages": "research"}, thread_id="t")
    statuses = {e["status"] for e in result["async_tasks"].values()}
    assert statuses == {"success"}
    assert sorted(result["files"]) == sorted(f"/notes/{t}.md" for t in TOPICS)
    notices = [m for m in result["messages"] if m.text.startswith("[Background task")]
    assert len(notices) == 5
    assert isinstance(result["messages"][-1], AssistantMessage)


async def test_cancelling_the_run_cancels_its_tasks(tmp_path: Path) -> None:
    gates = Gates()
    agent = build(gates, tmp_path)
    async with open_runtime() as rt:
        thread = rt.thread(agent, "t")
        handle = await thread.start({"messages": "research"})
        await handle.result()
        handle.cancel()  # after the run ended: what it started still stops

        async def cancelled() -> bool:
            values = (await thread.state()).values
            return {e["status"] for e in values["async_tasks"].values()} == {"cancelled"}

        await wait_until(cancelled)
        state = (await thread.state()).values
    assert "files" not in state or not state["files"]


async def test_a_run_deadline_reaches_its_tasks(tmp_path: Path) -> None:
    gates = Gates()
    agent = build(gates, tmp_path)
    async with open_runtime() as rt:
        thread = rt.thread(agent, "t")
        await (await thread.start({"messages": "research"}, timeout=0.5)).result()

        async def timed_out() -> bool:
            values = (await thread.state()).values
            return {e["status"] for e in values["async_tasks"].values()} == {"timeout"}

        await wait_until(timed_out)


async def test_events_of_background_children_reach_the_run_in_progress(tmp_path: Path) -> None:
    gates = Gates()
    gates.open(*TOPICS)
    agent = build(gates, tmp_path, name="main")
    seen: list[events.Event] = []
    async with agent.astream({"messages": "research"}, thread_id="t") as stream:
        seen = [e async for e in stream]
    spawned = [e for e in seen if isinstance(e, events.SubagentSpawned)]
    finished = [e for e in seen if isinstance(e, events.SubagentFinished)]
    assert len(spawned) == 5
    assert len(finished) == 5
    assert {e.child for e in spawned} == {e.child for e in finished}
    child_calls = [
        e for e in seen if isinstance(e, events.ModelCallStarted) and "/async-" in e.path
    ]
    assert len(child_calls) == 10


async def test_unknown_ids_and_types_get_answers_the_model_can_act_on(tmp_path: Path) -> None:
    gates = Gates()
    script = {
        "bad": once(
            lambda ids: calls(
                ("start_async_task", {"description": "x", "subagent_type": "nope"}),
                ("check_async_task", {"task_id": "missing"}),
                ("update_async_task", {"task_id": "missing", "message": "m"}),
                ("cancel_async_task", {"task_id": "missing"}),
                ("list_async_tasks", {}),
            ),
            "done",
        )
    }
    agent = create_deep_agent(
        main_model(script),
        subagents=[
            {
                "name": "researcher",
                "description": "r",
                "system_prompt": "r",
                "model": researcher(gates),
            }
        ],
        async_tasks=True,
    )
    result = await agent.ainvoke({"messages": "bad"})
    text = result["messages"][-1].text
    types = "Available types: `general-purpose`, `researcher`"
    assert f"Unknown async subagent type `nope`. {types}" in text
    assert text.count("No tracked task found for task_id: 'missing'") == 3
    assert "No async subagent tasks tracked." in text


def test_background_marks_need_the_tools() -> None:
    with pytest.raises(ConfigurationError, match="marked background but async_tasks=False"):
        create_deep_agent(
            FunctionModel(lambda r: "x"),
            subagents=[{"name": "r", "description": "r", "system_prompt": "r", "background": True}],
            async_tasks=False,
        )


def test_background_subagents_are_not_offered_to_task() -> None:
    agent = create_deep_agent(
        FunctionModel(lambda r: "x"),
        subagents=[{"name": "r", "description": "r", "system_prompt": "r", "background": True}],
    )
    tools = {t.name: t for t in agent.spec.tool_list}
    assert "start_async_task" in tools
    assert "- r:" not in tools["task"].description
    assert "- r:" in tools["start_async_task"].description


async def test_deleting_the_thread_stops_its_tasks_and_nothing_comes_back(
    tmp_path: Path,
) -> None:
    gates = Gates()
    agent = build(gates, tmp_path)
    async with open_runtime() as rt:
        thread = rt.thread(agent, "t")
        await (await thread.start({"messages": "research"})).result()
        await thread.delete()
        gates.open(*TOPICS)  # too late: they were cancelled
        await anyio.wait_all_tasks_blocked()  # a task that went on would pass its gate now
        assert gates.passed == []
        assert await rt.saved_threads(agent) == []


class BrokenRunner:
    """A ChildRunner with a bug: it raises instead of replying."""

    @property
    def name(self) -> str:
        return "broken"

    async def run_child(self, **kwargs: Any) -> Any:
        raise RuntimeError("a bug in the runner")


async def test_a_runner_that_raises_fails_its_task_not_the_runtime() -> None:
    from deepactors.middleware import AsyncSubAgentMiddleware, SubAgentSpec

    script = {
        "go": once(
            lambda ids: calls(("start_async_task", {"description": "x", "subagent_type": "b"})),
            "started",
        )
    }
    spec = SubAgentSpec(name="b", description="broken", agent=BrokenRunner())
    agent = create_deep_agent(
        main_model(script), middleware=[AsyncSubAgentMiddleware([spec], on_run_end="wait")]
    )
    async with open_runtime() as rt:
        result = await rt.thread(agent).ainvoke({"messages": "go"})
        again = await rt.thread(agent).ainvoke({"messages": "go"})  # the runtime still works
    [entry] = result["async_tasks"].values()
    assert entry["status"] == "error"
    assert entry["error"] == "RuntimeError: a bug in the runner"
    assert again["messages"][-1].text.startswith("started")


async def test_tasks_a_closed_runtime_stopped_are_reported_lost_when_asked(
    tmp_path: Path,
) -> None:
    from deepactors.middleware import AsyncSubAgentMiddleware, SubAgentSpec

    gates = Gates()
    worker = create_deep_agent(researcher(gates), name="researcher")
    spec = SubAgentSpec(name="researcher", description="r", agent=worker.spec, background=True)
    script = {
        "research": once(
            lambda ids: calls(
                ("start_async_task", {"description": "alpha", "subagent_type": "researcher"})
            ),
            "started",
        ),
        "how is it going?": once(lambda ids: calls(("list_async_tasks", {})), "so"),
    }
    agent = create_deep_agent(
        main_model(script),
        middleware=[AsyncSubAgentMiddleware([spec], on_lost="report")],
        checkpointer=SqliteCheckpointer(tmp_path / "threads.db"),
    )
    async with open_runtime() as rt:
        await (await rt.thread(agent, "t").start({"messages": "research"})).result()
    # The runtime closed with the task working (its gate shut): it stopped, and
    # nothing was left to say how. Another runtime reads the thread.
    async with open_runtime() as rt:
        later = await (await rt.thread(agent, "t").start({"messages": "how is it going?"})).result()
    [entry] = later["async_tasks"].values()
    assert entry["status"] == "lost"
    assert "status: lost" in later["messages"][-1].text
    assert gates.briefs == ["alpha"]  # not started again
