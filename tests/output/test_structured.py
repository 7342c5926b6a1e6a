"""``response_format``: a final answer that fits a schema, by tool or natively."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, Field
from typing_extensions import TypedDict  # pydantic needs it for TypedDicts before 3.12

from deepactors import (
    AssistantMessage,
    ProviderStrategy,
    StructuredOutputError,
    ToolCall,
    ToolMessage,
    ToolStrategy,
    UserMessage,
    create_deep_agent,
)
from deepactors.errors import ConfigurationError
from deepactors.middleware import StructuredOutputMiddleware
from deepactors.models import STRUCTURED_OUTPUT, FunctionModel, ModelRequest
from deepactors.models.anthropic import AnthropicModel
from deepactors.persistence import MemoryCheckpointer, SqliteCheckpointer
from tests.anthropic.conftest import MODEL_ID
from tests.anthropic.fake_api import FakeAnthropicAPI, message, text, tool_use
from tests.output.conftest import subagent, tool_results

pytestmark = pytest.mark.anyio


class Weather(BaseModel):
    """The weather in one city."""

    city: str
    celsius: float = Field(ge=-90, le=60)


@dataclasses.dataclass
class Verdict:
    ok: bool
    reasons: list[str]


class Point(TypedDict):
    x: int
    y: int


SCHEMA = {
    "title": "Tally",
    "type": "object",
    "properties": {"count": {"type": "integer", "minimum": 0}},
    "required": ["count"],
    "additionalProperties": False,
}


def answer_tool(name: str, args: dict[str, Any]) -> AssistantMessage:
    return AssistantMessage(tool_calls=[ToolCall(name=name, args=args)])


def scripted(*answers: AssistantMessage | str) -> FunctionModel:
    """A model replaying ``answers`` and recording each request."""
    queue = list(answers)
    requests: list[ModelRequest] = []

    def answer(request: ModelRequest) -> AssistantMessage | str:
        requests.append(request)
        return queue.pop(0)

    model = FunctionModel(answer)
    model.requests = requests  # type: ignore[attr-defined]
    return model


class NativeModel(FunctionModel):
    """A test model that takes a schema for its answer (``SupportsStructuredOutput``)."""

    native_structured_output = True


async def test_tool_strategy_answer_first_wrong_then_right() -> None:
    model = scripted(
        answer_tool("Weather", {"city": "Oslo"}),  # no celsius
        answer_tool("Weather", {"city": "Oslo", "celsius": 400}),  # out of range
        answer_tool("Weather", {"city": "Oslo", "celsius": 4.5}),
    )
    agent = create_deep_agent(model, response_format=Weather)
    result = await agent.ainvoke("weather in Oslo?")
    assert result["structured_response"] == Weather(city="Oslo", celsius=4.5)
    assert model.calls == 3  # the run ended on the valid answer, without another call
    answers = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert [m.status for m in answers] == ["error", "error", "success"]
    assert "celsius: Field required" in answers[0].text
    assert "celsius: Input should be less than or equal to 60" in answers[1].text
    assert json.loads(answers[2].text) == {"city": "Oslo", "celsius": 4.5}
    # The model saw the answer tool, with the schema's own JSON schema.
    tool = next(t for t in model.requests[0].tools if t.name == "Weather")  # type: ignore[attr-defined]
    assert tool.parameters["required"] == ["city", "celsius"]
    assert tool.description == "The weather in one city."


async def test_a_plain_text_answer_is_sent_back_until_the_tool_is_called() -> None:
    model = scripted("It is mild.", answer_tool("Weather", {"city": "Rome", "celsius": 18}))
    agent = create_deep_agent(model, response_format=ToolStrategy(Weather))
    result = await agent.ainvoke("weather in Rome?")
    assert result["structured_response"].celsius == 18
    nudge = next(
        m for m in result["messages"] if isinstance(m, UserMessage) and "`Weather`" in m.text
    )
    assert "without calling" in nudge.text


async def test_answers_that_keep_failing_raise_with_the_last_problem() -> None:
    model = scripted(*[answer_tool("Weather", {"city": "Oslo"})] * 3)
    agent = create_deep_agent(model, response_format=ToolStrategy(Weather, max_retries=2))
    with pytest.raises(StructuredOutputError, match="after 3 attempt") as info:
        await agent.ainvoke("weather?")
    assert "celsius: Field required" in info.value.last_error
    assert model.calls == 3


async def test_native_strategy_asks_for_the_schema_and_validates_the_text() -> None:
    requests: list[ModelRequest] = []
    answers = [
        '{"city": "Oslo"',
        '{"city": "Oslo", "celsius": "warm"}',
        '{"city": "Oslo", "celsius": 3}',
    ]

    def answer(request: ModelRequest) -> str:
        requests.append(request)
        return answers[len(requests) - 1]

    agent = create_deep_agent(NativeModel(answer), response_format=Weather)
    result = await agent.ainvoke("weather?")
    assert result["structured_response"] == Weather(city="Oslo", celsius=3)
    assert requests[0].settings[STRUCTURED_OUTPUT]["title"] == "Weather"
    assert "Weather" not in {t.name for t in requests[0].tools}  # no answer tool
    feedback = [m.text for m in result["messages"] if isinstance(m, UserMessage)][1:]
    assert "not valid JSON" in feedback[0]
    assert "celsius: Input should be a valid number" in feedback[1]


async def test_the_strategy_is_chosen_for_the_model_and_can_be_forced() -> None:
    plain = FunctionModel(lambda r: "x")
    assert StructuredOutputMiddleware(Weather, model=plain).strategy == "tool"
    assert (
        StructuredOutputMiddleware(Weather, model=NativeModel(lambda r: "x")).strategy == "native"
    )
    assert (
        StructuredOutputMiddleware(ToolStrategy(Weather), model=NativeModel(lambda r: "x")).strategy
        == "tool"
    )
    claude = AnthropicModel("claude-sonnet-4-5", api_key="k")
    assert StructuredOutputMiddleware(Weather, model=claude).strategy == "native"
    old = AnthropicModel("claude-3-5-haiku-latest", api_key="k")
    assert StructuredOutputMiddleware(Weather, model=old).strategy == "tool"
    with pytest.raises(ConfigurationError, match="no native structured output"):
        create_deep_agent(plain, response_format=ProviderStrategy(Weather))


@pytest.mark.parametrize(
    ("schema", "name", "args", "expected"),
    [
        (Verdict, "Verdict", {"ok": True, "reasons": ["fine"]}, Verdict(ok=True, reasons=["fine"])),
        (Point, "Point", {"x": 1, "y": 2}, {"x": 1, "y": 2}),
        (SCHEMA, "Tally", {"count": 3}, {"count": 3}),
    ],
)
async def test_dataclasses_typed_dicts_and_json_schemas_work_too(
    schema: Any, name: str, args: dict[str, Any], expected: Any
) -> None:
    model = scripted(answer_tool(name, {"wrong": 1}), answer_tool(name, args))
    result = await create_deep_agent(model, response_format=schema).ainvoke("go")
    assert result["structured_response"] == expected
    first_error = next(m for m in result["messages"] if isinstance(m, ToolMessage))
    assert first_error.status == "error"


def test_schemas_that_are_not_objects_or_broken_are_refused() -> None:
    model = FunctionModel(lambda r: "x")
    with pytest.raises(ConfigurationError, match="must describe a JSON object"):
        create_deep_agent(model, response_format={"type": "array", "items": {"type": "string"}})
    with pytest.raises(ConfigurationError, match="not a valid JSON schema"):
        create_deep_agent(model, response_format={"type": "object", "properties": 3})
    with pytest.raises(ConfigurationError, match="must be a pydantic model class"):
        create_deep_agent(model, response_format="Weather")
    with pytest.raises(ConfigurationError, match="max_retries"):
        create_deep_agent(model, response_format=ToolStrategy(Weather, max_retries=-1))


async def test_the_structured_response_round_trips_through_a_checkpoint(tmp_path: Path) -> None:
    saver = SqliteCheckpointer(tmp_path / "threads.db")
    model = scripted(answer_tool("Weather", {"city": "Oslo", "celsius": 4}))
    agent = create_deep_agent(model, response_format=Weather, checkpointer=saver)
    await agent.ainvoke("weather?", thread_id="t")
    saved = await agent.aget_state("t")
    assert saved["structured_response"] == Weather(city="Oslo", celsius=4)
    # A new question clears the last answer before the model is asked.
    again = create_deep_agent(
        scripted("no idea"),
        response_format=ToolStrategy(Weather, max_retries=0),
        checkpointer=saver,
    )
    with pytest.raises(StructuredOutputError):
        await again.ainvoke("and tomorrow?", thread_id="t")
    assert (await again.aget_state("t"))["structured_response"] is None


async def test_a_resumed_thread_keeps_its_answer_as_the_type() -> None:
    saver = MemoryCheckpointer()
    model = scripted(answer_tool("Verdict", {"ok": False, "reasons": ["x"]}))
    agent = create_deep_agent(model, response_format=Verdict, checkpointer=saver)
    await agent.ainvoke("judge", thread_id="v")
    assert (await agent.aget_state("v"))["structured_response"] == Verdict(ok=False, reasons=["x"])


async def test_a_subagent_with_a_response_format_returns_its_json_to_the_parent() -> None:
    def worker(request: ModelRequest) -> AssistantMessage:
        city = request.messages[0].text
        return answer_tool("Weather", {"city": city, "celsius": len(city)})

    def main(request: ModelRequest) -> AssistantMessage:
        if not tool_results(request):
            return AssistantMessage(
                tool_calls=[
                    ToolCall(name="task", args={"description": c, "subagent_type": "weather"})
                    for c in ("Oslo", "Lima")
                ]
            )
        return AssistantMessage(content="collected")

    agent = create_deep_agent(
        FunctionModel(main),
        subagents=[subagent("weather", FunctionModel(worker), response_format=Weather)],
    )
    result = await agent.ainvoke("weather in two cities")
    answers = [json.loads(m.text) for m in result["messages"] if isinstance(m, ToolMessage)]
    assert answers == [{"city": "Oslo", "celsius": 4.0}, {"city": "Lima", "celsius": 4.0}]
    assert result["structured_response"] is None  # the parent has no format of its own


async def test_native_structured_output_on_the_messages_api() -> None:
    with FakeAnthropicAPI() as api:
        api.reply(
            message(text('{"city": "Oslo", "celsius": 99}')),
            message(text('{"city": "Oslo", "celsius": 5.5}')),
        )
        model = AnthropicModel(MODEL_ID, api_key="k", base_url=api.base_url)
        async with model:
            agent = create_deep_agent(model, response_format=Weather)
            result = await agent.ainvoke("weather?")
        bodies = [r.body for r in api.requests]
    assert result["structured_response"] == Weather(city="Oslo", celsius=5.5)
    fmt = bodies[0]["output_config"]["format"]
    assert fmt["type"] == "json_schema"
    assert fmt["schema"]["additionalProperties"] is False
    assert set(fmt["schema"]["properties"]) == {"city", "celsius"}
    # The second request carried the first answer and what was wrong with it.
    last_user = bodies[1]["messages"][-1]["content"][-1]["text"]
    assert "celsius: Input should be less than or equal to 60" in last_user


async def test_the_tool_strategy_on_the_messages_api_for_a_model_without_native_output() -> None:
    with FakeAnthropicAPI() as api:
        api.reply(message(tool_use("Weather", {"city": "Oslo", "celsius": 1})))
        model = AnthropicModel(
            MODEL_ID, api_key="k", base_url=api.base_url, native_structured_output=False
        )
        async with model:
            result = await create_deep_agent(model, response_format=Weather).ainvoke("weather?")
        body = api.requests[0].body
    assert result["structured_response"] == Weather(city="Oslo", celsius=1)
    assert "output_config" not in body
    assert "Weather" in [t["name"] for t in body["tools"]]


async def test_the_demo_ends_with_a_structured_report() -> None:
    from deepactors.assembly.demo import ResearchReport, run_demo

    result = await run_demo(on_event=lambda event: None)
    report = result["structured_response"]
    assert isinstance(report, ResearchReport)
    assert report.report_path in result["files"]
    assert len(report.sources) == 3
    assert all(source in result["files"] for source in report.sources)
