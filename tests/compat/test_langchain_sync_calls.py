"""Sync calls with LangChain chat models, any number of times (issue 42 item 1).

``ChatOpenAI`` and ``ChatAnthropic`` keep an async HTTP client for later calls
(langchain-openai in a process-wide cache); with a fresh event loop per sync call
every second call found it bound to a closed loop ("Event loop is closed"). The
sync API now runs every call on one kept loop per backend, from any thread.
The servers are the SDK adapters' local test servers.
"""

from __future__ import annotations

import contextvars
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.messages import AIMessage

from deepactors import create_deep_agent as create_own_agent
from deepactors.langchain import create_deep_agent
from deepactors.messages import AssistantMessage, ToolCall
from deepactors.models import FunctionModel, ModelRequest
from deepactors.models.anthropic import AnthropicModel
from tests.anthropic.fake_api import FakeAnthropicAPI, message, text
from tests.openai.fake_api import FakeOpenAI, answer
from tests.waiting import wait_until_sync

langchain_openai = pytest.importorskip("langchain_openai")
langchain_anthropic = pytest.importorskip("langchain_anthropic")

CALLS = 5


@pytest.fixture
def openai_api() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(default=lambda body: answer("hello from openai")) as server:
        yield server
    assert server.invalid == []


@pytest.fixture
def anthropic_api() -> Iterator[FakeAnthropicAPI]:
    with FakeAnthropicAPI(default=lambda body: message(text("hello from anthropic"))) as server:
        yield server


def chat_openai(api: FakeOpenAI) -> Any:
    return langchain_openai.ChatOpenAI(
        model="gpt-5.5", base_url=api.base_url, api_key="sk-test", max_retries=0
    )


def chat_anthropic(api: FakeAnthropicAPI) -> Any:
    return langchain_anthropic.ChatAnthropic(
        model="claude-sonnet-5-5", base_url=api.base_url, api_key="test-key", max_retries=0
    )


def five_sync_calls(agent: Any, expected: str) -> None:
    for i in range(CALLS):
        if i % 2 == 0:
            result = agent.invoke({"messages": [{"role": "user", "content": f"call {i}"}]})
            last = result["messages"][-1]
        else:
            parts = list(agent.stream({"messages": [("user", f"call {i}")]}, stream_mode="values"))
            last = parts[-1]["messages"][-1]
        assert isinstance(last, AIMessage)
        assert last.text == expected, f"call {i + 1}"


def test_five_sync_calls_in_a_row_with_chatopenai(openai_api: FakeOpenAI) -> None:
    five_sync_calls(create_deep_agent(model=chat_openai(openai_api)), "hello from openai")
    assert len(openai_api.requests) == CALLS


def test_five_sync_calls_in_a_row_with_chatanthropic(anthropic_api: FakeAnthropicAPI) -> None:
    five_sync_calls(create_deep_agent(model=chat_anthropic(anthropic_api)), "hello from anthropic")
    assert len(anthropic_api.requests) == CALLS


def test_sync_calls_from_many_threads_at_once_share_the_model(openai_api: FakeOpenAI) -> None:
    agent = create_deep_agent(model=chat_openai(openai_api))
    answers: list[str] = []
    errors: list[BaseException] = []

    def call() -> None:
        try:
            for _ in range(2):
                answers.append(agent.invoke("hi")["messages"][-1].content)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=call) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert answers == ["hello from openai"] * 8


@pytest.mark.anyio
async def test_sync_calls_inside_a_running_loop_then_on_trio(openai_api: FakeOpenAI) -> None:
    # A notebook cell is sync code on a thread whose own loop is running.
    agent = create_deep_agent(model=chat_openai(openai_api))
    for backend in ("asyncio", "asyncio", "trio", "asyncio"):
        assert agent.invoke("hi", backend=backend)["messages"][-1].content == "hello from openai"


VAR: contextvars.ContextVar[str] = contextvars.ContextVar("VAR", default="unset")


def test_a_sync_call_sees_the_callers_context_variables() -> None:
    seen: list[str] = []

    def answer_with_var(request: ModelRequest) -> str:
        seen.append(VAR.get())
        return "ok"

    agent = create_own_agent(FunctionModel(answer_with_var))
    token = VAR.set("the caller's")
    try:
        agent.invoke("go")
        list(agent.stream("go"))
    finally:
        VAR.reset(token)
    assert seen == ["the caller's", "the caller's"]


@pytest.mark.parametrize("call", ["invoke", "stream"])
def test_ctrl_c_cancels_the_call_on_the_kept_loop(call: str) -> None:
    # Ctrl-C while the caller waits: the run is cancelled on the loop (its
    # cleanup runs) before KeyboardInterrupt reaches the caller, and the next
    # call works.
    script = textwrap.dedent(
        f"""
        import os, signal, threading
        import anyio
        from deepactors import create_deep_agent
        from deepactors.models import FunctionModel

        started = threading.Event()
        cleaned = []

        async def slow(request):
            if request.messages[-1].text == "again":
                return "fine"
            started.set()
            try:
                await anyio.sleep_forever()  # until Ctrl-C cancels the run
            finally:
                cleaned.append(True)
            return "late"

        agent = create_deep_agent(FunctionModel(slow))
        threading.Thread(
            target=lambda: started.wait(30) and os.kill(os.getpid(), signal.SIGINT)
        ).start()
        try:
            if {call!r} == "invoke":
                agent.invoke("go")
            else:
                list(agent.stream("go"))
        except KeyboardInterrupt:
            print("interrupted", cleaned)
        print(agent.invoke("again")["messages"][-1].text)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.split("\n")[:2] == ["interrupted [True]", "fine"]


def test_a_sync_call_from_the_kept_loop_itself_does_not_wait_for_itself() -> None:
    # A sync tool runs in a worker thread; this async tool calls the sync API on
    # the kept loop's own thread, which must not wait for itself.
    inner = create_own_agent(FunctionModel(lambda request: "inner"))

    async def nested() -> str:
        """Ask the inner agent."""
        return str(inner.invoke("x")["messages"][-1].text)

    def outer_model(request: ModelRequest) -> Any:
        if len(request.messages) == 1:
            return AssistantMessage(content="", tool_calls=[ToolCall(id="c1", name="nested")])
        return f"got {request.messages[-1].text}"

    outer = create_own_agent(FunctionModel(outer_model), tools=[nested])
    assert outer.invoke("go")["messages"][-1].text == "got inner"


def test_a_models_client_is_closed_when_the_last_sync_call_using_it_ends(
    anthropic_api: FakeAnthropicAPI,
) -> None:
    # deepactors' own model keeps its HTTP client per loop; on the kept loop it
    # would live as long as the process without this.
    model = AnthropicModel("claude-sonnet-5-5", api_key="k", base_url=anthropic_api.base_url)
    agent = create_own_agent(model)
    for _ in range(3):
        assert agent.invoke("hi")["messages"][-1].text == "hello from anthropic"
        # The server sees a closed connection a moment after the client closed it.
    wait_until_sync(lambda: anthropic_api.open_connections == 0, what="every connection closed")
    # Two threads at once: the first to finish does not close the client the other uses.
    anthropic_api.default = lambda body: message(text("slow"), delay=0.3)
    answers: list[str] = []
    threads = [
        threading.Thread(target=lambda: answers.append(agent.invoke("hi")["messages"][-1].text))
        for _ in range(2)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert answers == ["slow", "slow"]
    # The server sees a closed connection a moment after the client closed it.
    wait_until_sync(lambda: anthropic_api.open_connections == 0, what="every connection closed")
