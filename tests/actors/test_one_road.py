"""One road to start a run: a handle from ``Runtime.thread``, and nothing else.

``rt.thread(agent, thread_id)`` (a ``ThreadHandle``) and ``rt.thread(agent)``
(a ``OneShotHandle``, for runs of no thread) are how a run starts; the facade,
the server and the MCP server go through them, and a test reads the code for
any other road. The runtime's old ways in (``start``, ``start_nowait``,
``ainvoke``) still work, deprecated; its queueing is private.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path
from typing import Any

import anyio
import pytest

import deepactors
from deepactors import MemoryCheckpointer, create_deep_agent, open_runtime
from deepactors.actors import OneShotHandle, ThreadHandle, ThreadState
from deepactors.errors import ConfigurationError
from deepactors.messages import UserMessage
from deepactors.models import FunctionModel, ModelRequest

pytestmark = pytest.mark.anyio


def echo(request: ModelRequest) -> str:
    last = [m for m in request.messages if isinstance(m, UserMessage)][-1]
    return f"re: {last.text}"


def said(values: Any) -> list[str]:
    return [m.text for m in values["messages"]]


# -- the road, read from the code ------------------------------------------------------

# What starts or queues a run on a runtime, other than its handles.
_RUNTIME_ROADS = {
    "start",
    "start_nowait",
    "ainvoke",
    "submit",
    "submit_nowait",
    "send",
    "send_nowait",
}
# The runtime's private queueing: named anywhere outside actors/, it is a side road.
_PRIVATE_ROADS = {
    "_queue_run",
    "_queue_run_nowait",
    "_queue_order",
    "_one_shot",
    "_actor_for",
    "_live_actor",
}


def _runtime_names(tree: ast.AST) -> set[str]:
    """Expressions (as source) that hold a Runtime, read from bindings and annotations."""
    held: set[str] = set()

    def annotated(annotation: ast.expr | None) -> bool:
        return annotation is not None and "Runtime" in ast.unparse(annotation).replace(
            "ActorRuntime", ""
        ).replace("ToolRuntime", "")

    for node in ast.walk(tree):
        if isinstance(node, ast.AsyncWith | ast.With):
            for item in node.items:
                made = ast.unparse(item.context_expr)
                if item.optional_vars is not None and (
                    "open_runtime(" in made or "_runtime(" in made
                ):
                    held.add(ast.unparse(item.optional_vars))
        elif isinstance(node, ast.arg) and annotated(node.annotation):
            held.add(node.arg)
        elif isinstance(node, ast.AnnAssign) and annotated(node.annotation):
            target = ast.unparse(node.target)
            held.update({target, f"self.{target}"})
        elif isinstance(node, ast.Assign) and "current_runtime()" in ast.unparse(node.value):
            held.update(ast.unparse(t) for t in node.targets)
    # Then what is assigned from those (``self.runtime = runtime``).
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and ast.unparse(node.value) in held:
            held.update(ast.unparse(t) for t in node.targets)
    return held


def side_roads(source: str) -> list[str]:
    """Where ``source`` starts a run other than through a handle (line: call)."""
    tree = ast.parse(source)
    runtimes = _runtime_names(tree)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        target = ast.unparse(node.value)
        if node.attr in _PRIVATE_ROADS or (node.attr in _RUNTIME_ROADS and target in runtimes):
            found.append((node.lineno, node.col_offset, f"{target}.{node.attr}"))
    return [f"{line}: {call}" for line, _, call in sorted(found)]


def test_the_check_finds_a_run_started_on_the_runtime() -> None:
    bad = textwrap.dedent(
        """
        async def serve(rt: Runtime, agent):
            await rt.start(agent, "go")
            rt.start_nowait(agent, "go", thread_id="t")

        async def facade(agent):
            async with open_runtime() as rt:
                await rt.submit(agent.spec, None, run_input, options)
                await rt.thread(agent, "t").start("fine")

        class Manager:
            runtime: Runtime

            def __init__(self, rt: Runtime | None):
                self.rt = rt

            def launch(self, agent):
                self.rt.start_nowait(agent, "go")
                self.runtime.ainvoke(agent, "go")
                self.anything._queue_run_nowait(spec, None, run_input, options)
                tg.start(task)  # a task group's start: no run
        """
    )
    found = side_roads(bad)
    assert [f.split(": ")[1] for f in found] == [
        "rt.start",
        "rt.start_nowait",
        "rt.submit",
        "self.rt.start_nowait",
        "self.runtime.ainvoke",
        "self.anything._queue_run_nowait",
    ]


def test_nothing_outside_the_runtime_starts_a_run_but_through_a_handle() -> None:
    root = Path(deepactors.__file__).parent
    found = []
    for path in sorted(root.rglob("*.py")):
        if path.relative_to(root).parts[0] == "actors":
            continue
        found += [f"{path.relative_to(root)}:{f}" for f in side_roads(path.read_text())]
    assert not found, "runs started off the road (use rt.thread(...).start):\n" + "\n".join(found)


# -- the handles -----------------------------------------------------------------------


async def test_handles_have_no_public_constructor() -> None:
    agent = create_deep_agent(FunctionModel(echo))
    async with open_runtime() as rt:
        handle = await rt.thread(agent).start("go")
        await handle.wait()
        made = [
            (deepactors.Runtime, "open_runtime"),
            (deepactors.RunHandle, r"rt\.thread\(agent, thread_id\)\.start"),
            (deepactors.EventStream, "astream"),
            (ThreadHandle, r"Runtime\.thread\(agent, thread_id\)"),
            (OneShotHandle, r"Runtime\.thread\(agent\)"),
        ]
        for cls, hint in made:
            with pytest.raises(TypeError, match=f"no public constructor: .*{hint}"):
                cls()
        # What the package hands out still works.
        assert isinstance(rt, deepactors.Runtime)
        assert isinstance(handle, deepactors.RunHandle)
        assert isinstance(agent.astream("hi"), deepactors.EventStream)


async def test_a_one_shot_handle_runs_each_run_on_an_actor_of_its_own() -> None:
    release = anyio.Event()

    async def held(request: ModelRequest) -> str:
        if said({"messages": request.messages})[-1] == "hold":
            await release.wait()
        return echo(request)

    agent = create_deep_agent(FunctionModel(held))
    with anyio.fail_after(5):
        async with open_runtime() as rt:
            one_shot = rt.thread(agent)
            assert isinstance(one_shot, OneShotHandle)
            assert one_shot.thread_id is None
            assert repr(one_shot) == "<OneShotHandle 'main'>"
            blocked = await one_shot.start("hold")
            # Runs of no thread do not queue behind each other.
            assert said(await one_shot.ainvoke("free")) == ["free", "re: free"]
            quick = one_shot.start_nowait("quick")
            assert said(await quick.result()) == ["quick", "re: quick"]
            assert not blocked.done
            release.set()
            assert said(await blocked.result()) == ["hold", "re: hold"]
            assert blocked.thread_id is None
            await anyio.wait_all_tasks_blocked()
            assert rt.statistics().actors == 0  # each left with its run


async def test_the_runtimes_old_ways_in_still_work_and_say_they_are_deprecated() -> None:
    agent = create_deep_agent(FunctionModel(echo))
    async with open_runtime() as rt:
        with pytest.deprecated_call(match=r"rt\.thread\(agent, t\)\.start\(input\)"):
            handle = await rt.start(agent, "one", thread_id="t")
        assert said(await handle.result()) == ["one", "re: one"]
        with pytest.deprecated_call(match="start_nowait"):
            handle = rt.start_nowait(agent, "two", thread_id="t")
        assert said(await handle.result())[-1] == "re: two"
        with pytest.deprecated_call(match="ainvoke"):
            result = await rt.ainvoke(agent, "three")
        assert said(result) == ["three", "re: three"]
    # The warning points at the caller's line, not at the runtime.
    with pytest.warns(DeprecationWarning, match="rt.ainvoke") as caught:
        async with open_runtime() as rt:
            await rt.ainvoke(agent, "four")
    assert caught[0].filename == __file__


# -- reading a thread through its handle, memoized on its head -------------------------


async def test_a_view_is_read_once_per_head_while_the_thread_actor_lives() -> None:
    saver = MemoryCheckpointer()
    agent = create_deep_agent(FunctionModel(echo), checkpointer=saver)
    renders: list[ThreadState] = []

    def render(state: ThreadState) -> list[str]:
        renders.append(state)
        return said(state)

    async with open_runtime() as rt:
        thread = rt.thread(agent, "t")
        await thread.ainvoke("one")
        first = await thread.view(render)
        assert first == ["one", "re: one"]
        assert await thread.view(render) is first  # kept: no read, no rendering
        assert len(renders) == 1
        assert await thread.view(said) == first  # another rendering, of the same read
        await thread.ainvoke("two")  # an order: what was kept is read again
        assert await thread.view(render) == ["one", "re: one", "two", "re: two"]
        assert len(renders) == 2
        assert (renders[1].seq or 0) > (renders[0].seq or 0)
        # Another writer (a second runtime, or another process): seen when asked afresh.
        async with open_runtime() as other:
            await other.thread(agent, "t").ainvoke("three")
        assert len(await thread.view(render)) == 4
        assert len(await thread.view(render, fresh=True)) == 6
        await thread.update_state({"messages": [{"role": "user", "content": "noted"}]})
        assert (await thread.view(render))[-1] == "noted"
    # With no actor alive (none kept), every view reads the thread.
    async with open_runtime() as rt:
        before = len(renders)
        await rt.thread(agent, "t").view(render)
        await rt.thread(agent, "t").view(render)
        assert len(renders) == before + 2
        with pytest.raises(ConfigurationError, match="checkpointer"):
            await rt.thread(create_deep_agent(FunctionModel(echo)), "t").view(render)


async def test_a_view_during_a_run_sees_the_saved_steps_and_keeps_nothing() -> None:
    saver = MemoryCheckpointer()
    release, asked = anyio.Event(), anyio.Event()

    async def slow(request: ModelRequest) -> str:
        asked.set()
        await release.wait()
        return echo(request)

    agent = create_deep_agent(FunctionModel(slow), checkpointer=saver)
    with anyio.fail_after(5):
        async with open_runtime() as rt:
            thread = rt.thread(agent, "t")
            run = await thread.start("one")
            await asked.wait()
            during = await thread.view(said)
            assert during == ["one"]  # the input, saved before the model call
            release.set()
            await run.result()
            assert await thread.view(said) == ["one", "re: one"]
