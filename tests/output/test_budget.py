"""Tree-wide budgets: parallel children reserve before each call and never overshoot."""

from __future__ import annotations

import random
from typing import Any

import anyio
import pytest

from deepactors import (
    AssistantMessage,
    Budget,
    BudgetReport,
    InputError,
    SystemMessage,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
    create_deep_agent,
    events,
    open_runtime,
    tool,
)
from deepactors.actors._budget import reserve
from deepactors.budget import (
    DEFAULT_OUTPUT_RESERVATION,
    BudgetLedger,
    Hold,
    Refusal,
    estimate_input_tokens,
    message_tokens,
    messages_tokens,
)
from deepactors.context import RunContext
from deepactors.errors import ConfigurationError, OverloadedError
from deepactors.history import MessageList
from deepactors.models import FunctionModel, ModelRequest
from tests.output.conftest import (
    MaxTokensModel,
    fan_out,
    lookup,
    looping_model,
    subagent,
    tool_results,
)

pytestmark = pytest.mark.anyio


def fan_out_then_report(n: int) -> FunctionModel:
    def answer(request: ModelRequest) -> AssistantMessage:
        if not tool_results(request):
            return fan_out(n)
        return AssistantMessage(content="report")

    return FunctionModel(answer, name="main")


async def collect(agent: Any, *args: Any, **kwargs: Any) -> tuple[dict[str, Any], list[Any]]:
    seen: list[Any] = []
    with anyio.fail_after(10):
        async with agent.astream(*args, **kwargs) as stream:
            async for event in stream:
                seen.append(event)
    return stream.result, seen


async def test_twenty_parallel_children_never_make_more_model_calls_than_the_budget() -> None:
    worker = looping_model(10, latency=0.001)
    main = fan_out_then_report(20)
    agent = create_deep_agent(
        main, tools=[lookup], subagents=[subagent("worker", worker)], max_concurrent_subagents=20
    )
    result, seen = await collect(agent, "go", budget=Budget(model_calls=50))
    # Counted by the test models themselves: the budget is used up exactly, never more.
    assert main.calls + worker.calls == 50
    report = result["budget"]
    assert isinstance(report, BudgetReport)
    assert report.model_calls == 50
    assert report.exhausted == ("model_calls",)
    # The run ended cleanly, saying why; every child that was refused said so.
    final = result["messages"][-1]
    assert isinstance(final, AssistantMessage)
    assert final.stop_reason == "budget_exhausted"
    assert "budget is spent" in final.text
    task_results = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert len(task_results) == 20
    refused = [m for m in task_results if m.status == "error"]
    assert refused
    for m in task_results:
        assert m.status == "success" or "budget is spent" in m.text, m.text
    # Each refusal was an event naming the actor whose call was not made.
    exhausted = [e for e in seen if isinstance(e, events.BudgetExhausted)]
    assert {e.path for e in exhausted} >= {"main"}
    assert len(exhausted) == len(refused) + 1
    assert all(e.resource == "model_calls" and e.limit == 50 for e in exhausted)
    finished = [e for e in seen if isinstance(e, events.RunFinished)][-1]
    assert finished.outcome == "completed"


async def test_a_token_budget_is_never_exceeded_when_usage_stays_within_max_tokens() -> None:
    def work(request: ModelRequest) -> AssistantMessage:
        done = len(tool_results(request))
        if done < 4:
            return AssistantMessage(tool_calls=[ToolCall(name="lookup", args={"key": "k"})])
        return AssistantMessage(content="done")

    def input_used(request: ModelRequest) -> int:
        # A real count below the (high-erring) estimate, as a tokenizer's would be.
        return estimate_input_tokens(request.messages, request.system_prompt, request.tools) // 3

    worker = MaxTokensModel(work, max_tokens=300, input_tokens=input_used, name="worker")
    main = MaxTokensModel(
        lambda r: fan_out(8) if not tool_results(r) else AssistantMessage(content="report"),
        max_tokens=300,
        input_tokens=input_used,
        name="main",
    )
    agent = create_deep_agent(
        main, tools=[lookup], subagents=[subagent("worker", worker)], max_concurrent_subagents=8
    )
    budget = Budget(output_tokens=2_000, input_tokens=60_000)
    with anyio.fail_after(10):
        result = await agent.ainvoke("go", budget=budget)
    reported = main.reported + worker.reported
    assert reported.output_tokens <= 2_000
    assert reported.input_tokens <= 60_000
    report = result["budget"]
    assert report.output_tokens == reported.output_tokens
    assert report.input_tokens == reported.input_tokens
    assert result["usage"].output_tokens == reported.output_tokens
    # The budget was the binding limit: calls near the end got a smaller max_tokens.
    assert report.exhausted
    assert min(worker.seen_max_tokens + main.seen_max_tokens) < 300
    assert result["messages"][-1].stop_reason == "budget_exhausted"


async def test_a_call_that_does_not_fit_beside_calls_in_flight_waits_for_them() -> None:
    ledger = BudgetLedger(Budget(output_tokens=500))
    first = ledger.try_reserve(0, 300)
    assert first == Hold(0, 300)
    blocked = ledger.try_reserve(0, 300)
    assert isinstance(blocked, anyio.Event)
    got: list[Hold | Refusal | anyio.Event] = []

    async def waiter() -> None:
        await blocked.wait()
        got.append(ledger.try_reserve(0, 300))

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(waiter)
            await anyio.wait_all_tasks_blocked()
            assert not got  # still waiting: the first call holds 300 of the 500
            ledger.settle(first, Usage(output_tokens=120))
    # 380 are left: the waiting call gets its 300.
    assert got == [Hold(0, 300)]
    assert ledger.output_tokens == 120


def test_a_call_that_could_never_fit_is_refused_and_the_rest_is_granted_clamped() -> None:
    ledger = BudgetLedger(Budget(output_tokens=500, input_tokens=1_000, model_calls=3))
    hold = ledger.try_reserve(900, 300)
    assert isinstance(hold, Hold)
    ledger.settle(hold, Usage(input_tokens=800, output_tokens=450))
    # 50 output tokens are left: the next call may write at most 50.
    assert ledger.try_reserve(100, 300) == Hold(100, 50)
    refusal = ledger.try_reserve(500, 10)
    assert isinstance(refusal, Refusal)
    assert (refusal.resource, refusal.limit, refusal.spent) == ("input_tokens", 1_000, 800)
    assert ledger.report().exhausted == ("input_tokens",)


def test_a_ledger_inside_another_charges_both_and_refuses_at_its_own_limit() -> None:
    tree = BudgetLedger(Budget(model_calls=10))
    child = BudgetLedger(Budget(model_calls=2), parent=tree)
    for _ in range(2):
        hold = child.try_reserve(0, 0)
        assert isinstance(hold, Hold)
        child.settle(hold, None)
    refusal = child.try_reserve(0, 0)
    assert isinstance(refusal, Refusal)
    assert refusal.scope == "subagent"
    assert "this subagent's own budget is spent" in str(refusal.error("the call"))
    assert tree.model_calls == 2
    assert tree.report().exhausted == ()


async def test_a_subagents_own_budget_is_carved_out_of_its_parents() -> None:
    worker = looping_model(5)
    main = fan_out_then_report(1)
    agent = create_deep_agent(
        main,
        tools=[lookup],
        subagents=[subagent("worker", worker, budget=Budget(model_calls=2))],
    )
    result = await agent.ainvoke("go", budget=Budget(model_calls=20))
    (task,) = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert task.status == "error"
    assert "this subagent's own budget is spent: 2 of 2 model calls" in task.text
    assert worker.calls == 2
    # The child's calls count against the run's budget too; the run went on.
    assert result["budget"].model_calls == 4
    assert result["messages"][-1].text == "report"


async def test_a_subagent_budget_works_without_a_budget_on_the_run() -> None:
    worker = looping_model(5)
    agent = create_deep_agent(
        fan_out_then_report(2),
        tools=[lookup],
        subagents=[subagent("worker", worker, budget=Budget(model_calls=3))],
    )
    result = await agent.ainvoke("go")
    assert worker.calls == 6
    assert result["budget"] is None
    assert all("budget is spent" in m.text for m in result["messages"] if m.role == "tool")


async def test_the_tool_call_budget_refuses_calls_past_it_with_an_error_result() -> None:
    ran: list[str] = []

    async def note(text: str) -> str:
        """Note something.

        Args:
            text: What to note.
        """
        ran.append(text)
        return "noted"

    def answer(request: ModelRequest) -> AssistantMessage:
        if not tool_results(request):
            return AssistantMessage(
                tool_calls=[ToolCall(name="note", args={"text": t}) for t in "abc"]
            )
        return AssistantMessage(content="done")

    agent = create_deep_agent(FunctionModel(answer), tools=[note])
    result, seen = await collect(agent, "go", budget=Budget(tool_calls=2))
    # Which two ran depends on the order the loop starts them in; two did.
    assert len(ran) == 2
    statuses = [m.status for m in result["messages"] if isinstance(m, ToolMessage)]
    assert sorted(statuses) == ["error", "success", "success"]
    refused = next(m for m in result["messages"] if m.role == "tool" and m.status == "error")
    assert "2 of 2 tool calls used" in refused.text
    assert result["messages"][-1].text == "done"
    assert result["budget"].tool_calls == 2
    assert [e.resource for e in seen if isinstance(e, events.BudgetExhausted)] == ["tool_calls"]


async def test_a_failed_request_counts_as_a_call_but_costs_no_tokens() -> None:
    attempts = 0

    def flaky(request: ModelRequest) -> AssistantMessage:
        nonlocal attempts
        attempts += 1
        if attempts == 1:
            raise OverloadedError("busy", retry_after=0)
        return AssistantMessage(content="ok", usage=Usage(input_tokens=5, output_tokens=7))

    agent = create_deep_agent(FunctionModel(flaky))
    result = await agent.ainvoke("go", budget=Budget(model_calls=5, output_tokens=10_000))
    assert result["budget"].model_calls == 2
    assert result["budget"].output_tokens == 7


async def test_runtime_start_takes_a_budget_and_bad_budgets_are_refused_up_front() -> None:
    model = looping_model(3)
    agent = create_deep_agent(model, tools=[lookup])
    async with open_runtime() as rt:
        handle = await rt.thread(agent).start("go", budget=Budget(model_calls=1))
        result = await handle.result()
        assert result["budget"].model_calls == 1
        with pytest.raises(InputError, match=r"deepactors\.Budget"):
            await rt.thread(agent).start("go", budget={"model_calls": 1})  # type: ignore[arg-type]
    assert model.calls == 1
    with pytest.raises(ConfigurationError, match="model_calls"):
        Budget(model_calls=-1)
    with pytest.raises(ConfigurationError, match="tool_calls"):
        Budget(tool_calls=True)
    with pytest.raises(InputError):
        await agent.ainvoke("go", budget=3)  # type: ignore[arg-type]
    assert model.calls == 1


def test_the_estimate_errs_high_for_non_ascii_text_too() -> None:
    ascii_only = estimate_input_tokens([UserMessage(content="abcd")], None, [])
    accented = estimate_input_tokens([UserMessage(content="ééée")], None, [])
    assert accented - ascii_only == 3  # three 2-byte characters


def test_each_reservation_holds_the_full_estimate_of_its_request() -> None:
    """The estimate is kept per run and grows by the new messages only; a replace,
    a summary's rewrite or a request that is not the history's view is measured
    whole. Every hold equals the estimate of the whole request, whatever the path."""
    ledger = BudgetLedger(Budget(input_tokens=10**9))
    run = RunContext(path="main", run_id="r")
    model = FunctionModel(lambda r: AssistantMessage(content="x"))
    history = MessageList([UserMessage(content="héllo")])
    tools = (tool(lookup),)

    def held(messages: Any, prompt: str | None = "Be brief.", tools: Any = tools) -> None:
        request = ModelRequest(messages=messages, system_prompt=prompt, tools=tools, run=run)
        reserved = reserve(ledger, request, model)
        assert isinstance(reserved, tuple)
        hold, sent = reserved
        assert sent is request
        assert hold.input_tokens == estimate_input_tokens(messages, prompt, tools)
        ledger.settle(hold, None)

    held(history.view())
    call = ToolCall(name="lookup", args={"key": "ü", "n": [1, True]})
    history.put(AssistantMessage(tool_calls=[call]))
    history.put(ToolMessage(tool_call_id=call.id, name="lookup", content="value"))
    held(history.view())
    held(history.view(), prompt="Another prompt.")  # the prompt changed: measured again
    held(history.view(), tools=list(tools))  # a list of tools: measured each time
    history.put(UserMessage(id=history[0].id, content="a much longer first message"))
    held(history.view())  # replaced in place: the whole history again
    held([SystemMessage(content="summary"), *history[2:]])  # not the history's view
    held(history.view())
    history.put(UserMessage(content="more"))
    held(list(history))  # a plain list that extends the last one
    held(history.view(), prompt=None, tools=())


def test_the_output_reservation_is_the_calls_max_tokens_else_the_models_else_the_default() -> None:
    ledger = BudgetLedger(Budget(output_tokens=10**9))
    run = RunContext(path="main", run_id="r")

    class Capped:  # SupportsMaxTokens without subclassing anything
        max_tokens = 700

    class Odd(int):
        pass

    def held(settings: dict[str, Any], model: Any) -> int:
        request = ModelRequest(messages=[UserMessage(content="hi")], settings=settings, run=run)
        reserved = reserve(ledger, request, model)
        assert isinstance(reserved, tuple)
        hold, _ = reserved
        ledger.settle(hold, None, charge=False)
        return hold.output_tokens

    plain = FunctionModel(lambda r: AssistantMessage(content="x"))
    assert held({"max_tokens": 50}, Capped()) == 50  # the call's own
    assert held({"max_tokens": Odd(60)}, Capped()) == 60  # an int subclass is an int
    assert held({}, Capped()) == 700  # the model's
    assert held({}, plain) == DEFAULT_OUTPUT_RESERVATION
    # A setting that is not a positive whole number: the model's, else the default.
    for bad in (0, -5, True, "100", 1.5):
        assert held({"max_tokens": bad}, Capped()) == 700
        assert held({"max_tokens": bad}, plain) == DEFAULT_OUTPUT_RESERVATION
    capped = Capped()
    capped.max_tokens = True  # type: ignore[assignment]
    assert held({}, capped) == DEFAULT_OUTPUT_RESERVATION


@pytest.mark.parametrize("seed", range(5))
def test_a_budget_of_one_level_decides_as_the_same_limits_inside_another_would(
    seed: int,
) -> None:
    """A top-level ledger grants outright when everything fits (its fast path);
    the same limits one level down always take the full pass. Under any sequence
    of reservations, settlements and tool calls both must decide alike."""
    rng = random.Random(seed)
    limits = Budget(model_calls=40, input_tokens=5_000, output_tokens=3_000, tool_calls=15)
    alone = BudgetLedger(limits)
    nested = BudgetLedger(limits, parent=BudgetLedger(Budget()))
    holds: list[tuple[Hold, Hold]] = []
    for _ in range(300):
        action = rng.random()
        if action < 0.5:
            need_in, want_out = rng.randrange(0, 600), rng.choice([0, 1, 50, 200, 800])
            got = alone.try_reserve(need_in, want_out), nested.try_reserve(need_in, want_out)
            assert decided(got[0]) == decided(got[1])
            if isinstance(got[0], Hold) and isinstance(got[1], Hold):
                holds.append((got[0], got[1]))
        elif action < 0.8 and holds:
            first, second = holds.pop(rng.randrange(len(holds)))
            usage = rng.choice(
                [
                    None,
                    Usage(input_tokens=first.input_tokens // 2, output_tokens=first.output_tokens),
                ]
            )
            charge = rng.random() < 0.9
            alone.settle(first, usage, charge=charge)
            nested.settle(second, usage, charge=charge)
        else:
            assert decided(alone.take_tool_call()) == decided(nested.take_tool_call())
        assert alone.report() == nested.report()


def decided(outcome: Hold | Refusal | anyio.Event | None) -> object:
    """What a ledger decided, without whose budget it was (tree or subagent)."""
    if isinstance(outcome, Refusal):
        return (outcome.resource, outcome.limit, outcome.spent)
    if isinstance(outcome, anyio.Event):
        return "wait"
    return outcome


def test_subclassed_messages_are_measured_as_their_kind() -> None:
    class Answer(AssistantMessage):
        pass

    class Result(ToolMessage):
        pass

    call = ToolCall(name="lookup", args={"key": "é", "n": [1, True]})
    plain = [
        AssistantMessage(content="hi", tool_calls=[call]),
        ToolMessage(tool_call_id=call.id, name="lookup", content="ünïcode"),
    ]
    subclassed = [
        Answer(content="hi", tool_calls=[call]),
        Result(tool_call_id=call.id, name="lookup", content="ünïcode"),
    ]
    assert messages_tokens(subclassed) == messages_tokens(plain)
    assert messages_tokens(plain) == sum(message_tokens(m) for m in plain)
    # Every byte of the UTF-8 text counts: two characters of two bytes.
    assert (
        message_tokens(plain[1])
        == message_tokens(ToolMessage(tool_call_id=call.id, name="lookup", content="unicode")) + 2
    )
