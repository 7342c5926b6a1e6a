"""The agent loop: hooks, jumps, wrappers, concurrent tools, errors, limits."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
import structlog

from deepactors import (
    AgentMiddleware,
    AssistantMessage,
    InputError,
    ScriptedModel,
    StepLimitExceeded,
    ToolCall,
    ToolError,
    ToolMessage,
    create_deep_agent,
)
from deepactors.middleware import (
    ModelHandler,
    ToolCallRequest,
    ToolHandler,
    after_model,
    before_model,
    wrap_model_call,
    wrap_tool_call,
)
from deepactors.models import FunctionModel, ModelRequest
from deepactors.tools import Command

pytestmark = [pytest.mark.anyio, pytest.mark.virtual_time]


def calls(*items: tuple[str, dict[str, Any]]) -> AssistantMessage:
    return AssistantMessage(tool_calls=[ToolCall(name=n, args=a) for n, a in items])


def tool_results(result: dict[str, Any]) -> list[ToolMessage]:
    return [m for m in result["messages"] if isinstance(m, ToolMessage)]


async def echo(text: str) -> str:
    """Repeat the text.

    Args:
        text: What to repeat.
    """
    return text


class Recorder(AgentMiddleware):
    def __init__(self, tag: str, log: list[str]) -> None:
        self.tag, self.log = tag, log

    @property
    def name(self) -> str:
        return f"Recorder-{self.tag}"

    async def before_agent(self, state: Any, run: Any) -> None:
        self.log.append(f"before_agent:{self.tag}")

    async def before_model(self, state: Any, run: Any) -> None:
        self.log.append(f"before_model:{self.tag}")

    async def after_model(self, state: Any, run: Any) -> None:
        self.log.append(f"after_model:{self.tag}")

    async def after_agent(self, state: Any, run: Any) -> None:
        self.log.append(f"after_agent:{self.tag}")

    async def wrap_model_call(self, request: ModelRequest, handler: ModelHandler) -> Any:
        self.log.append(f"wrap_model>{self.tag}")
        out = await handler(request)
        self.log.append(f"wrap_model<{self.tag}")
        return out

    async def wrap_tool_call(self, request: ToolCallRequest, handler: ToolHandler) -> Any:
        self.log.append(f"wrap_tool>{self.tag}")
        out = await handler(request)
        self.log.append(f"wrap_tool<{self.tag}")
        return out


async def test_hooks_run_before_in_order_after_in_reverse_wrap_outermost_first() -> None:
    log: list[str] = []
    model = ScriptedModel([calls(("echo", {"text": "x"})), "done"])
    agent = create_deep_agent(
        model, tools=[echo], middleware=[Recorder("a", log), Recorder("b", log)]
    )
    await agent.ainvoke("go")
    assert log == [
        "before_agent:a", "before_agent:b",
        "before_model:a", "before_model:b",
        "wrap_model>a", "wrap_model>b", "wrap_model<b", "wrap_model<a",
        "after_model:b", "after_model:a",
        "wrap_tool>a", "wrap_tool>b", "wrap_tool<b", "wrap_tool<a",
        "before_model:a", "before_model:b",
        "wrap_model>a", "wrap_model>b", "wrap_model<b", "wrap_model<a",
        "after_model:b", "after_model:a",
        "after_agent:b", "after_agent:a",
    ]  # fmt: skip


async def test_before_model_jump_to_end_skips_the_model() -> None:
    model = ScriptedModel([])

    @before_model
    def stop(state: Any, run: Any) -> dict[str, Any]:
        return {"messages": [AssistantMessage(content="not today")], "jump_to": "end"}

    result = await create_deep_agent(model, middleware=[stop]).ainvoke("go")
    assert model.calls == 0
    assert result["messages"][-1].text == "not today"


async def test_after_model_jump_to_model_asks_again() -> None:
    model = ScriptedModel(["first", "second"])
    seen: list[str] = []

    @after_model
    def again_once(state: Any, run: Any) -> dict[str, Any] | None:
        seen.append(state.messages[-1].text)
        return {"jump_to": "model"} if len(seen) == 1 else None

    result = await create_deep_agent(model, middleware=[again_once]).ainvoke("go")
    assert seen == ["first", "second"]
    assert result["messages"][-1].text == "second"


async def test_wrap_model_call_can_retry() -> None:
    attempts = 0

    def flaky(request: ModelRequest) -> str:
        nonlocal attempts
        attempts += 1
        if attempts == 1:
            raise ConnectionError("blip")
        return "ok"

    @wrap_model_call
    async def retry_once(request: ModelRequest, handler: ModelHandler) -> AssistantMessage:
        try:
            return await handler(request)
        except ConnectionError:
            return await handler(request)

    agent = create_deep_agent(FunctionModel(flaky), middleware=[retry_once])
    result = await agent.ainvoke("go")
    assert attempts == 2
    assert result["messages"][-1].text == "ok"


async def test_wrap_tool_call_can_short_circuit_and_rewrite_arguments() -> None:
    @wrap_tool_call
    async def guard(request: ToolCallRequest, handler: ToolHandler) -> Any:
        if request.call.args.get("text") == "secret":
            return ToolMessage(
                tool_call_id=request.call.id, name="echo", content="blocked", status="error"
            )
        call = request.call.model_copy(update={"args": {"text": request.call.args["text"] * 2}})
        return await handler(request.replace(call=call))

    model = ScriptedModel([calls(("echo", {"text": "secret"}), ("echo", {"text": "ab"})), "done"])
    result = await create_deep_agent(model, tools=[echo], middleware=[guard]).ainvoke("go")
    assert [(m.text, m.status) for m in tool_results(result)] == [
        ("blocked", "error"),
        ("abab", "success"),
    ]


async def test_tool_calls_of_one_turn_run_concurrently() -> None:
    # Each call waits until all ten have started: run one after the other, the
    # first would wait forever (and fail_after would fail the test).
    started = 0
    all_started = anyio.Event()

    async def meet() -> str:
        """Wait for the others."""
        nonlocal started
        started += 1
        if started == 10:
            all_started.set()
        await all_started.wait()
        return "met"

    model = ScriptedModel([calls(*[("meet", {})] * 10), "done"])
    agent = create_deep_agent(model, tools=[meet])
    with anyio.fail_after(5):
        result = await agent.ainvoke("go")
    assert [m.text for m in tool_results(result)] == ["met"] * 10


async def test_results_keep_call_order_whatever_finishes_first() -> None:
    async def nap(seconds: float) -> str:
        """Sleep then say how long."""
        await anyio.sleep(seconds)
        return str(seconds)

    model = ScriptedModel([calls(("nap", {"seconds": 0.2}), ("nap", {"seconds": 0.0})), "done"])
    result = await create_deep_agent(model, tools=[nap]).ainvoke("go")
    assert [m.text for m in tool_results(result)] == ["0.2", "0.0"]


async def test_bad_tool_calls_become_error_results_and_the_run_goes_on() -> None:
    async def boom() -> str:
        """Fail."""
        raise RuntimeError("disk on fire")

    async def polite() -> str:
        """Refuse."""
        raise ToolError("try another path")

    model = ScriptedModel(
        [
            AssistantMessage(
                tool_calls=[
                    ToolCall(name="echo", args={"text": 5}),
                    ToolCall(name="echo", args={}),
                    ToolCall(name="nope", args={}),
                    ToolCall(name="boom", args={}),
                    ToolCall(name="polite", args={}),
                    ToolCall(name="echo", args={}, error="invalid JSON: {'text"),
                ]
            ),
            "recovered",
        ]
    )
    result = await create_deep_agent(model, tools=[echo, boom, polite]).ainvoke("go")
    errors = tool_results(result)
    assert all(m.status == "error" for m in errors)
    texts = [m.text for m in errors]
    assert "text: Input should be a valid string" in texts[0]
    assert "missing required argument 'text'" in texts[1]
    assert "no tool named 'nope'" in texts[2]
    assert "echo" in texts[2]
    assert texts[3] == "RuntimeError: disk on fire"
    assert texts[4] == "try another path"
    assert "could not be read" in texts[5]
    assert result["messages"][-1].text == "recovered"
    # The model saw every error before it answered.
    assert len(model.requests[1].messages) == 1 + 1 + 6


async def test_invalid_input_fails_before_the_model_is_called() -> None:
    model = ScriptedModel(["never"])
    agent = create_deep_agent(model)
    for bad in ({"messages": [{"role": "robot", "content": "x"}]}, {"todos": []}, 42):
        with pytest.raises(InputError):
            await agent.ainvoke(bad)  # type: ignore[arg-type]
    assert model.calls == 0


async def test_step_limit_stops_an_endless_loop_with_a_clear_error() -> None:
    model = FunctionModel(lambda r: calls(("echo", {"text": "again"})))
    agent = create_deep_agent(model, tools=[echo], max_steps=5)
    with pytest.raises(StepLimitExceeded, match="5 model calls"):
        await agent.ainvoke("go")
    assert model.calls == 5


async def test_tools_write_state_with_commands() -> None:
    async def note(text: str) -> Command:
        """Save a note file."""
        return Command(update={"files": {"/note.md": _record(text)}}, result="saved")

    model = ScriptedModel([calls(("note", {"text": "hello"})), "done"])
    result = await create_deep_agent(model, tools=[note]).ainvoke("go")
    assert result["files"]["/note.md"].content == "hello"
    assert tool_results(result)[0].text == "saved"


def _record(text: str) -> Any:
    from deepactors import FileRecord

    return FileRecord(content=text)


async def test_parallel_write_todos_are_refused() -> None:
    todo = {"todos": [{"content": "a", "status": "pending"}]}
    model = ScriptedModel([calls(("write_todos", todo), ("write_todos", todo)), "done"])
    result = await create_deep_agent(model).ainvoke("go")
    errors = tool_results(result)
    assert len(errors) == 2
    assert all(m.status == "error" and "2 times in one turn" in m.text for m in errors)
    assert result["todos"] == []


async def test_write_todos_sets_the_plan() -> None:
    todo = {"todos": [{"content": "read", "status": "completed"}, {"content": "write"}]}
    model = ScriptedModel([calls(("write_todos", todo)), "done"])
    agent = create_deep_agent(model)
    assert "write_todos" in agent.system_prompt  # type: ignore[operator]
    result = await agent.ainvoke("go")
    assert [(t.content, t.status) for t in result["todos"]] == [
        ("read", "completed"),
        ("write", "pending"),
    ]


async def test_dangling_tool_calls_are_patched_before_the_model_sees_them() -> None:
    dangling = calls(("echo", {"text": "x"}))
    model = ScriptedModel(["fine"])
    history = [{"role": "user", "content": "a"}, dangling, {"role": "user", "content": "b"}]
    result = await create_deep_agent(model, tools=[echo]).ainvoke({"messages": history})
    seen = model.requests[0].messages
    assert [m.role for m in seen] == ["user", "assistant", "tool", "user"]
    assert seen[2].status == "error"
    assert "cancelled" in seen[2].text
    assert result["messages"][-1].text == "fine"


async def test_a_history_ending_in_tool_calls_runs_them_first() -> None:
    model = ScriptedModel(["after tools"])
    history = [{"role": "user", "content": "a"}, calls(("echo", {"text": "x"}))]
    result = await create_deep_agent(model, tools=[echo]).ainvoke({"messages": history})
    assert [m.role for m in result["messages"]] == ["user", "assistant", "tool", "assistant"]


async def test_debug_logs_every_hook_and_model_call() -> None:
    with structlog.testing.capture_logs() as logs:
        await create_deep_agent(ScriptedModel(["hi"]), debug=True).ainvoke("go")
    events = [(e["event"], e["path"]) for e in logs]
    assert ("model call", "main") in events
    assert sum(e == "hook" for e, _ in events) >= 2  # PatchToolCalls + Todo hooks
    with structlog.testing.capture_logs() as quiet:
        await create_deep_agent(ScriptedModel(["hi"])).ainvoke("go")
    assert quiet == []


async def test_a_test_model_returning_one_answer_object_twice_adds_two_messages() -> None:
    again = AssistantMessage(tool_calls=[ToolCall(name="echo", args={"text": "x"})])
    answers = iter([again, again, AssistantMessage(content="done")])
    result = await create_deep_agent(FunctionModel(lambda r: next(answers)), tools=[echo]).ainvoke(
        "go"
    )
    assert [m.role for m in result["messages"]] == ["user"] + ["assistant", "tool"] * 2 + [
        "assistant"
    ]


async def test_a_tools_bad_state_update_becomes_an_error_and_changes_nothing() -> None:
    async def bad() -> Command:
        """Write a channel that does not exist."""
        return Command(update={"nope": 1, "files": {"/a.md": "x"}})

    async def text_file() -> Command:
        """Write a file as plain text."""
        return Command(update={"files": {"/b.md": "hello"}})

    model = ScriptedModel([calls(("bad", {}), ("text_file", {})), "done"])
    result = await create_deep_agent(model, tools=[bad, text_file]).ainvoke("go")
    first, second = tool_results(result)
    assert first.status == "error"
    assert "'nope'" in first.text
    assert "/a.md" not in result["files"]
    assert second.status == "success"
    assert result["files"]["/b.md"].content == "hello"
