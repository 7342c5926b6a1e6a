"""The runtime: deadlines, cancellation, thread actors, event streams, the sync API."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any

import anyio
import pytest

from deepactors import (
    AssistantMessage,
    RunCancelled,
    ScriptedModel,
    ToolCall,
    ToolRuntime,
    create_deep_agent,
    events,
    open_runtime,
)
from deepactors.actors import Runtime
from deepactors.models import FunctionModel, ModelRequest
from tests.inflight import InFlight
from tests.waiting import wait_until

pytestmark = [pytest.mark.anyio, pytest.mark.virtual_time]


class Sleeper:
    """A tool that waits until cancelled and records whether its cleanup ran."""

    def __init__(self) -> None:
        self.started = anyio.Event()
        self.cleaned_up = False

    async def __call__(self) -> str:
        """Wait until cancelled."""
        self.started.set()
        try:
            await anyio.sleep_forever()
        finally:
            self.cleaned_up = True
        return "woke"

    def agent(self, **kwargs: Any) -> Any:
        from deepactors import tool

        model = ScriptedModel([AssistantMessage(tool_calls=[ToolCall(name="wait", args={})])])
        return create_deep_agent(model, tools=[tool(name="wait")(self.__call__)], **kwargs)


async def test_timeout_raises_timeout_error_after_cancelling_everything() -> None:
    sleeper = Sleeper()
    started = anyio.current_time()
    with anyio.fail_after(5), pytest.raises(TimeoutError):
        await sleeper.agent().ainvoke("go", timeout=0.5)
    assert anyio.current_time() - started == pytest.approx(0.5)  # the run's deadline, not ours
    assert sleeper.started.is_set()
    assert sleeper.cleaned_up  # nothing of the run is alive once ainvoke returns


async def test_cancelling_the_callers_scope_cancels_the_run() -> None:
    sleeper = Sleeper()
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:

            async def caller() -> None:
                await sleeper.agent().ainvoke("go")

            tg.start_soon(caller)
            await sleeper.started.wait()
            tg.cancel_scope.cancel()
    assert sleeper.cleaned_up


async def test_cancelling_a_handle_stops_only_that_run() -> None:
    sleeper = Sleeper()
    agent = sleeper.agent()
    other = create_deep_agent(FunctionModel(lambda r: "fine", latency=0.3))
    with anyio.fail_after(5):
        async with open_runtime() as rt:
            doomed = await rt.thread(agent, "a").start("go")
            survivor = await rt.thread(other, "b").start("go")
            await sleeper.started.wait()
            doomed.cancel()
            with pytest.raises(RunCancelled):
                await doomed.result()
            assert sleeper.cleaned_up
            assert (await survivor.result())["messages"][-1].text == "fine"


async def test_runs_on_one_thread_queue_and_share_the_conversation() -> None:
    calls = InFlight()

    async def answer(request: ModelRequest) -> str:
        await calls.work(0.05)
        return f"seen {len(request.messages)}"

    agent = create_deep_agent(FunctionModel(answer))
    async with open_runtime() as rt:
        async with anyio.create_task_group() as tg:
            results: list[dict[str, Any]] = []

            async def ask(text: str) -> None:
                results.append(await rt.thread(agent, "t1").ainvoke(text))

            tg.start_soon(ask, "one")
            await anyio.wait_all_tasks_blocked()
            tg.start_soon(ask, "two")
        assert rt.statistics().actors == 1
    assert calls.peak == 1  # never two at once
    # The second run saw the whole first exchange: same actor, same state.
    assert [m.text for m in results[1]["messages"]] == ["one", "seen 1", "two", "seen 3"]


async def test_a_failing_run_does_not_disturb_its_siblings() -> None:
    def explode(request: ModelRequest) -> str:
        raise ValueError("model broke")

    bad = create_deep_agent(FunctionModel(explode))
    good = create_deep_agent(FunctionModel(lambda r: "ok", latency=0.1))
    async with open_runtime() as rt:
        h_bad = await rt.thread(bad).start("go")
        h_good = await rt.thread(good).start("go")
        with pytest.raises(ValueError, match="model broke"):
            await h_bad.result()
        assert (await h_good.result())["messages"][-1].text == "ok"


async def test_astream_yields_typed_events_tagged_with_the_actor_path() -> None:
    model = ScriptedModel(
        [
            AssistantMessage(
                tool_calls=[
                    ToolCall(name="write_todos", args={"todos": [{"content": "look"}]}),
                    ToolCall(name="shout", args={"text": "hi"}),
                ]
            ),
            "all done",
        ]
    )

    def shout(text: str, runtime: ToolRuntime) -> str:
        """Shout (a sync tool that streams a custom event from its thread)."""
        runtime.write({"progress": text})
        return text.upper()

    stream = create_deep_agent(model, tools=[shout]).astream("go")
    seen = [e async for e in stream]
    kinds = [type(e).__name__ for e in seen]
    assert kinds[0] == "RunStarted"
    assert kinds[-1] == "RunFinished"
    assert {e.path for e in seen} == {"main"}
    assert "ModelDelta" in kinds
    assert "TodosUpdated" in kinds
    custom = [e for e in seen if isinstance(e, events.CustomEvent)]
    assert [c.data for c in custom] == [{"progress": "hi"}]
    finished = [e for e in seen if isinstance(e, events.ToolCallFinished)]
    assert sorted(e.result.text for e in finished if e.call.name == "shout") == ["HI"]
    assert seen[-1].outcome == "completed"  # type: ignore[attr-defined]
    assert stream.result is not None
    assert stream.result["messages"][-1].text == "all done"


async def test_leaving_an_event_stream_early_cancels_the_run() -> None:
    sleeper = Sleeper()
    with anyio.fail_after(5):
        async with sleeper.agent().astream("go") as stream:
            async for event in stream:
                if isinstance(event, events.ToolCallStarted):
                    break
    assert sleeper.cleaned_up


async def test_a_failed_run_raises_its_error_from_the_stream() -> None:
    def explode(request: ModelRequest) -> str:
        raise ValueError("model broke")

    seen: list[Any] = []

    async def consume() -> None:
        async with create_deep_agent(FunctionModel(explode)).astream("go") as stream:
            async for event in stream:
                seen.append(event)

    with pytest.raises(ValueError, match="model broke"):
        await consume()
    assert isinstance(seen[-1], events.RunFinished)
    assert seen[-1].outcome == "failed"


async def test_the_sync_api_works_inside_a_running_event_loop() -> None:
    agent = create_deep_agent(ScriptedModel(["from a notebook"]))
    # A notebook cell is sync code on a thread whose loop is running.
    result = agent.invoke("go")
    assert result["messages"][-1].text == "from a notebook"


def test_the_sync_api_works_in_a_plain_script(tmp_path: Any) -> None:
    script = tmp_path / "script.py"
    script.write_text(
        textwrap.dedent(
            """
            from deepactors import create_deep_agent, ScriptedModel
            for backend in ("asyncio", "trio"):
                agent = create_deep_agent(ScriptedModel(["hello " + backend]))
                print(agent.invoke("hi", backend=backend)["messages"][-1].text)
                agent = create_deep_agent(ScriptedModel(["streamed"]))
                print(sum(1 for _ in agent.stream("hi", backend=backend)) > 3)
            """
        )
    )
    out = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.split("\n")[:4] == ["hello asyncio", "True", "hello trio", "True"]


async def test_runs_on_one_thread_take_turns_even_without_a_runtime() -> None:
    from deepactors.persistence import MemoryCheckpointer

    calls = InFlight()

    async def answer(request: ModelRequest) -> str:
        await calls.work(0.05)
        return f"seen {len(request.messages)}"

    agent = create_deep_agent(FunctionModel(answer), checkpointer=MemoryCheckpointer())
    results: dict[str, Any] = {}
    async with anyio.create_task_group() as tg:
        for text in ("one", "two", "three"):

            async def ask(text: str = text) -> None:
                results[text] = await agent.ainvoke(text, thread_id="t")

            tg.start_soon(ask)
            await anyio.wait_all_tasks_blocked()
    assert calls.peak == 1  # never two at once
    assert [m.text for m in results["three"]["messages"]][-2:] == ["three", "seen 5"]


async def test_runs_with_and_without_a_runtime_on_one_thread_take_turns() -> None:
    from deepactors.persistence import MemoryCheckpointer

    calls = InFlight()

    async def answer(request: ModelRequest) -> str:
        await calls.work(0.05)
        return f"seen {len(request.messages)}"

    agent = create_deep_agent(FunctionModel(answer), checkpointer=MemoryCheckpointer())
    results: dict[str, Any] = {}
    with anyio.fail_after(10):
        async with open_runtime() as rt, anyio.create_task_group() as tg:
            for i, text in enumerate(("one", "two", "three", "four")):

                async def ask(
                    text: str = text, under: Runtime | None = rt if i % 2 else None
                ) -> None:
                    results[text] = await agent.ainvoke(text, thread_id="t", runtime=under)

                tg.start_soon(ask)
                await anyio.wait_all_tasks_blocked()
    assert calls.peak == 1  # never two at once
    # Each run saw every earlier one: they ran one after the other, in arrival order.
    assert [m.text for m in results["four"]["messages"]][-2:] == ["four", "seen 7"]


async def test_a_run_may_outlast_the_idle_timeout_and_idle_actors_leave() -> None:
    agent = create_deep_agent(FunctionModel(lambda r: "slow but fine", latency=0.3))
    async with open_runtime(idle_timeout=0.1) as rt:
        result = await rt.thread(agent, "t").ainvoke("go")
        assert result["messages"][-1].text == "slow but fine"
        assert rt.statistics().actors == 1
        idle_from = anyio.current_time()
        await wait_until(lambda: rt.statistics().actors == 0, what="the idle actor gone")
        # Virtual time: it left once idle for idle_timeout (polled every 0.01 s), not before.
        assert 0.1 - 1e-9 <= anyio.current_time() - idle_from < 0.12
        # A new run on the thread gets a new actor.
        again = await rt.thread(agent, "t").ainvoke("again")
        assert again["messages"][-1].text == "slow but fine"


@pytest.mark.parametrize("kind", [KeyboardInterrupt, SystemExit])
@pytest.mark.parametrize("calls", [1, 3])
async def test_a_tool_that_raises_keyboard_interrupt_or_system_exit_reaches_the_caller_bare(
    kind: type[BaseException], calls: int
) -> None:
    def stop(n: int) -> str:
        """Stop everything.

        Args:
            n: Which call.
        """
        if n == 0:
            raise kind()
        return "fine"

    def answer(request: ModelRequest) -> AssistantMessage:
        return AssistantMessage(
            tool_calls=[ToolCall(name="stop", args={"n": i}) for i in range(calls)]
        )

    agent = create_deep_agent(FunctionModel(answer), tools=[stop])
    with pytest.raises(kind):
        await agent.ainvoke("go")


async def test_a_keyboard_interrupt_inside_a_subagent_reaches_the_caller_bare() -> None:
    def stop() -> str:
        """Stop everything."""
        raise KeyboardInterrupt

    def answer(request: ModelRequest) -> AssistantMessage:
        if request.messages[0].text == "child":
            return AssistantMessage(tool_calls=[ToolCall(name="stop", args={})])
        return AssistantMessage(
            tool_calls=[
                ToolCall(
                    name="task", args={"description": "child", "subagent_type": "general-purpose"}
                ),
                ToolCall(
                    name="task", args={"description": "child", "subagent_type": "general-purpose"}
                ),
            ]
        )

    agent = create_deep_agent(FunctionModel(answer), tools=[stop])
    with pytest.raises(KeyboardInterrupt):
        await agent.ainvoke("go")


@pytest.mark.real_time  # waits on another loop in a thread, and on SQLite's worker threads
async def test_an_actor_reads_the_thread_again_after_another_loop_ran_it(tmp_path: Any) -> None:
    # The actor in `rt` keeps the thread's state in memory. Another event loop (a
    # thread of its own, as another process would) runs the thread meanwhile; the
    # actor's next run must see that run's messages, not its own stale copy.
    from deepactors.persistence import SqliteCheckpointer

    def answer(request: ModelRequest) -> str:
        return f"seen {len(request.messages)}"

    path = tmp_path / "threads.db"
    agent = create_deep_agent(FunctionModel(answer), checkpointer=SqliteCheckpointer(path))
    elsewhere = create_deep_agent(FunctionModel(answer), checkpointer=SqliteCheckpointer(path))

    def run_elsewhere() -> None:
        elsewhere.invoke("two", thread_id="t", backend="trio")

    with anyio.fail_after(20):
        async with open_runtime() as rt:
            await agent.ainvoke("one", thread_id="t", runtime=rt)
            assert rt.statistics().actors == 1  # it keeps the state in memory
            await anyio.to_thread.run_sync(run_elsewhere)
            result = await agent.ainvoke("three", thread_id="t", runtime=rt)
    texts = [m.text for m in result["messages"]]
    assert texts == ["one", "seen 1", "two", "seen 3", "three", "seen 5"]


async def test_on_event_sees_every_event_as_it_happens_the_stream_too() -> None:
    def child(request: ModelRequest) -> AssistantMessage:
        return AssistantMessage(content="found")

    def main(request: ModelRequest) -> AssistantMessage:
        if len(request.messages) == 1:
            calls = [
                ToolCall(name="task", args={"description": f"t{i}", "subagent_type": "r"})
                for i in range(3)
            ]
            return AssistantMessage(tool_calls=calls)
        return AssistantMessage(content="done")

    sub = {"name": "r", "description": "r", "system_prompt": "r", "model": FunctionModel(child)}
    agent = create_deep_agent(FunctionModel(main), subagents=[sub])
    heard: list[events.Event] = []
    async with open_runtime() as rt:
        alone = await rt.thread(agent).start("go", on_event=heard.append)
        assert alone.events is None  # a listener needs no stream
        await alone.result()
        streamed: list[events.Event] = []
        both: list[events.Event] = []
        handle = await rt.thread(agent).start("go", stream=True, on_event=both.append)
        assert handle.events is not None
        async with handle.events:
            async for event in handle.events:
                streamed.append(event)
        await handle.result()
    assert isinstance(heard[0], events.RunStarted)
    assert isinstance(heard[-1], events.RunFinished)
    assert heard[-1].outcome == "completed"
    assert sum(isinstance(e, events.SubagentFinished) for e in heard) == 3

    # The same events of each actor in the same order. The three children run
    # concurrently, in an order of the scheduler's choosing (and of the pacer's
    # real-time slices), so main's events of one task call are ordered among
    # themselves, not against another call's.
    def by_actor(seen: list[events.Event]) -> dict[tuple[str, str], list[type]]:
        out: dict[tuple[str, str], list[type]] = {}
        task_of: dict[str, str] = {}  # child path -> its task's description
        for e in seen:
            match e:
                case events.ToolCallStarted() | events.ToolCallFinished():
                    strand = str(e.call.args["description"])
                case events.SubagentSpawned():
                    strand = task_of[e.child] = e.description
                case events.SubagentFinished():
                    strand = task_of[e.child]
                case _:
                    strand = ""
            out.setdefault((e.path, strand), []).append(type(e))
        return out

    assert by_actor(both) == by_actor(heard)
    assert streamed == both  # the same events, in the same order


async def test_start_nowait_and_on_done_report_every_way_a_run_ends() -> None:
    """``on_done`` is called once per run with its handle, whatever the outcome;
    ``start_nowait`` queues without awaiting, and refuses a full mailbox."""
    release = anyio.Event()
    holding = [anyio.Event()]

    async def hold() -> str:
        """Wait until released."""
        holding[-1].set()
        await release.wait()
        return "released"

    def model(request: ModelRequest) -> AssistantMessage:
        text = request.messages[-1].text
        if text == "fail":
            raise ValueError("the model broke")
        if text == "hold":
            return AssistantMessage(tool_calls=[ToolCall(name="hold", args={})])
        return AssistantMessage(content=f"echo: {text}")

    agent = create_deep_agent(FunctionModel(model), tools=[hold])
    ended: list[tuple[str, str]] = []

    def on_done(handle: Any) -> None:
        try:
            outcome = handle.result_nowait()["messages"][-1].text
        except Exception as exc:
            outcome = type(exc).__name__
        ended.append((handle.run_id, outcome))

    async with open_runtime() as rt:
        ok = rt.thread(agent).start_nowait("hi", on_done=on_done)
        with pytest.raises(anyio.WouldBlock):
            ok.result_nowait()  # not ended yet
        bad = rt.thread(agent).start_nowait("fail", on_done=on_done)
        held = await rt.thread(agent).start("hold", on_done=on_done)
        with anyio.fail_after(5):
            assert (await ok.result())["messages"][-1].text == "echo: hi"
            await bad.wait()
        # Called in the same step that ends the run: done as soon as the wait is.
        assert {run_id for run_id, _ in ended} == {ok.run_id, bad.run_id}
        held.cancel()
        with anyio.fail_after(5):
            await held.wait()
        timed = rt.thread(agent).start_nowait("hold", timeout=0.05, on_done=on_done)
        with anyio.fail_after(5):
            await timed.wait()
        # A thread's mailbox that is full refuses without queueing anything.
        holding.append(anyio.Event())
        first = await rt.thread(agent, "t").start("hold")
        with anyio.fail_after(5):
            await holding[-1].wait()  # the actor has taken it: its mailbox is empty
        queued = [rt.thread(agent, "t").start_nowait(f"q{i}") for i in range(64)]
        with pytest.raises(anyio.WouldBlock):
            rt.thread(agent, "t").start_nowait("one too many")
        release.set()
        with anyio.fail_after(10):
            await first.wait()
            for handle in queued:
                await handle.wait()
        assert [h.result_nowait()["messages"][-1].text for h in queued[:2]] == [
            "echo: q0",
            "echo: q1",
        ]
    assert dict(ended) == {
        ok.run_id: "echo: hi",
        bad.run_id: "ValueError",
        held.run_id: "RunCancelled",
        timed.run_id: "TimeoutError",
    }
    assert len(ended) == 4  # once each


async def test_an_on_done_that_raises_is_logged_and_the_runtime_goes_on() -> None:
    def broken(handle: Any) -> None:
        raise RuntimeError("listener bug")

    agent = create_deep_agent(FunctionModel(lambda r: AssistantMessage(content="ok")))
    async with open_runtime() as rt:
        first = rt.thread(agent).start_nowait("a", on_done=broken)
        with anyio.fail_after(5):
            assert (await first.result())["messages"][-1].text == "ok"
        assert (await rt.thread(agent).ainvoke("b"))["messages"][-1].text == "ok"


async def test_orders_a_cancelled_runtime_never_ran_are_answered_as_cancelled() -> None:
    """Cancelling the scope around a runtime: the run in progress, the run queued
    behind it on its thread and a run whose actor had not started yet all end
    with ``RunCancelled``, their handles done and ``on_done`` called once each."""
    holding = anyio.Event()

    async def hold() -> str:
        """Wait for ever."""
        holding.set()
        await anyio.sleep_forever()
        return "never"

    def model(request: ModelRequest) -> AssistantMessage:
        if request.messages[-1].text == "hold":
            return AssistantMessage(tool_calls=[ToolCall(name="hold", args={})])
        return AssistantMessage(content="answered")

    agent = create_deep_agent(FunctionModel(model), tools=[hold])
    ended: list[str] = []

    def on_done(handle: Any) -> None:
        ended.append(handle.run_id)

    with anyio.CancelScope() as scope:
        async with open_runtime() as rt:
            running = await rt.thread(agent, "t").start("hold", on_done=on_done)
            with anyio.fail_after(5):
                await holding.wait()
            queued = rt.thread(agent, "t").start_nowait("next", on_done=on_done)
            fresh = rt.thread(agent).start_nowait("now", on_done=on_done)  # its actor not started
            scope.cancel()
    handles = (running, queued, fresh)
    assert all(h.done for h in handles)
    for handle in handles:
        with pytest.raises(RunCancelled):
            handle.result_nowait()
    assert sorted(ended) == sorted(h.run_id for h in handles)
