"""Children placed on a real local Ray, the parent on asyncio and on trio: their
answers and file changes merge as local children's do, their events come back
under their actor paths, their failures are errors the parent's model reads."""

from __future__ import annotations

import anyio

from deepactors.events import ModelCallFinished, SubagentSpawned, ToolCallFinished
from deepactors.placement import RayPlacement
from tests.placement.agents import answers, parent, say


async def test_two_hundred_children_write_files_and_answer(placement: RayPlacement) -> None:
    agent = parent(placement)
    orders = [("w", f"write /notes/{i}.md note {i}") for i in range(200)]
    with anyio.fail_after(120):
        result = await agent.ainvoke(say(orders, files={"/keep.md": "kept"}))
    results = answers(result)
    assert len(results) == 200
    for i, (status, text) in enumerate(results):
        assert status == "success", text
        assert text.startswith(f"wrote /notes/{i}.md")
    files = result["files"]
    assert {f"/notes/{i}.md" for i in range(200)} <= set(files)
    assert all(files[f"/notes/{i}.md"].content == f"note {i}" for i in range(200))
    assert files["/keep.md"].content == "kept"
    # The children's usage is the parent's: 200 x 2 calls, and the parent's 2.
    assert result["usage"].requests == 402


async def test_a_conflict_is_kept_and_edits_merge(placement: RayPlacement) -> None:
    agent = parent(placement)
    text = "one\ntwo\nthree\n"
    with anyio.fail_after(60):
        result = await agent.ainvoke(
            say(
                [
                    ("w", "edit /shared.md two TWO-a"),
                    ("w", "edit /shared.md two TWO-b"),
                    ("w", "edit /shared.md three THREE"),
                ],
                files={"/shared.md": text},
            )
        )
    results = answers(result)
    assert all(status == "success" for status, _ in results), results
    files = result["files"]
    assert files["/shared.md"].content == "one\nTWO-a\nTHREE\n"
    assert files["/shared.conflict-task-2.md"].content == "one\nTWO-b\nthree\n"
    assert "CONFLICT: /shared.md" in results[1][1]


async def test_events_stream_back_under_the_childs_path(placement: RayPlacement) -> None:
    agent = parent(placement)
    seen = []
    with anyio.fail_after(60):
        async for event in agent.astream(say([("w", "write /a.md x"), ("w", "echo hi")])):
            seen.append(event)
    spawned = sorted(e.child for e in seen if isinstance(e, SubagentSpawned))
    assert spawned == ["main/task-1:w", "main/task-2:w"]
    first = [e for e in seen if e.path == "main/task-1:w"]
    assert any(isinstance(e, ModelCallFinished) for e in first)
    assert [e.call.name for e in first if isinstance(e, ToolCallFinished)] == ["write_file"]
    assert any(isinstance(e, ModelCallFinished) for e in seen if e.path == "main/task-2:w")


async def test_a_failing_child_is_an_error_the_parent_reads(placement: RayPlacement) -> None:
    agent = parent(placement)
    with anyio.fail_after(60):
        result = await agent.ainvoke(say([("w", "fail"), ("w", "echo fine")]))
    (s1, broke), (s2, fine) = answers(result)
    assert (s1, s2) == ("error", "success")
    assert "main/task-1:w failed" in broke
    assert "RuntimeError: the model broke" in broke
    assert fine == "echo: fine"
