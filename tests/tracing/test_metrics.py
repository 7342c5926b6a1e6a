"""OpenTelemetry metrics of runs, read back from the SDK's in-memory reader."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from deepactors import AssistantMessage, ToolCall, Usage, create_deep_agent, open_runtime
from deepactors.models import FunctionModel, ModelRequest
from deepactors.tracing import Tracing

pytestmark = pytest.mark.anyio

USAGE = Usage(input_tokens=100, output_tokens=10, cost_usd=0.002)


def lookup(q: str) -> str:
    """Look up.

    Args:
        q: The query.
    """
    if q == "bad":
        raise ValueError("no such thing")
    return q


def points(reader: InMemoryMetricReader) -> dict[str, list[Any]]:
    data = reader.get_metrics_data()
    assert data is not None
    found: dict[str, list[Any]] = {}
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                found.setdefault(metric.name, []).extend(metric.data.data_points)
    return found


async def test_tokens_cost_tools_runs_and_actors_are_counted() -> None:
    def child(request: ModelRequest) -> AssistantMessage:
        if len(request.messages) == 1:
            return AssistantMessage(
                tool_calls=[
                    ToolCall(name="lookup", args={"q": "ok"}),
                    ToolCall(name="lookup", args={"q": "bad"}),
                ],
                usage=USAGE,
                model="child-model",
            )
        return AssistantMessage(content="found", usage=USAGE, model="child-model")

    def main(request: ModelRequest) -> AssistantMessage:
        if len(request.messages) == 1:
            calls = [
                ToolCall(name="task", args={"description": str(i), "subagent_type": "w"})
                for i in range(3)
            ]
            return AssistantMessage(tool_calls=calls, usage=USAGE)
        return AssistantMessage(content="done", usage=USAGE)

    worker = {
        "name": "w",
        "description": "w",
        "system_prompt": "w",
        "tools": [lookup],
        "model": FunctionModel(child, name="child-model"),
    }
    agent = create_deep_agent(FunctionModel(main, name="main-model"), subagents=[worker])
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    async with open_runtime(tracing=Tracing(meter_provider=meters)) as rt:
        await agent.ainvoke("go", runtime=rt)
    found = points(reader)

    tokens = found["gen_ai.client.token.usage"]
    by_kind = {
        (p.attributes["gen_ai.request.model"], p.attributes["gen_ai.token.type"]): p for p in tokens
    }
    # 2 calls of main, 2 of each of 3 children.
    assert by_kind[("main-model", "input")].count == 2
    assert by_kind[("main-model", "input")].sum == 200
    assert by_kind[("child-model", "output")].count == 6
    assert by_kind[("child-model", "output")].sum == 60
    durations = found["gen_ai.client.operation.duration"]
    assert sum(p.count for p in durations) == 8
    (cost,) = [
        p
        for p in found["deepactors.model.cost"]
        if p.attributes["gen_ai.request.model"] == "main-model"
    ]
    assert cost.value == pytest.approx(0.004)
    tools = {
        (p.attributes["gen_ai.tool.name"], p.attributes["deepactors.outcome"]): p.value
        for p in found["deepactors.tool.calls"]
    }
    assert tools == {("task", "success"): 3, ("lookup", "success"): 3, ("lookup", "error"): 3}
    (runs,) = found["deepactors.runs"]
    assert (runs.attributes["deepactors.outcome"], runs.value) == ("completed", 1)
    (active,) = found["deepactors.actors.active"]
    assert active.value == 0  # every actor that started ended
