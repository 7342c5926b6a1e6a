"""LangChain's middleware runs as LangChain runs it (issue 42 item 2).

Each ordering test records what a LangChain middleware's hooks see and runs the
same middleware under LangChain's own ``create_agent`` for reference: deepactors
must call the same hooks in the same order, on asyncio and on trio. The model is
the same deterministic LangChain chat model in both.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Annotated, Any, NotRequired

import anyio
import anyio.to_thread
import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import (
    AgentMiddleware,
    AgentState,
    HumanInTheLoopMiddleware,
    ModelCallLimitMiddleware,
    ModelRequest,
    ModelResponse,
    TodoListMiddleware,
    after_model,
    before_model,
    dynamic_prompt,
    wrap_model_call,
    wrap_tool_call,
)
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.channels.untracked_value import UntrackedValue

from deepactors import MemoryCheckpointer
from deepactors import create_deep_agent as create_own_agent
from deepactors.errors import ConfigurationError
from deepactors.langchain import create_deep_agent
from deepactors.messages import AssistantMessage, ToolCall
from deepactors.middleware import AgentMiddleware as OwnMiddleware
from deepactors.middleware import HumanInTheLoopMiddleware as OwnHumanInTheLoop
from deepactors.middleware import TodoListMiddleware as OwnTodoList
from deepactors.models import FunctionModel
from deepactors.models import ModelRequest as OwnRequest
from tests.compat.lc_fakes import GenericFakeChatModel

pytestmark = pytest.mark.anyio


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def script() -> GenericFakeChatModel:
    return GenericFakeChatModel(
        messages=iter(
            [
                AIMessage(
                    content="",
                    tool_calls=[{"name": "add", "args": {"a": 1, "b": 2}, "id": "c1"}],
                ),
                AIMessage(content="3"),
            ]
        )
    )


class AsyncRecorder(AgentMiddleware):
    """Every async hook, each recording its call (LangChain's async hook names)."""

    def __init__(self, tag: str, log: list[str]) -> None:
        self.tag = tag
        self.log = log

    @property
    def name(self) -> str:
        return f"AsyncRecorder{self.tag}"

    async def abefore_agent(self, state: Any, runtime: Any) -> None:
        self.log.append(f"{self.tag}.before_agent")

    async def abefore_model(self, state: Any, runtime: Any) -> None:
        self.log.append(f"{self.tag}.before_model:{len(state['messages'])}")

    async def aafter_model(self, state: Any, runtime: Any) -> None:
        self.log.append(f"{self.tag}.after_model:{type(state['messages'][-1]).__name__}")

    async def aafter_agent(self, state: Any, runtime: Any) -> None:
        self.log.append(f"{self.tag}.after_agent")

    async def awrap_model_call(self, request: ModelRequest, handler: Any) -> Any:
        self.log.append(f"{self.tag}.wrap_model_call>")
        response = await handler(request)
        self.log.append(f"{self.tag}.wrap_model_call<")
        return response

    async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
        self.log.append(f"{self.tag}.wrap_tool_call>{request.tool_call['name']}")
        result = await handler(request)
        self.log.append(f"{self.tag}.wrap_tool_call<{type(result).__name__}")
        return result


class SyncRecorder(AgentMiddleware):
    """Every sync hook, each recording its call and the thread it ran in."""

    def __init__(self, tag: str, log: list[str], threads: set[int]) -> None:
        self.tag = tag
        self.log = log
        self.threads = threads

    @property
    def name(self) -> str:
        return f"SyncRecorder{self.tag}"

    def _note(self, what: str) -> None:
        self.threads.add(threading.get_ident())
        self.log.append(f"{self.tag}.{what}")

    def before_agent(self, state: Any, runtime: Any) -> None:
        self._note("before_agent")

    def before_model(self, state: Any, runtime: Any) -> None:
        self._note(f"before_model:{len(state['messages'])}")

    def after_model(self, state: Any, runtime: Any) -> None:
        self._note("after_model")

    def after_agent(self, state: Any, runtime: Any) -> None:
        self._note("after_agent")

    def wrap_model_call(self, request: ModelRequest, handler: Any) -> Any:
        self._note("wrap_model_call>")
        response = handler(request)
        self._note("wrap_model_call<")
        return response

    def wrap_tool_call(self, request: Any, handler: Any) -> Any:
        self._note(f"wrap_tool_call>{request.tool_call['name']}")
        result = handler(request)
        self._note("wrap_tool_call<")
        return result


async def langchains_order(make: Callable[[list[str]], list[Any]], *, sync: bool) -> list[str]:
    """What LangChain's own create_agent calls, with the same middleware and model."""
    log: list[str] = []
    agent = create_agent(model=script(), tools=[add], middleware=make(log))
    request = {"messages": [HumanMessage(content="1+2?")]}
    if sync:
        await anyio.to_thread.run_sync(agent.invoke, request)
    else:
        await anyio.to_thread.run_sync(lambda: asyncio.run(agent.ainvoke(request)))
    return log


async def test_every_async_hook_runs_in_langchains_order() -> None:
    def make(log: list[str]) -> list[Any]:
        return [AsyncRecorder("A", log), AsyncRecorder("B", log)]

    log: list[str] = []
    result = await create_deep_agent(model=script(), tools=[add], middleware=make(log)).ainvoke(
        "1+2?"
    )
    assert result["messages"][-1].content == "3"
    assert log == await langchains_order(make, sync=False)
    # The whole run, as LangChain runs it: before_* in order, after_* in reverse,
    # the first wrap outermost, once per model call and per tool call.
    assert log[:6] == [
        "A.before_agent",
        "B.before_agent",
        "A.before_model:1",
        "B.before_model:1",
        "A.wrap_model_call>",
        "B.wrap_model_call>",
    ]
    assert log[-2:] == ["B.after_agent", "A.after_agent"]


async def test_every_sync_hook_runs_in_langchains_order_off_the_event_loop() -> None:
    threads: set[int] = set()

    def make(log: list[str]) -> list[Any]:
        return [SyncRecorder("A", log, threads), SyncRecorder("B", log, threads)]

    log: list[str] = []
    await create_deep_agent(model=script(), tools=[add], middleware=make(log)).ainvoke("1+2?")
    ours = threads.copy()
    assert log == await langchains_order(make, sync=True)
    assert threading.get_ident() not in ours  # never on the event loop's thread


async def test_an_async_guard_that_raises_fails_the_run() -> None:
    class Guard(AgentMiddleware):
        async def abefore_model(self, state: Any, runtime: Any) -> None:
            raise PermissionError("not allowed")

    with pytest.raises(PermissionError, match="not allowed"):
        await create_deep_agent(model=script(), tools=[add], middleware=[Guard()]).ainvoke("go")


async def test_the_decorators_make_middleware_that_runs() -> None:
    seen: list[str] = []

    @before_model
    def count(state: AgentState, runtime: Any) -> None:
        seen.append(f"before:{len(state['messages'])}")

    @after_model
    async def look(state: AgentState, runtime: Any) -> None:
        seen.append(f"after:{state['messages'][-1].type}")

    @dynamic_prompt
    def prompt(request: ModelRequest) -> str:
        return "Answer in French."

    @wrap_tool_call
    def double(request: Any, handler: Any) -> Any:
        args = {k: v * 2 for k, v in request.tool_call["args"].items()}
        return handler(request.override(tool_call={**request.tool_call, "args": args}))

    model = script()
    result = await create_deep_agent(
        model=model, tools=[add], middleware=[count, look, prompt, double]
    ).ainvoke("1+2?")
    assert seen == ["before:1", "after:ai", "before:3", "after:ai"]
    tool_result = result["messages"][2]
    assert isinstance(tool_result, ToolMessage)
    assert tool_result.content == "6"
    first_call = model.seen[0]
    assert isinstance(first_call[0], SystemMessage)
    assert first_call[0].text == "Answer in French."


async def test_a_wrap_model_call_may_answer_itself_and_a_hook_may_jump_to_the_end() -> None:
    @wrap_model_call
    async def canned(request: ModelRequest, handler: Any) -> Any:
        return ModelResponse(result=[AIMessage(content="cached answer")])

    result = await create_deep_agent(model=script(), middleware=[canned]).ainvoke("hi")
    assert result["messages"][-1].content == "cached answer"

    @before_model(can_jump_to=["end"])
    def stop(state: AgentState, runtime: Any) -> dict[str, Any]:
        return {"messages": [AIMessage(content="stopped early")], "jump_to": "end"}

    result = await create_deep_agent(model=script(), middleware=[stop]).ainvoke("hi")
    assert [m.content for m in result["messages"]] == ["hi", "stopped early"]


async def test_model_call_limit_middleware_stops_the_run() -> None:
    calls = [
        AIMessage(content="", tool_calls=[{"name": "add", "args": {"a": 1, "b": 1}, "id": f"c{i}"}])
        for i in range(10)
    ]
    agent = create_deep_agent(
        model=GenericFakeChatModel(messages=iter(calls)),
        tools=[add],
        middleware=[ModelCallLimitMiddleware(run_limit=2)],
    )
    result = await agent.ainvoke("go")
    assert result["messages"][-1].content == "Model call limits exceeded: run limit (2/2)"
    assert sum(1 for m in result["messages"] if isinstance(m, AIMessage)) == 3


async def test_untracked_state_keys_start_each_run_empty_and_others_carry_over() -> None:
    class CountState(AgentState):
        calls_in_thread: NotRequired[int]
        calls_in_run: NotRequired[Annotated[int, UntrackedValue]]

    class Counter(AgentMiddleware):
        state_schema = CountState

        def before_model(self, state: Any, runtime: Any) -> dict[str, Any]:
            return {
                "calls_in_thread": state.get("calls_in_thread", 0) + 1,
                "calls_in_run": state.get("calls_in_run", 0) + 1,
            }

    agent = create_deep_agent(
        model=GenericFakeChatModel(messages=iter([AIMessage(content="a"), AIMessage(content="b")])),
        middleware=[Counter()],
        checkpointer=MemoryCheckpointer(),
    )
    await agent.ainvoke("one", thread_id="t")
    second = await agent.ainvoke("two", thread_id="t")
    assert second["calls_in_thread"] == 2
    assert second["calls_in_run"] == 1


def test_langchains_human_in_the_loop_and_todo_list_become_deepactors_own() -> None:
    from deepactors.langchain import LangChainMiddleware

    agent = create_deep_agent(
        model=script(),
        tools=[add],
        middleware=[HumanInTheLoopMiddleware(interrupt_on={"add": True}), TodoListMiddleware()],
    )
    kinds = [type(mw) for mw in agent.spec.middleware]
    assert OwnHumanInTheLoop in kinds
    assert kinds.count(OwnTodoList) == 1  # in place of the default one
    assert not any(isinstance(mw, LangChainMiddleware) for mw in agent.spec.middleware)


def test_what_langchains_human_in_the_loop_has_and_deepactors_has_not_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="per_call"):
        create_deep_agent(
            model=script(),
            tools=[add],
            middleware=[
                HumanInTheLoopMiddleware(interrupt_on={"add": True}, interrupt_mode="per_call")
            ],
        )


def test_a_langchain_method_named_like_a_hook_that_is_none_is_refused() -> None:
    class Typo(AgentMiddleware):
        def before_tool(self, state: Any, runtime: Any) -> None:
            pass

    with pytest.raises(ConfigurationError, match="before_tool"):
        create_deep_agent(model=script(), middleware=[Typo()])


# -- deepactors' own AgentMiddleware, with LangChain's hook names ------------------------


async def test_deepactors_middleware_runs_langchains_async_hook_names() -> None:
    log: list[str] = []

    class Ported(OwnMiddleware):
        async def abefore_agent(self, state: Any, run: Any) -> None:
            log.append("before_agent")

        async def abefore_model(self, state: Any, run: Any) -> None:
            log.append("before_model")

        async def aafter_model(self, state: Any, run: Any) -> None:
            log.append("after_model")

        async def aafter_agent(self, state: Any, run: Any) -> None:
            log.append("after_agent")

        async def awrap_model_call(self, request: Any, handler: Any) -> Any:
            log.append("wrap_model_call")
            return await handler(request)

        async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
            log.append("wrap_tool_call")
            return await handler(request)

    def model(request: OwnRequest) -> Any:
        if len(request.messages) == 1:
            call = ToolCall(id="c1", name="add", args={"a": 1, "b": 2})
            return AssistantMessage(content="", tool_calls=[call])
        return "3"

    await create_own_agent(FunctionModel(model), tools=[add], middleware=[Ported()]).ainvoke("go")
    assert log == [
        "before_agent",
        "before_model",
        "wrap_model_call",
        "after_model",
        "wrap_tool_call",
        "before_model",
        "wrap_model_call",
        "after_model",
        "after_agent",
    ]


async def test_a_deepactors_guard_under_langchains_name_stops_the_run() -> None:
    class Guard(OwnMiddleware):
        async def abefore_model(self, state: Any, run: Any) -> None:
            raise PermissionError("refused")

    with pytest.raises(PermissionError, match="refused"):
        await create_own_agent(FunctionModel(lambda r: "hi"), middleware=[Guard()]).ainvoke("go")


def test_deepactors_middleware_refuses_unknown_hook_names_at_definition() -> None:
    with pytest.raises(ConfigurationError, match=r"before_tool.*hooks are"):

        class BeforeTool(OwnMiddleware):
            async def before_tool(self, state: Any, run: Any) -> None:
                pass

    with pytest.raises(ConfigurationError, match="did you mean 'before_model'"):

        class Misspelt(OwnMiddleware):
            async def befor_model(self, state: Any, run: Any) -> None:
                pass


def test_deepactors_middleware_refuses_a_sync_hook_and_a_hook_under_both_names() -> None:
    with pytest.raises(ConfigurationError, match="must be 'async def'"):

        class SyncHook(OwnMiddleware):
            def before_model(self, state: Any, run: Any) -> None:  # type: ignore[override]
                pass

    with pytest.raises(ConfigurationError, match="keep one"):

        class Both(OwnMiddleware):
            async def before_model(self, state: Any, run: Any) -> None:
                pass

            async def abefore_model(self, state: Any, run: Any) -> None:
                pass


def test_something_that_is_no_middleware_is_refused_with_what_to_give() -> None:
    with pytest.raises(ConfigurationError, match=r"langchain\.agents\.middleware"):
        create_own_agent(FunctionModel(lambda r: "hi"), middleware=[object()])  # type: ignore[list-item]
