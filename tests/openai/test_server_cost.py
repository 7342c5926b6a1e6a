"""The server's run metadata carries the tree's usage and cost (and its budget report)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from deepactors import create_deep_agent
from deepactors.models.openai import OpenAIModel
from deepactors.server import create_app
from tests.openai.fake_api import FakeOpenAI, answer, call
from tests.server.conftest import Served
from tests.server.conftest import serve as serve  # the fixture: uvicorn and hypercorn+trio

Serve = Callable[..., Served]


@pytest.mark.parametrize("api_kind", ["chat"])
def test_a_finished_runs_metadata_has_its_usage_and_cost(
    api: FakeOpenAI, serve: Serve, api_kind: str
) -> None:
    todos = {"todos": [{"content": "answer", "status": "completed"}]}
    api.reply(
        answer("", calls=[call("write_todos", todos)], usage={"input": 1000, "output": 100}),
        answer("done", usage={"input": 1000, "cached": 1000, "output": 100}),
    )
    model = OpenAIModel("gpt-5.5", api=api_kind, api_key="k", base_url=api.base_url)
    served = serve(create_app({"agent": create_deep_agent(model=model)}))
    client = served.client()
    thread_id = client.threads.create()["thread_id"]
    run = client.runs.create(
        thread_id, "agent", input={"messages": [{"role": "user", "content": "go"}]}
    )
    client.runs.join(thread_id, run["run_id"])
    usage = client.runs.get(thread_id, run["run_id"])["metadata"]["usage"]
    assert usage["requests"] == 2
    assert (usage["input_tokens"], usage["cache_read_tokens"], usage["output_tokens"]) == (
        2000,
        1000,
        200,
    )
    # gpt-5.5: $5 input, $0.50 cached input, $30 output per million tokens.
    assert usage["cost_usd"] == pytest.approx((2000 * 5 + 1000 * 0.5 + 200 * 30) / 1e6)
