"""deepagents' smaller options, ported (issue 42 item 5).

LangChain's ``ToolStrategy`` / ``ProviderStrategy`` as ``response_format``,
``system_prompt=SystemMessage(...)``, ``state_schema=`` and ``cache=``, provider
tool dicts, ``LocalShellBackend(root_dir=)``, ``get_graph().draw_mermaid_png()``,
and ``result["usage"].cost_usd`` for LangChain models.
"""

from __future__ import annotations

import base64
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Annotated, Any, NotRequired

import pytest
from langchain.agents.structured_output import AutoStrategy, ProviderStrategy, ToolStrategy
from langchain_core.messages import AIMessage
from langchain_core.messages import SystemMessage as LCSystemMessage
from langgraph.cache.memory import InMemoryCache
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore
from langgraph.types import Command as LGCommand
from pydantic import BaseModel

from deepactors import Budget
from deepactors import create_deep_agent as create_own_agent
from deepactors.backends import LocalShellBackend
from deepactors.errors import ConfigurationError, InvalidPath
from deepactors.langchain import DeepAgentState, create_deep_agent
from deepactors.messages import AssistantMessage, SystemMessage, ToolCall
from deepactors.models import FunctionModel, ModelRequest
from deepactors.models.anthropic import AnthropicModel
from deepactors.models.openai import OpenAIModel
from tests.anthropic.fake_api import FakeAnthropicAPI, message, text
from tests.compat.lc_fakes import GenericFakeChatModel
from tests.openai.fake_api import FakeOpenAI, answer

pytestmark = pytest.mark.anyio

langchain_openai = pytest.importorskip("langchain_openai")


class Weather(BaseModel):
    """A weather report."""

    city: str
    celsius: float


def reporting() -> GenericFakeChatModel:
    return GenericFakeChatModel(
        messages=iter(
            [
                AIMessage(
                    content="",
                    tool_calls=[
                        {"name": "Weather", "args": {"city": "Oslo", "celsius": 3.5}, "id": "w1"}
                    ],
                )
            ]
        )
    )


# -- response_format ------------------------------------------------------------------


@pytest.mark.parametrize("strategy", [ToolStrategy, AutoStrategy])
async def test_langchains_tool_and_auto_strategies_give_the_structured_response(
    strategy: Any,
) -> None:
    agent = create_deep_agent(model=reporting(), response_format=strategy(schema=Weather))
    result = await agent.ainvoke("Weather in Oslo?")
    assert result["structured_response"] == Weather(city="Oslo", celsius=3.5)


def test_langchains_provider_strategy_needs_a_model_with_native_structured_output() -> None:
    with pytest.raises(ConfigurationError, match="no native structured output; use ToolStrategy"):
        create_deep_agent(model=reporting(), response_format=ProviderStrategy(schema=Weather))


def test_langchains_strategy_options_without_a_counterpart_are_refused() -> None:
    with pytest.raises(ConfigurationError, match=r"max_retries=n"):
        create_deep_agent(
            model=reporting(), response_format=ToolStrategy(schema=Weather, handle_errors="Retry!")
        )
    with pytest.raises(ConfigurationError, match="tool_message_content"):
        create_deep_agent(
            model=reporting(),
            response_format=ToolStrategy(schema=Weather, tool_message_content="Done."),
        )


# -- system_prompt ----------------------------------------------------------------------


def prompt_seen() -> tuple[FunctionModel, list[str | None]]:
    seen: list[str | None] = []

    def answer_(request: ModelRequest) -> str:
        seen.append(request.system_prompt)
        return "ok"

    return FunctionModel(answer_), seen


@pytest.mark.parametrize(
    "prompt",
    [
        LCSystemMessage(content="Be brief."),
        LCSystemMessage(
            content=[{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}]
        ),
        SystemMessage(content="Be brief."),
    ],
    ids=["langchain-text", "langchain-blocks", "deepactors"],
)
async def test_a_system_message_is_the_system_prompt(prompt: Any) -> None:
    model, seen = prompt_seen()
    await create_own_agent(model, system_prompt=prompt).ainvoke("hi")
    assert seen[0] is not None
    assert seen[0].startswith("Be brief.")


def test_a_subagents_system_message_is_its_prompt_and_anything_else_is_refused() -> None:
    model, _ = prompt_seen()
    agent = create_own_agent(
        model,
        subagents=[
            {"name": "w", "description": "d", "system_prompt": LCSystemMessage(content="Sub.")}
        ],
    )
    task = next(mw for mw in agent.middleware if mw.name == "SubAgentMiddleware")
    assert task.specs["w"].agent.system_prompt.startswith("Sub.")
    with pytest.raises(ConfigurationError, match="system_prompt must be text or a SystemMessage"):
        create_own_agent(model, system_prompt=42)  # type: ignore[arg-type]


# -- state_schema and cache ------------------------------------------------------------------


class MyState(DeepAgentState):
    user_name: NotRequired[str]
    notes: NotRequired[Annotated[list[str], lambda a, b: [*a, *b]]]


async def test_state_schema_keys_are_channels_set_by_input_and_tools() -> None:
    def note(text: str) -> LGCommand:  # a plain function, returning LangGraph's Command
        """Keep a note."""
        return LGCommand(update={"notes": [text]})

    def model(request: ModelRequest) -> Any:
        if len(request.messages) == 1:
            calls = [ToolCall(id=f"n{i}", name="note", args={"text": f"n{i}"}) for i in range(2)]
            return AssistantMessage(content="", tool_calls=calls)
        return "noted"

    agent = create_deep_agent(model=FunctionModel(model), tools=[note], state_schema=MyState)
    result = await agent.ainvoke({"messages": [("user", "go")], "user_name": "ada"})
    assert result["user_name"] == "ada"
    assert sorted(result["notes"]) == ["n0", "n1"]  # the reducer folded both


def test_langgraphs_node_cache_is_refused_with_what_to_write() -> None:
    with pytest.raises(ConfigurationError, match="no graph nodes: drop it"):
        create_own_agent(FunctionModel(lambda r: "hi"), cache=InMemoryCache())


# -- provider tools ---------------------------------------------------------------------------


@pytest.fixture
def openai_api() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(default=lambda body: answer("searched")) as server:
        yield server
    assert server.invalid == []


def add(a: int, b: int) -> int:
    """Add."""
    return a + b


async def test_a_provider_tool_dict_reaches_openai_as_given(openai_api: FakeOpenAI) -> None:
    search = {"type": "web_search_preview"}
    own = OpenAIModel("gpt-5.5", api="responses", api_key="k", base_url=openai_api.base_url)
    async with own:
        await create_own_agent(own, tools=[search, add]).ainvoke("news?")
    tools = openai_api.requests[0].body["tools"]
    assert search in tools
    assert any(t.get("name") == "add" for t in tools)


async def test_a_provider_tool_dict_reaches_claude_as_given() -> None:
    search = {"type": "web_search_20250305", "name": "web_search", "max_uses": 2}
    with FakeAnthropicAPI(default=lambda body: message(text("searched"))) as api:
        async with AnthropicModel("claude-sonnet-5-5", api_key="k", base_url=api.base_url) as own:
            result = await create_own_agent(own, tools=[search]).ainvoke("news?")
    assert result["messages"][-1].text == "searched"
    assert search in api.requests[0].body["tools"]


def test_a_provider_tool_dict_is_bound_to_a_langchain_model_as_given() -> None:
    search = {"type": "web_search_preview"}
    agent = create_deep_agent(model=reporting(), tools=[search, add])
    bound = agent.model.runnable_for(list(agent.tools.values()))
    assert search in bound.kwargs["tools"]  # bind_tools got the dict itself


def test_a_tool_dict_without_a_type_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="needs a 'type'"):
        create_own_agent(FunctionModel(lambda r: "hi"), tools=[{"name": "x"}])


# -- LocalShellBackend, draw_mermaid_png, cost_usd --------------------------------------------


async def test_local_shell_backend_takes_deepagents_root_dir(tmp_path: Path) -> None:
    backend = LocalShellBackend(root_dir=tmp_path)
    result = await backend.execute("pwd")
    assert result.output.strip() == str(tmp_path)
    with pytest.raises(InvalidPath, match="virtual_mode=True"):
        LocalShellBackend(root_dir=tmp_path, virtual_mode=False)


def test_draw_mermaid_png_renders_through_langchains_renderer() -> None:
    asked: list[str] = []

    class Renderer(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.append(self.path)
            body = b"\x89PNG\r\n\x1a\nfake"
            self.send_response(200)
            self.send_header("Content-Type", "image/png")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Renderer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        graph = create_deep_agent(model=reporting()).get_graph()
        png = graph.draw_mermaid_png(base_url=f"http://127.0.0.1:{server.server_port}")
    finally:
        server.shutdown()
        server.server_close()
    assert png.startswith(b"\x89PNG")
    encoded = asked[0].split("/img/", 1)[1].split("?", 1)[0]
    assert base64.b64decode(encoded).decode() == graph.draw_mermaid()


async def test_a_langchain_models_usage_has_its_cost_as_a_budget_charges_it(
    openai_api: FakeOpenAI,
) -> None:
    openai_api.default = lambda body: answer("hi", usage={"input": 1000, "output": 100})
    chat = langchain_openai.ChatOpenAI(
        model="gpt-5.5", base_url=openai_api.base_url, api_key="k", max_retries=0
    )
    result = await create_deep_agent(model=chat).ainvoke("hi", budget=Budget(usd=1.0))
    cost = result["usage"].cost_usd
    assert cost == pytest.approx((1000 * 5 + 100 * 30) / 1e6)
    assert result["budget"].usd == pytest.approx(cost)


# -- LangGraph's checkpointers and stores ----------------------------------------------------


async def test_langgraphs_in_memory_saver_keeps_threads_shared_by_the_agents_given_it() -> None:
    saver = InMemorySaver()
    model, _ = prompt_seen()
    config = {"configurable": {"thread_id": "t"}}
    await create_deep_agent(model=model, checkpointer=saver).ainvoke("one", config)
    other = create_deep_agent(model=model, checkpointer=saver)
    state = await other.aget_state(config)
    assert [m.content for m in state.values["messages"]] == ["one", "ok"]


def test_other_langgraph_savers_and_stores_are_refused_with_the_fix() -> None:
    class FileSaver(BaseCheckpointSaver):  # type: ignore[type-arg]
        pass

    model, _ = prompt_seen()
    with pytest.raises(ConfigurationError, match="FileSaver cannot keep deepactors' threads"):
        create_own_agent(model, checkpointer=FileSaver())  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match=r"use deepactors' MemoryStore\(\)"):
        create_own_agent(model, store=InMemoryStore())  # type: ignore[arg-type]
