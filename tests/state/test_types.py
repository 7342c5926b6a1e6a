"""Messages, state reducers and tool schemas: the pure parts of the core."""

from __future__ import annotations

import json
import threading
from typing import Literal

import pytest
from pydantic import BaseModel

from deepactors import AssistantMessage, InputError, ToolCall, ToolMessage, UserMessage, tool
from deepactors.context import RunContext, ToolRuntime
from deepactors.errors import ConfigurationError
from deepactors.messages import Message, TextBlock, to_message, to_messages
from deepactors.state import (
    REMOVE_ALL_MESSAGES,
    FileRecord,
    MessageList,
    RemoveMessage,
    State,
    add_messages,
    default_channels,
    validate_input,
)
from deepactors.tools import ToolArgumentsError, as_tool, tool_result_message


def test_messages_round_trip_through_json() -> None:
    history: list[Message] = [
        UserMessage(content="hi"),
        AssistantMessage(
            content=[TextBlock(text="let me look")],
            tool_calls=[ToolCall(name="search", args={"q": "x", "n": [1, 2]})],
        ),
        ToolMessage(tool_call_id="call_1", name="search", content="found", status="error"),
    ]
    data = json.loads(json.dumps([m.model_dump(mode="json") for m in history]))
    assert to_messages(data) == history


def test_plain_dicts_are_validated_at_the_edge() -> None:
    msg = to_message({"role": "user", "content": "hello"})
    assert isinstance(msg, UserMessage)
    assert msg.text == "hello"
    assert isinstance(to_message({"type": "human", "content": "x"}), UserMessage)
    with pytest.raises(InputError, match="role"):
        to_message({"role": "wizard", "content": "x"})
    with pytest.raises(InputError, match="content"):
        to_message({"role": "user"})
    with pytest.raises(InputError, match="list of messages"):
        to_messages({"role": "user", "content": "x"})  # type: ignore[arg-type]


def test_messages_reducer_appends_replaces_by_id_and_removes() -> None:
    a, b = UserMessage(content="a"), UserMessage(content="b")
    msgs = add_messages(MessageList(), [a, b])
    edited = a.model_copy(update={"content": "A"})
    add_messages(msgs, [edited])
    assert [m.text for m in msgs] == ["A", "b"]
    add_messages(msgs, [RemoveMessage(a.id), UserMessage(content="c")])
    assert [m.text for m in msgs] == ["b", "c"]
    add_messages(msgs, [RemoveMessage(REMOVE_ALL_MESSAGES), a])
    assert [m.text for m in msgs] == ["a"]
    assert msgs.index_of(a.id) == 0


def test_state_input_refuses_private_and_unknown_channels() -> None:
    channels = default_channels()
    with pytest.raises(InputError, match="cannot be set from input"):
        validate_input(channels, {"todos": []})
    with pytest.raises(InputError, match="unknown input key 'mesages'"):
        validate_input(channels, {"mesages": []})
    with pytest.raises(InputError, match="absolute"):
        validate_input(channels, {"files": {"notes.md": "x"}})
    values = validate_input(channels, {"files": {"/notes.md": "text"}, "messages": "hi"})
    assert values["files"]["/notes.md"].content == "text"
    assert values["files"]["/notes.md"].version == 1


def test_state_apply_reports_every_update_to_its_listener() -> None:
    seen = []
    state = State(default_channels(), listener=seen.append)
    record = FileRecord(content="x")
    state.apply({"files": {"/a": record}})
    state.apply({"files": {"/a": record.changed("y")}})
    assert state.files["/a"].content == "y"
    assert state.files["/a"].version == 2
    state.apply({"files": {"/a": None}})
    assert "/a" not in state.files
    assert len(seen) == 3
    with pytest.raises(KeyError, match="no channel 'nope'"):
        state.apply({"nope": 1})


class Point(BaseModel):
    x: int
    y: int


async def geo(place: str, points: list[Point], mode: Literal["fast", "exact"] = "fast") -> str:
    """Locate a place.

    Args:
        place: The name of the place,
            possibly with its country.
        points: Hints.
        mode: How hard to try.
    """
    return place


def test_tool_schema_comes_from_hints_and_docstring() -> None:
    t = as_tool(geo)
    assert t.name == "geo"
    assert t.description == "Locate a place."
    props = t.parameters["properties"]
    assert props["place"] == {
        "type": "string",
        "description": "The name of the place, possibly with its country.",
    }
    assert props["mode"]["enum"] == ["fast", "exact"]
    assert t.parameters["required"] == ["place", "points"]
    assert "title" not in t.parameters


def test_tool_arguments_are_validated_with_readable_errors() -> None:
    t = as_tool(geo)
    assert t.validate({"place": "Oslo", "points": [{"x": 1, "y": 2}]})["points"] == [
        Point(x=1, y=2)
    ]
    with pytest.raises(ToolArgumentsError, match="missing required argument 'points'"):
        t.validate({"place": "Oslo"})
    with pytest.raises(ToolArgumentsError, match="unexpected argument 'color'"):
        t.validate({"place": "Oslo", "points": [], "color": 1})
    with pytest.raises(ToolArgumentsError, match="mode"):
        t.validate({"place": "Oslo", "points": [], "mode": "slow"})


def test_tool_decorator_overrides_and_hides_the_runtime() -> None:
    @tool(name="lookup", description="Find things.")
    def find(query: str, runtime: ToolRuntime) -> str:
        return query

    assert find.name == "lookup"
    assert find.description == "Find things."
    assert find.runtime_param == "runtime"
    assert list(find.parameters["properties"]) == ["query"]
    with pytest.raises(ConfigurationError, match="name"):
        tool(name="bad name!")(find.fn)


def test_tool_results_become_messages() -> None:
    call = ToolCall(name="t")
    assert tool_result_message(call, "x").content == "x"
    assert tool_result_message(call, None).content == ""
    assert json.loads(tool_result_message(call, {"a": [1]}).text) == {"a": [1]}
    assert json.loads(tool_result_message(call, Point(x=1, y=2)).text) == {"x": 1, "y": 2}
    blocks = tool_result_message(call, [TextBlock(text="a")]).content
    assert blocks == [TextBlock(text="a")]


@pytest.mark.anyio
async def test_sync_tools_run_in_a_worker_thread() -> None:
    loop_thread = threading.get_ident()

    def where() -> int:
        """Report the thread."""
        return threading.get_ident()

    ran_on = await as_tool(where).call({})
    assert ran_on != loop_thread


@pytest.mark.anyio
async def test_runtime_is_injected_into_tools_that_ask() -> None:
    @tool
    async def whoami(runtime: ToolRuntime) -> str:
        """Say the caller's path."""
        return f"{runtime.path}:{runtime.tool_call_id}"

    state = State(default_channels())
    rt = ToolRuntime(state=state, tool_call_id="c1", run=RunContext(path="main/x", run_id="r"))
    assert await whoami.call({}, rt) == "main/x:c1"
