"""Subagents as child actors: fan-out, file-diff merge, isolation, deadlines, progress."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import pytest

from deepactors import (
    AssistantMessage,
    FileRecord,
    ScriptedModel,
    ToolCall,
    ToolMessage,
    ToolRuntime,
    create_deep_agent,
    events,
)
from deepactors.middleware import SubAgentMiddleware
from deepactors.models import FunctionModel, ModelRequest
from tests.inflight import InFlight

pytestmark = [pytest.mark.anyio, pytest.mark.virtual_time]


def subagent(name: str, model: Any, **extra: Any) -> dict[str, Any]:
    """A subagent spec whose description and prompt do not matter to the test."""
    return {"name": name, "description": name, "system_prompt": name, "model": model, **extra}


def fan_out(*briefs: tuple[str, str]) -> AssistantMessage:
    return AssistantMessage(
        tool_calls=[
            ToolCall(name="task", args={"description": d, "subagent_type": t}) for d, t in briefs
        ]
    )


async def append_line(path: str, text: str, runtime: ToolRuntime) -> str:
    """Append a line to a file (creating it).

    Args:
        path: The file.
        text: The line to add.
    """
    backend = runtime.backend
    assert backend is not None
    try:
        window = await backend.read(path)
    except FileNotFoundError:
        await backend.write(path, text + "\n")
        return "created"
    body = "".join(line + "\n" for line in window.lines)
    await backend.write(path, body + text + "\n")
    return "appended"


async def replace_line(path: str, old: str, new: str, runtime: ToolRuntime) -> str:
    """Replace one line's text in a file.

    Args:
        path: The file.
        old: The text to find.
        new: The replacement.
    """
    assert runtime.backend is not None
    await runtime.backend.edit(path, old, new)
    return "edited"


def worker_model(act: Callable[[str], list[ToolCall]], latency: float = 0.0) -> FunctionModel:
    """A child model: first turn does ``act(brief)``, second turn reports."""

    def answer(request: ModelRequest) -> AssistantMessage:
        brief = request.messages[0].text
        if not any(isinstance(m, ToolMessage) for m in request.messages):
            return AssistantMessage(content="working on it", tool_calls=act(brief))
        return AssistantMessage(content=f"done: {brief}")

    return FunctionModel(answer, latency=latency)


def parent_model(first: AssistantMessage) -> FunctionModel:
    def answer(request: ModelRequest) -> AssistantMessage:
        if len(request.messages) == 1:
            return first
        return AssistantMessage(content="all merged")

    return FunctionModel(answer)


def files_of(n: int) -> dict[str, str]:
    return {
        f"/f{i}.txt": f"line one of {i}\nline two of {i}\nline three of {i}\n" for i in range(n)
    }


async def test_ten_disjoint_edits_of_existing_files_all_survive() -> None:
    editor = subagent(
        "editor",
        worker_model(
            lambda brief: [
                ToolCall(
                    name="replace_line",
                    args={"path": brief, "old": "line two", "new": "LINE TWO"},
                )
            ]
        ),
        tools=[replace_line],
    )
    parent = parent_model(fan_out(*[(f"/f{i}.txt", "editor") for i in range(10)]))
    agent = create_deep_agent(parent, subagents=[editor])
    result = await agent.ainvoke({"messages": "edit all", "files": files_of(10)})
    for i in range(10):
        record = result["files"][f"/f{i}.txt"]
        assert record.content == f"line one of {i}\nLINE TWO of {i}\nline three of {i}\n"
        assert record.version == 2
    results = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert all(m.status == "success" and m.text.startswith("done: /f") for m in results)


async def test_children_editing_different_lines_of_one_file_are_merged() -> None:
    editor = subagent(
        "editor",
        worker_model(
            lambda brief: [
                ToolCall(
                    name="replace_line",
                    args={"path": "/f0.txt", "old": f"line {brief}", "new": f"LINE {brief}"},
                )
            ]
        ),
        tools=[replace_line],
    )
    parent = parent_model(fan_out(("one", "editor"), ("three", "editor")))
    result = await create_deep_agent(parent, subagents=[editor]).ainvoke(
        {"messages": "go", "files": files_of(1)}
    )
    assert result["files"]["/f0.txt"].content == "LINE one of 0\nline two of 0\nLINE three of 0\n"
    notes = [m.text for m in result["messages"] if isinstance(m, ToolMessage)]
    assert any("the edits were merged" in n for n in notes)


async def test_same_path_writes_keep_both_contents() -> None:
    writer = subagent(
        "writer",
        worker_model(
            lambda brief: [ToolCall(name="append_line", args={"path": "/report.md", "text": brief})]
        ),
        tools=[append_line],
    )
    parent = parent_model(fan_out(("alpha findings", "writer"), ("beta findings", "writer")))
    result = await create_deep_agent(parent, subagents=[writer]).ainvoke("go")
    files = result["files"]
    assert files["/report.md"].content == "alpha findings\n"
    assert files["/report.conflict-task-2.md"].content == "beta findings\n"
    notes = [m.text for m in result["messages"] if isinstance(m, ToolMessage)]
    assert "CONFLICT" in notes[1]
    assert "/report.conflict-task-2.md" in notes[1]


async def test_merge_order_follows_calls_not_finishing_times() -> None:
    """The slow first child still wins the path: results do not depend on timing."""

    def act(brief: str) -> list[ToolCall]:
        return [ToolCall(name="append_line", args={"path": "/r.md", "text": brief})]

    async def slow_then_fast(request: ModelRequest) -> AssistantMessage:
        if request.messages[0].text == "slow":
            await anyio.sleep(0.2)
        return worker_model(act)._fn(request)  # type: ignore[return-value]

    writer = subagent("writer", FunctionModel(slow_then_fast), tools=[append_line])
    parent = parent_model(fan_out(("slow", "writer"), ("fast", "writer")))
    result = await create_deep_agent(parent, subagents=[writer]).ainvoke("go")
    assert result["files"]["/r.md"].content == "slow\n"
    assert result["files"]["/r.conflict-task-2.md"].content == "fast\n"


async def test_a_failing_child_leaves_its_siblings_to_finish() -> None:
    def answer(request: ModelRequest) -> AssistantMessage:
        brief = request.messages[0].text
        if brief == "5":
            raise RuntimeError("model exploded")
        return worker_model(
            lambda b: [ToolCall(name="append_line", args={"path": f"/n{b}.md", "text": b})]
        )._fn(request)  # type: ignore[return-value]

    worker = subagent("w", FunctionModel(answer), tools=[append_line])
    parent = parent_model(fan_out(*[(str(i), "w") for i in range(10)]))
    result = await create_deep_agent(parent, subagents=[worker]).ainvoke("go")
    results = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert [m.status for m in results].count("error") == 1
    assert "model exploded" in results[5].text
    assert sorted(result["files"]) == sorted(f"/n{i}.md" for i in range(10) if i != 5)
    assert result["messages"][-1].text == "all merged"


async def test_a_timed_out_child_merges_nothing() -> None:
    def act(brief: str) -> list[ToolCall]:
        return [ToolCall(name="append_line", args={"path": f"/{brief}.md", "text": brief})]

    async def answer(request: ModelRequest) -> AssistantMessage:
        brief = request.messages[0].text
        if brief == "slow" and any(isinstance(m, ToolMessage) for m in request.messages):
            await anyio.sleep_forever()  # wrote its file, then hangs before answering
        return worker_model(act)._fn(request)  # type: ignore[return-value]

    worker = subagent("w", FunctionModel(answer), tools=[append_line], timeout=0.3)
    parent = parent_model(fan_out(("slow", "w"), ("quick", "w")))
    started = anyio.current_time()
    with anyio.fail_after(5):
        result = await create_deep_agent(parent, subagents=[worker]).ainvoke("go")
    assert anyio.current_time() - started == pytest.approx(0.3)  # the child's deadline
    assert sorted(result["files"]) == ["/quick.md"]
    timed_out = next(m for m in result["messages"] if isinstance(m, ToolMessage))
    assert timed_out.status == "error"
    assert "0.3 s timeout" in timed_out.text


async def test_cancelling_mid_fan_out_leaves_no_task_alive() -> None:
    alive = 0
    started = anyio.Event()

    async def answer(request: ModelRequest) -> str:
        nonlocal alive
        alive += 1
        if alive == 20:
            started.set()
        try:
            await anyio.sleep_forever()
        finally:
            alive -= 1
        return "never"

    worker = subagent("w", FunctionModel(answer))
    parent = parent_model(fan_out(*[(str(i), "w") for i in range(20)]))
    agent = create_deep_agent(parent, subagents=[worker])
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:

            async def run() -> None:
                await agent.ainvoke("go")

            tg.start_soon(run)
            await started.wait()
            assert alive == 20
            tg.cancel_scope.cancel()
    assert alive == 0


async def test_a_run_timeout_bounds_every_descendant() -> None:
    alive = 0

    async def answer(request: ModelRequest) -> str:
        nonlocal alive
        alive += 1
        try:
            await anyio.sleep_forever()
        finally:
            alive -= 1
        return "never"

    worker = subagent("w", FunctionModel(answer))
    parent = parent_model(fan_out(*[(str(i), "w") for i in range(5)]))
    started = anyio.current_time()
    with anyio.fail_after(5), pytest.raises(TimeoutError):
        await create_deep_agent(parent, subagents=[worker]).ainvoke("go", timeout=0.2)
    assert anyio.current_time() - started == pytest.approx(0.2)
    assert alive == 0


async def test_unknown_subagent_type_names_the_valid_ones() -> None:
    parent = parent_model(fan_out(("x", "wizard")))
    agent = create_deep_agent(parent)
    assert "general-purpose" in agent.tools["task"].description
    result = await agent.ainvoke("go")
    error = next(m for m in result["messages"] if isinstance(m, ToolMessage))
    assert error.status == "error"
    assert "'wizard'" in error.text
    assert "'general-purpose'" in error.text


async def test_only_the_final_answer_enters_the_parents_context() -> None:
    child_model = ScriptedModel(
        [
            AssistantMessage(
                content="thinking out loud",
                tool_calls=[ToolCall(name="write_todos", args={"todos": [{"content": "x"}]})],
            ),
            "the distilled answer",
        ]
    )
    researcher = subagent("r", child_model)
    parent = parent_model(fan_out(("question", "r")))
    result = await create_deep_agent(parent, subagents=[researcher]).ainvoke("go")
    texts = [m.text for m in result["messages"]]
    assert "the distilled answer" in texts
    assert "thinking out loud" not in texts
    assert result["todos"] == []  # the child's plan is its own
    assert child_model.requests[0].messages[0].text == "question"
    assert len(child_model.requests[0].messages) == 1


async def test_general_purpose_uses_the_parents_model_and_tools() -> None:
    seen: list[str] = []

    def answer(request: ModelRequest) -> AssistantMessage:
        first = request.messages[0].text
        seen.append(first)
        if first == "top":
            if len(request.messages) == 1:
                return fan_out(("sub", "general-purpose"))
            return AssistantMessage(content="top done")
        if len(request.messages) == 1:
            return AssistantMessage(
                tool_calls=[ToolCall(name="append_line", args={"path": "/gp.md", "text": "hi"})]
            )
        return AssistantMessage(content="sub done")

    agent = create_deep_agent(FunctionModel(answer), tools=[append_line])
    result = await agent.ainvoke("top")
    assert result["files"]["/gp.md"].content == "hi\n"
    assert seen.count("sub") == 2
    (subagents,) = [mw for mw in agent.middleware if isinstance(mw, SubAgentMiddleware)]
    gp = subagents.specs["general-purpose"].agent
    assert "task" not in gp.tools  # one level of delegation for declarative subagents


async def test_children_stream_progress_tagged_with_their_path() -> None:
    worker = subagent(
        "researcher",
        worker_model(
            lambda b: [ToolCall(name="append_line", args={"path": f"/{b}.md", "text": b})],
            latency=0.01,
        ),
        tools=[append_line],
    )
    parent = parent_model(fan_out(("a", "researcher"), ("b", "researcher")))
    seen = [e async for e in create_deep_agent(parent, subagents=[worker]).astream("go")]
    paths = {e.path for e in seen}
    assert {"main", "main/task-1:researcher", "main/task-2:researcher"} <= paths
    spawned = [e.child for e in seen if isinstance(e, events.SubagentSpawned)]
    finished = [e.child for e in seen if isinstance(e, events.SubagentFinished)]
    assert (
        sorted(spawned) == sorted(finished) == ["main/task-1:researcher", "main/task-2:researcher"]
    )
    # A child's tool call is visible before the parent's tool step has ended.
    first_child_tool = next(
        i for i, e in enumerate(seen) if isinstance(e, events.ToolCallFinished) and e.path != "main"
    )
    parent_task_done = next(
        i for i, e in enumerate(seen) if isinstance(e, events.ToolCallFinished) and e.path == "main"
    )
    assert first_child_tool < parent_task_done


async def test_fan_out_cap_limits_children_working_at_once() -> None:
    calls = InFlight()

    async def answer(request: ModelRequest) -> str:
        await calls.work(0.02)
        return "ok"

    worker = subagent("w", FunctionModel(answer))
    parent = parent_model(fan_out(*[(str(i), "w") for i in range(12)]))
    agent = create_deep_agent(parent, subagents=[worker], max_concurrent_subagents=3)
    started = anyio.current_time()
    result = await agent.ainvoke("go")
    assert calls.peak == 3
    assert anyio.current_time() - started == pytest.approx(4 * 0.02)  # 12 in 4 waves of 3
    assert sum(isinstance(m, ToolMessage) for m in result["messages"]) == 12


async def test_a_prebuilt_agent_can_be_a_subagent_with_its_own_subagents() -> None:
    leaf = subagent("leaf", FunctionModel(lambda r: "leaf answer"))
    middle = create_deep_agent(
        parent_model(fan_out(("deep", "leaf"))), subagents=[leaf], name="middle"
    )
    top = create_deep_agent(
        parent_model(fan_out(("mid", "middle"))),
        subagents=[{"name": "middle", "description": "m", "agent": middle}],
    )
    seen = [e async for e in top.astream("go")]
    assert "main/task-1:middle/task-1:leaf" in {e.path for e in seen} | {
        getattr(e, "child", "") for e in seen
    }


async def test_a_child_sees_the_parents_files_copy_on_write() -> None:
    async def peek(path: str, runtime: ToolRuntime) -> str:
        """Read a file.

        Args:
            path: Which.
        """
        assert runtime.backend is not None
        return (await runtime.backend.read(path)).text

    reader = subagent(
        "reader",
        worker_model(lambda b: [ToolCall(name="peek", args={"path": "/seed.md"})]),
        tools=[peek],
    )
    parent = parent_model(fan_out(("look", "reader")))
    result = await create_deep_agent(parent, subagents=[reader]).ainvoke(
        {"messages": "go", "files": {"/seed.md": FileRecord(content="seeded")}}
    )
    assert result["files"]["/seed.md"].version == 1  # untouched by a read


def _unused(*_: Any) -> None:  # keep imports used by type checkers only
    return None


async def test_the_tree_wide_cap_binds_every_level_without_deadlock() -> None:
    leaves = InFlight()

    async def leaf_answer(request: ModelRequest) -> str:
        await leaves.work(0.01)
        return "leaf done"

    leaf = subagent("leaf", FunctionModel(leaf_answer))
    middle = create_deep_agent(
        parent_model(fan_out(("a", "leaf"), ("b", "leaf"), ("c", "leaf"))),
        subagents=[leaf],
        name="middle",
    )
    top = create_deep_agent(
        parent_model(fan_out(*[(str(i), "middle") for i in range(4)])),
        subagents=[{"name": "middle", "description": "m", "agent": middle}],
        max_concurrent_subagents_total=2,
    )
    with anyio.fail_after(10):
        result = await top.ainvoke("go")
    assert result["messages"][-1].text == "all merged"
    assert leaves.peak <= 2  # 12 leaves under 4 middles, never more than 2 at work


async def test_usage_adds_up_per_subtree_and_per_run() -> None:
    from deepactors import Usage

    def child(request: ModelRequest) -> AssistantMessage:
        return AssistantMessage(content="ok", usage=Usage(input_tokens=10, output_tokens=1))

    def top(request: ModelRequest) -> AssistantMessage:
        answer = parent_model(fan_out(("a", "w"), ("b", "w")))._fn(request)
        return answer.model_copy(update={"usage": Usage(input_tokens=100, output_tokens=5)})  # type: ignore[union-attr]

    worker = subagent("w", FunctionModel(child))
    stream = create_deep_agent(FunctionModel(top), subagents=[worker]).astream("go")
    seen = [e async for e in stream]
    finished = [e for e in seen if isinstance(e, events.SubagentFinished)]
    assert [e.usage.input_tokens for e in finished if e.usage] == [10, 10]
    assert stream.result is not None
    total = stream.result["usage"]
    assert (total.input_tokens, total.output_tokens, total.requests) == (220, 12, 4)
    assert seen[-1].usage == total  # type: ignore[attr-defined]
