"""AnthropicPromptCachingMiddleware: breakpoints in the request body, within the limit."""

from __future__ import annotations

from typing import Any

import pytest

from deepactors.errors import ConfigurationError
from deepactors.messages import AssistantMessage, ToolCall, ToolMessage, UserMessage
from deepactors.middleware._caching import AnthropicPromptCachingMiddleware
from deepactors.models import FunctionModel, ModelRequest
from deepactors.models.anthropic import CACHE_SETTING, AnthropicModel
from deepactors.tools import tool
from tests.anthropic.fake_api import FakeAnthropicAPI, message, text

pytestmark = pytest.mark.anyio


@tool
def read_file(path: str) -> str:
    """Read a file.

    Args:
        path: Which file.
    """
    return path


@tool
def write_file(path: str, content: str) -> str:
    """Write a file.

    Args:
        path: Which file.
        content: What to write.
    """
    return path


def conversation(turns: int) -> list[Any]:
    """A user question, then ``turns`` rounds of tool call + result."""
    messages: list[Any] = [UserMessage(content="Summarise the repo.")]
    for i in range(turns):
        call = ToolCall(id=f"toolu_{i}", name="read_file", args={"path": f"/f{i}"})
        messages.append(AssistantMessage(content=f"Reading f{i}.", tool_calls=[call]))
        messages.append(ToolMessage(tool_call_id=call.id, name="read_file", content=f"text {i}"))
    return messages


def breakpoints(body: dict[str, Any]) -> list[tuple[str, Any]]:
    """Where cache_control sits: ("tools", name), ("system", i), ("messages", (turn, block))."""
    found: list[tuple[str, Any]] = []
    for t in body.get("tools", []):
        if "cache_control" in t:
            found.append(("tools", t["name"]))
    for i, block in enumerate(body.get("system", [])):
        if "cache_control" in block:
            found.append(("system", i))
    for ti, turn in enumerate(body["messages"]):
        for bi, block in enumerate(turn["content"]):
            if "cache_control" in block:
                found.append(("messages", (ti, bi)))
    return found


async def through(mw: AnthropicPromptCachingMiddleware, request: ModelRequest) -> ModelRequest:
    seen: list[ModelRequest] = []

    async def handler(req: ModelRequest) -> AssistantMessage:
        seen.append(req)
        return AssistantMessage(content="ok")

    await mw.wrap_model_call(request, handler)
    return seen[0]


async def test_breakpoints_on_tools_system_and_newest_user_turns(api: FakeAnthropicAPI) -> None:
    api.reply(message(text("ok")))
    request = ModelRequest(
        messages=conversation(3), system_prompt="You are careful.", tools=[read_file, write_file]
    )
    mw = AnthropicPromptCachingMiddleware()
    async with AnthropicModel("claude-sonnet-5-5", api_key="k", base_url=api.base_url) as model:
        await model.generate(await through(mw, request))
    body = api.requests[0].body
    turns = body["messages"]
    last_user = len(turns) - 1
    assert breakpoints(body) == [
        ("tools", "write_file"),  # the last tool caches all tool definitions
        ("system", 0),
        ("messages", (last_user - 2, 0)),  # the previous call's end: read back
        ("messages", (last_user, 0)),  # this call's end: written
    ]
    assert turns[last_user]["content"][0]["type"] == "tool_result"
    assert turns[last_user]["content"][0]["cache_control"] == {"type": "ephemeral"}


@pytest.mark.parametrize(
    ("tools", "system", "wanted", "expected_messages"),
    [
        (True, True, 4, 2),  # tools + system leave room for 2
        (False, True, 4, 3),
        (False, False, 4, 4),
        (True, True, 0, 0),
    ],
)
def test_never_more_than_four_breakpoints(
    tools: bool, system: bool, wanted: int, expected_messages: int
) -> None:
    model = AnthropicModel("claude-sonnet-5-5", api_key="k")
    request = ModelRequest(
        messages=conversation(6),
        system_prompt="S" if system else None,
        tools=[read_file] if tools else (),
        settings={CACHE_SETTING: {"messages": wanted}},
    )
    body = model.build_body(request)
    found = breakpoints(body)
    assert len(found) <= 4
    assert sum(1 for kind, _ in found if kind == "messages") == expected_messages


def test_breakpoints_already_in_the_options_count_against_the_limit() -> None:
    model = AnthropicModel("claude-sonnet-5-5", api_key="k")
    request = ModelRequest(
        messages=conversation(4),
        system_prompt="S",
        tools=[read_file],
        settings={
            CACHE_SETTING: {"messages": 2},
            # The API's automatic caching breakpoint, asked for by hand.
            "anthropic_options": {"cache_control": {"type": "ephemeral"}},
        },
    )
    body = model.build_body(request)
    assert len(breakpoints(body)) == 3  # + the top-level one = 4


def test_one_hour_ttl_and_switches() -> None:
    model = AnthropicModel("claude-sonnet-5-5", api_key="k")
    mw = AnthropicPromptCachingMiddleware("1h", cache_tools=False, message_breakpoints=1)
    request = ModelRequest(messages=conversation(2), system_prompt="S", tools=[read_file])
    body = model.build_body(request.replace(settings={CACHE_SETTING: mw.cache_settings(request)}))
    assert [kind for kind, _ in breakpoints(body)] == ["system", "messages"]
    assert body["system"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}


async def test_min_messages_holds_back_message_breakpoints() -> None:
    mw = AnthropicPromptCachingMiddleware(min_messages=3)
    short = await through(mw, ModelRequest(messages=conversation(0), system_prompt="S"))
    long = await through(mw, ModelRequest(messages=conversation(1), system_prompt="S"))
    assert short.settings[CACHE_SETTING]["messages"] == 0
    assert long.settings[CACHE_SETTING]["messages"] == 2


async def test_without_the_middleware_nothing_is_marked(api: FakeAnthropicAPI) -> None:
    api.reply(message(text("ok")))
    async with AnthropicModel("claude-sonnet-5-5", api_key="k", base_url=api.base_url) as model:
        await model.generate(
            ModelRequest(messages=conversation(2), system_prompt="S", tools=[read_file])
        )
    assert breakpoints(api.requests[0].body) == []


async def test_is_a_no_op_for_other_models() -> None:
    """Only a setting is added; the conversation reaches any model unchanged."""
    request = ModelRequest(
        messages=conversation(2), system_prompt="S", tools=[read_file], settings={"x": 1}
    )
    passed = await through(AnthropicPromptCachingMiddleware(), request)
    assert passed.messages == request.messages
    assert passed.system_prompt == request.system_prompt
    assert passed.tools == request.tools
    assert passed.settings["x"] == 1
    model = FunctionModel(lambda req: "plain answer")
    assert (await model.generate(passed)).text == "plain answer"


def test_bad_arguments_are_configuration_errors() -> None:
    with pytest.raises(ConfigurationError):
        AnthropicPromptCachingMiddleware("10m")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError):
        AnthropicPromptCachingMiddleware(message_breakpoints=5)


def test_breakpoints_never_touch_the_callers_tools_or_system() -> None:
    server_tool = {"type": "web_search_20250305", "name": "web_search"}
    user_system = [{"type": "text", "text": "House rules."}]
    model = AnthropicModel("claude-sonnet-5-5", api_key="k", tools=[server_tool])
    request = ModelRequest(
        messages=conversation(3),
        system_prompt="S",
        tools=[read_file],
        settings={CACHE_SETTING: {"ttl": "1h"}, "anthropic_options": {"system": user_system}},
    )
    # Alone (no tools or system prompt of ours), the options' own objects get marked.
    alone = request.replace(system_prompt=None, tools=())
    assert len(breakpoints(model.build_body(alone))) == 4
    assert len(breakpoints(model.build_body(alone))) == 4
    first = model.build_body(request)
    second = model.build_body(request)
    assert server_tool == {"type": "web_search_20250305", "name": "web_search"}
    assert user_system == [{"type": "text", "text": "House rules."}]
    # Nothing carried over from the first call: the second places the same four.
    assert breakpoints(second) == breakpoints(first)
    assert len(breakpoints(second)) == 4
    # The options' tool and system are kept, after ours.
    assert [t["name"] for t in second["tools"]] == ["read_file", "web_search"]
    assert [b["text"] for b in second["system"]] == ["S", "House rules."]


@pytest.mark.parametrize("where", ["constructor", "settings"])
def test_a_string_system_option_joins_the_system_prompt(where: str) -> None:
    options = {"system": "You are terse."}
    model = AnthropicModel(
        "claude-sonnet-5-5", api_key="k", **(options if where == "constructor" else {})
    )
    settings: dict[str, Any] = {CACHE_SETTING: {}}
    if where == "settings":
        settings["anthropic_options"] = options
    body = model.build_body(
        ModelRequest(messages=conversation(1), system_prompt="Be careful.", settings=settings)
    )
    assert body["system"] == [
        {"type": "text", "text": "Be careful."},
        {"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}},
    ]
    assert options == {"system": "You are terse."}
    # Alone, it is sent as it is.
    body = model.build_body(ModelRequest(messages=conversation(1), settings=settings))
    assert body["system"] == [
        {"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}
    ]
