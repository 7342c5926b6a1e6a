"""Budget(usd=...): a whole tree's spending in dollars, at the models' prices, never overshot."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from deepactors import Budget, create_deep_agent
from deepactors.budget import PICO, BudgetLedger, Hold
from deepactors.errors import BudgetExceeded, ConfigurationError
from deepactors.events import BudgetExhausted, Event
from deepactors.messages import ToolMessage, Usage
from deepactors.models import FunctionModel, register_profile
from deepactors.models.openai import OpenAIModel
from deepactors.models.profiles import ModelPrices, ModelProfile
from tests.openai.bodies import first_user_text, tool_names, tool_outputs
from tests.openai.fake_api import Answer, FakeOpenAI, answer, call

pytestmark = pytest.mark.anyio

CHILDREN = 20
PRICES = ModelPrices(input=1.0, output=10.0, cached_input=0.1)
USAGE = {"input": 3000, "output": 150}
CALL_COST = (3000 * 1.0 + 150 * 10.0) / 1e6  # $0.0045: 20 children would pass $0.05


@pytest.fixture
def priced() -> Iterator[str]:
    register_profile("budget-test-model", ModelProfile(context_window=200_000, prices=PRICES))
    yield "budget-test-model"
    register_profile("budget-test-model", None)


def brain(body: dict[str, Any]) -> Answer:
    if "task" not in tool_names(body):
        return answer(f"done: {first_user_text(body)}", usage=USAGE)
    if not tool_outputs(body):
        tasks = [
            call("task", {"description": f"topic {i}", "subagent_type": "general-purpose"})
            for i in range(CHILDREN)
        ]
        return answer("", calls=tasks, usage=USAGE)
    return answer("summary", usage=USAGE)


async def test_a_dollar_budget_stops_twenty_parallel_children_before_it_is_passed(
    api: FakeOpenAI, api_kind: Any, priced: str
) -> None:
    api.default = brain
    model = OpenAIModel(priced, api=api_kind, api_key="k", base_url=api.base_url, max_tokens=200)
    agent = create_deep_agent(model=model)
    seen: list[Event] = []
    async with model:
        with anyio.fail_after(30):
            async with agent.astream("research", budget=Budget(usd=0.05)) as events:
                async for event in events:
                    seen.append(event)
    result = events.result
    # What the server billed, counted on its side: every answered request.
    billed = len(api.requests) * CALL_COST
    assert billed <= 0.05
    assert result["budget"].usd == pytest.approx(billed)
    assert result["usage"].cost_usd == pytest.approx(billed)
    # It stopped because the next call could have passed the limit, not long before.
    assert billed > 0.05 - 3 * 0.0125
    assert result["budget"].exhausted == ("usd",)
    refused = [e for e in seen if isinstance(e, BudgetExhausted)]
    assert refused
    assert all(e.resource == "usd" and e.limit == 0.05 for e in refused)
    failed = [m for m in result["messages"] if isinstance(m, ToolMessage) and "budget" in m.text]
    assert failed  # the children that were stopped say why


def test_a_ledger_reserves_the_worst_price_and_charges_the_real_one() -> None:
    rates = PRICES.per_token_pico()
    assert rates == (1_000_000, 10_000_000, 100_000, 1_000_000)
    ledger = BudgetLedger(Budget(usd=0.01))
    hold = ledger.try_reserve(1000, 2000, rates)
    # $0.001 of input and $0.02 of output do not fit: output is cut to what is left.
    assert hold == Hold(1000, 900, 1000 * 1_000_000 + 900 * 10_000_000, rates)
    ledger.settle(hold, Usage(input_tokens=500, cache_read_tokens=500, output_tokens=100))
    assert ledger.usd == 500 * 1_000_000 + 500 * 100_000 + 100 * 10_000_000
    assert ledger.report().usd == pytest.approx(0.00155)
    assert ledger.try_reserve(1000, 2000, None).resource == "usd"  # type: ignore[union-attr]
    spend_all = ledger.try_reserve(0, 10_000, rates)
    assert isinstance(spend_all, Hold)
    ledger.settle(spend_all, None)  # cut off: charged in full
    assert ledger.usd <= 0.01 * PICO
    assert ledger.try_reserve(0, 1, rates).resource == "usd"  # type: ignore[union-attr]


async def test_a_model_without_prices_is_refused_under_a_dollar_budget() -> None:
    agent = create_deep_agent(model=FunctionModel(lambda request: "hi", name="unpriced"))
    result = await agent.ainvoke("hello", budget=Budget(usd=1))
    assert "no known prices" in result["messages"][-1].text
    with pytest.raises(ConfigurationError, match="usd"):
        Budget(usd=-1)
    with pytest.raises(BudgetExceeded):
        raise BudgetExceeded("x", resource="usd", limit=1.0, spent=0.5)


async def test_a_model_that_sends_no_max_tokens_is_sent_the_one_reserved(
    api: FakeOpenAI, api_kind: Any
) -> None:
    api.reply(answer("hi"))
    model = OpenAIModel("house-model", api=api_kind, api_key="k", base_url=api.base_url)
    assert model.max_tokens is None  # no profile: the server would decide
    async with model:
        await create_deep_agent(model=model).ainvoke("hello", budget=Budget(output_tokens=3000))
    body = api.requests[0].body
    sent = body.get("max_completion_tokens", body.get("max_output_tokens"))
    assert sent == 3000
