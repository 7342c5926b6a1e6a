"""Remote children stopped by what others spent of their parent's budget, on real
``deepactors serve`` servers, both loops: a local sibling that takes the last
model call, limits in tokens and dollars that siblings spend, and a ledger that
runs out before a child's server has named its run (a proxy holds the answer
back)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import anyio
import pytest
from anyio.abc import SocketStream
from langgraph_sdk import get_sync_client
from langgraph_sdk.errors import NotFoundError

from deepactors import AssistantMessage, Budget, ToolCall, ToolMessage, Usage, create_deep_agent
from deepactors.budget import BudgetLedger
from deepactors.context import RunContext
from deepactors.models import FunctionModel, ModelRequest
from deepactors.remote import RemoteAgent
from tests.waiting import wait_until

from .conftest import parent_model, remote, remote_runs_in, run_collecting, say, settled
from .remote_app import PRICED, PRICES
from .test_live_budget import records


def noop() -> str:
    """Do nothing."""
    return "nothing done"


def _by_text(result: dict[str, Any]) -> dict[str, ToolMessage]:
    return {m.tool_call_id: m for m in result["messages"] if isinstance(m, ToolMessage)}


# -- a local sibling takes the last model call ------------------------------------

REMOTES = 3


async def test_a_local_sibling_that_spends_the_rest_stops_the_remote_children(
    server: str,
) -> None:
    # Each remote child makes two model calls (a `noop` call, then `wait_here`)
    # and hangs in `wait_here`: it reports nothing more. The local sibling
    # spends the rest of the budget once they all hang, and its last call
    # waits for `release`.
    limit = 1 + 2 * REMOTES + 4  # the parent's call, the remote ones, 4 local
    hanging, holding, release = anyio.Event(), anyio.Event(), anyio.Event()
    local_usage = Usage(input_tokens=7, output_tokens=1)

    async def local(request: ModelRequest) -> AssistantMessage:
        assert request.run is not None
        assert request.run.budget is not None
        ledger = request.run.budget
        # (this call's reservation counted already: model calls count when reserved)
        while ledger.model_calls < limit - 4 + 1:
            await ledger.changed().wait()
        hanging.set()
        if ledger.model_calls < limit:
            return AssistantMessage(tool_calls=[ToolCall(name="noop", args={})], usage=local_usage)
        holding.set()  # this call took the last model call of the budget
        await release.wait()
        return AssistantMessage(content="spent", usage=local_usage)

    model = FunctionModel(local, name="local")
    spec = {
        "name": "l",
        "description": "spends",
        "system_prompt": "",
        "model": model,
        "tools": [noop],
    }
    agent = create_deep_agent(
        FunctionModel(parent_model),
        subagents=[remote("r", server, keep_threads=True), spec],
    )
    orders = [("r", "burn 1 block")] * REMOTES + [("l", "spend")]
    events: list[Any] = []
    outcome: list[dict[str, Any] | BaseException] = []

    async def run_parent() -> None:
        result, _ = await run_collecting(
            agent, say(orders), budget=Budget(model_calls=limit), timeout=60, events=events
        )
        outcome.append(result)

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run_parent)
            await holding.wait()
            assert hanging.is_set()
            # The last call is reserved, not settled: the remote children, who
            # report nothing meanwhile, are not stopped yet (documented).
            await anyio.sleep(0.5)
            wheres = remote_runs_in(events)
            assert len(wheres) == REMOTES
            runs = await records(wheres)
            assert [r["status"] for r in runs] == ["running"] * REMOTES
            assert not outcome
            release.set()  # it settles: they are stopped at once
    [result] = outcome
    assert isinstance(result, dict), result
    tools = _by_text(result)
    assert tools[f"call-{REMOTES}"].text == "spent"
    for i in range(REMOTES):
        assert tools[f"call-{i}"].status == "error"
        assert "BudgetExceeded: the run's budget is spent" in tools[f"call-{i}"].text
    runs = await records(remote_runs_in(events))
    assert [r["status"] for r in runs] == ["interrupted"] * REMOTES
    # Everybody's spending adds up, once: the parent's call, the local child's
    # calls, what the remote runs' records say; nothing past the limit (the
    # remote children spent nothing after it ran out).
    spent = [r["metadata"]["budget"] for r in runs]
    report = result["budget"]
    assert model.calls == 4
    assert report.model_calls == 1 + model.calls + sum(s["model_calls"] for s in spent) == limit
    assert report.input_tokens == 4 * 7 + sum(s["input_tokens"] for s in spent)
    assert report.output_tokens == 4 * 1 + sum(s["output_tokens"] for s in spent)
    tool_calls = len(orders) + 3  # the parent's `task` calls, the local `noop` ones
    assert report.tool_calls == tool_calls + sum(s["tool_calls"] for s in spent)
    usage = result["usage"]
    remote_usage = [Usage.model_validate(r["metadata"]["usage"]) for r in runs]
    total = sum(remote_usage, local_usage + local_usage + local_usage + local_usage)
    assert (usage.input_tokens, usage.output_tokens, usage.requests) == (
        total.input_tokens,
        total.output_tokens,
        total.requests,
    )
    assert result["messages"][-1].stop_reason == "budget_exhausted"
    assert "model_calls" in report.exhausted


async def test_a_local_sibling_spending_beside_running_remote_children_stays_in_bounds(
    server: str,
) -> None:
    # The remote children pace on (21 calls each, 0.3 s apart) while the local
    # sibling spends as fast as it can: whoever takes the last call, the
    # remote children are stopped, within the bound, and it all adds up.
    limit = 2 + REMOTES + 10
    events: list[Any] = []
    local_usage = Usage(input_tokens=7, output_tokens=1)

    async def local(request: ModelRequest) -> AssistantMessage:
        assert request.run is not None
        ledger = request.run.budget
        assert ledger is not None
        # Once every remote child runs and has spent (this call counted already).
        while len(remote_runs_in(events)) < REMOTES or ledger.model_calls < 2 + REMOTES:
            await ledger.changed().wait()
        return AssistantMessage(tool_calls=[ToolCall(name="noop", args={})], usage=local_usage)

    model = FunctionModel(local, name="local")
    spec = {
        "name": "l",
        "description": "spends",
        "system_prompt": "",
        "model": model,
        "tools": [noop],
    }
    agent = create_deep_agent(
        FunctionModel(parent_model),
        subagents=[remote("r", server, keep_threads=True), spec],
    )
    orders = [("r", "pace 20 0.3")] * REMOTES + [("l", "spend")]
    result, _ = await run_collecting(
        agent, say(orders), budget=Budget(model_calls=limit), timeout=60, events=events
    )
    assert isinstance(result, dict), result
    tools = _by_text(result)
    for i in range(len(orders)):
        assert tools[f"call-{i}"].status == "error"
        assert "BudgetExceeded: the run's budget is spent" in tools[f"call-{i}"].text
    runs = await records(remote_runs_in(events))
    assert [r["status"] for r in runs] == ["interrupted"] * REMOTES
    spent = [r["metadata"]["budget"] for r in runs]
    report = result["budget"]
    assert limit <= report.model_calls <= limit + 2 * REMOTES
    assert report.model_calls == 1 + model.calls + sum(s["model_calls"] for s in spent)
    assert report.input_tokens == 7 * model.calls + sum(s["input_tokens"] for s in spent)
    assert report.output_tokens == model.calls + sum(s["output_tokens"] for s in spent)
    tool_calls = len(orders) + model.calls  # the `task` calls, the local `noop` ones
    assert report.tool_calls == tool_calls + sum(s["tool_calls"] for s in spent)
    usages = [Usage.model_validate(r["metadata"]["usage"]) for r in runs]
    usage = result["usage"]
    assert usage.requests == model.calls + sum(u.requests for u in usages)
    assert usage.input_tokens == 7 * model.calls + sum(u.input_tokens for u in usages)


# -- limits in tokens and dollars -------------------------------------------------

CHILDREN = 4
PARENT_USAGE = Usage(input_tokens=10, output_tokens=1)


@dataclass(frozen=True, slots=True, kw_only=True)
class Case:
    """A limit that the remote children's spending together runs out."""

    budget: Budget
    graph_id: str = "agent"
    order: str = "pace 5 0.3"
    per_call: float  # what each remote model call spends of it
    words: str  # how the children's errors name it
    priced: bool = False


CASES = {
    # 5000 input tokens a call: a child's server, which reserves the estimate
    # of each call's prompt (thousands of tokens), never refuses one itself.
    "input_tokens": Case(
        budget=Budget(input_tokens=50_000),
        order="pace 5 0.3 5000",
        per_call=5000,
        words="input tokens",
    ),
    "output_tokens": Case(budget=Budget(output_tokens=100), per_call=10, words="output tokens"),
    "usd": Case(
        budget=Budget(usd=0.1),
        graph_id="priced",
        per_call=PRICES.cost(Usage(input_tokens=100, output_tokens=10)),
        words="$",
        priced=True,
    ),
}


def _reporting(priced: bool) -> Callable[[ModelRequest], AssistantMessage]:
    """The parent's model, its usage reported (else a call is charged all it held)."""
    usage = PARENT_USAGE
    if priced:
        usage = usage.model_copy(update={"cost_usd": PRICES.cost(usage)})

    def answer(request: ModelRequest) -> AssistantMessage:
        return parent_model(request).model_copy(update={"usage": usage})

    return answer


@pytest.mark.parametrize("resource", list(CASES))
async def test_a_limit_in_tokens_or_dollars_the_children_spend_together_stops_them(
    server: str, resource: str
) -> None:
    case = CASES[resource]
    name = PRICED if case.priced else "parent"
    agent = create_deep_agent(
        FunctionModel(_reporting(case.priced), name=name),
        subagents=[remote("r", server, graph_id=case.graph_id, keep_threads=True)],
    )
    result, events = await run_collecting(
        agent, say([("r", case.order)] * CHILDREN), budget=case.budget, timeout=60
    )
    assert isinstance(result, dict), result
    tools = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert len(tools) == CHILDREN
    # Each wanted 6 calls, of which its server would let it make 6: the others'
    # spending ran the parent's budget out first.
    for tool in tools:
        assert tool.status == "error"
        assert "BudgetExceeded: the run's budget is spent" in tool.text, tool.text
        assert case.words in tool.text, tool.text
    report = result["budget"]
    assert resource in report.exhausted
    cap = getattr(case.budget, resource)
    runs = await records(remote_runs_in(events))
    assert len(runs) == CHILDREN
    assert all(r["status"] == "interrupted" for r in runs)
    spent = [r["metadata"]["budget"] for r in runs]
    sent = [r["kwargs"]["config"]["configurable"]["deepactors_limits"]["budget"] for r in runs]
    # The documented bound. What the children's answers reported passed the
    # limit by at most two model calls per child (the one whose report was
    # on its way, the one its server made before the cancel came)...
    usages = [Usage.model_validate(r["metadata"]["usage"]) for r in runs]
    reported = sum(usages[1:], usages[0])
    answered = {
        "input_tokens": reported.input_tokens,
        "output_tokens": reported.output_tokens,
        "usd": reported.cost_usd,
    }[resource]
    assert answered is not None
    assert cap - case.per_call <= answered <= cap + 2 * CHILDREN * case.per_call + 1e-9
    # ...and the call each was cut off in is charged what its server held for
    # it, as a local call cut off is: its worst case, within what it was sent.
    for one, given in zip(spent, sent, strict=True):
        assert one[resource] <= given[resource] + 1e-9
    own = PRICES.cost(PARENT_USAGE) if case.priced else 0.0
    if resource != "usd":
        own = getattr(PARENT_USAGE, resource)
    have = getattr(report, resource)
    assert cap <= have <= own + sum(given[resource] for given in sent) + 1e-9
    # Charged once: the parent's call, and what the runs' records say.
    parent_cost = PRICES.cost(PARENT_USAGE) if case.priced else 0.0
    assert report.usd == pytest.approx(parent_cost + sum(s["usd"] for s in spent), abs=1e-9)
    for key, mine in (("input_tokens", 10), ("output_tokens", 1), ("model_calls", 1)):
        assert getattr(report, key) == mine + sum(s[key] for s in spent), key
    assert report.tool_calls == CHILDREN + sum(s["tool_calls"] for s in spent)


# -- the ledger runs out before the child's server names its run -----------------

_STREAM = re.compile(rb"POST /threads/([0-9a-f-]+)/runs/stream ")


@dataclass(slots=True, kw_only=True, eq=False)
class Gate:
    """What the proxy saw of the child's run request (its ``/runs/stream`` POST)."""

    seen: anyio.Event = field(default_factory=anyio.Event)
    thread_id: str = ""


@asynccontextmanager
async def holding_proxy(upstream: str, *, forward: bool) -> AsyncIterator[tuple[str, Gate]]:
    """A TCP proxy to ``upstream`` that holds back a run's stream: with ``forward``,
    its request reaches the server, and nothing of the answer comes back (the run
    is made, its id never said); else the request never reaches the server (no
    run is made). A client that gives up on a run's stream does not close the
    proxy's connection to the server (as a proxy that keeps its upstream
    connections may not): the server cannot tell, and only a cancel stops the run.
    Other requests pass."""
    where = urlsplit(upstream)
    there = where.netloc.encode()
    gate = Gate()

    async def handle(client: SocketStream) -> None:
        async with client, await anyio.connect_tcp(where.hostname or "", where.port or 80) as up:
            held = False

            async def down() -> None:
                try:
                    async for chunk in up:
                        if not held:
                            await client.send(chunk)
                except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                    pass
                tg.cancel_scope.cancel()

            async def upward() -> None:
                nonlocal held
                try:
                    async for raw in client:
                        # (the server answers only to its own name)
                        chunk = raw.replace(here, there)
                        found = _STREAM.search(chunk)
                        if found is not None and not held:
                            held = True
                            gate.thread_id = found.group(1).decode()
                            if forward:
                                await up.send(chunk)
                            gate.seen.set()
                            continue
                        if not held or forward:
                            await up.send(chunk)
                except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                    pass
                if held and forward:
                    await anyio.sleep_forever()  # (the server is not told)
                tg.cancel_scope.cancel()

            async with anyio.create_task_group() as tg:
                tg.start_soon(down)
                tg.start_soon(upward)

    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    here = f"127.0.0.1:{port}".encode()
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, handle)
        try:
            yield f"http://127.0.0.1:{port}", gate
        finally:
            tg.cancel_scope.cancel()


def _thread_runs(url: str, thread_id: str) -> list[dict[str, Any]]:
    with get_sync_client(url=url, api_key=None) as client:
        try:
            return [dict(run) for run in client.runs.list(thread_id)]
        except NotFoundError:
            return []  # no such thread


async def thread_runs(url: str, thread_id: str) -> list[dict[str, Any]]:
    """The runs of a thread on the server (langgraph-sdk's client, in a worker thread)."""
    return await anyio.to_thread.run_sync(_thread_runs, url, thread_id)


@asynccontextmanager
async def stopped_before_its_run_is_named(
    server: str, *, forward: bool
) -> AsyncIterator[tuple[Any, BudgetLedger, Gate]]:
    """Run a child through the proxy; run its parent's budget out (a sibling's
    spending, charged) once its run's request is on its way. Its outcome, the
    ledger and what the proxy saw, the proxy still holding its connection."""
    ledger = BudgetLedger(Budget(model_calls=SIBLING))
    parent = RunContext(path="main", run_id="parent-run", budget=ledger)
    outcome: list[Any] = []
    async with holding_proxy(server, forward=forward) as (url, gate):
        agent = RemoteAgent(name="r", graph_id="agent", url=url, keep_threads=True)

        async def child() -> None:
            outcome.append(
                await agent.run_child(
                    description="burn 1 block",
                    path="main/task-1:r",
                    label="task-1",
                    parent=parent,
                    files={},
                    timeout=60,
                )
            )

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(child)
                await gate.seen.wait()
                if forward:
                    # The run is made (and goes on, reporting to nobody).
                    await wait_until(
                        lambda: thread_runs(server, gate.thread_id),
                        what="the remote run made",
                        timeout=60,
                        interval=0.05,
                    )
                assert not outcome
                ledger.add_spent(SIBLING, 0, 0, 0, 0)  # a sibling spends the rest
        yield outcome[0], ledger, gate


SIBLING = 50


async def test_a_child_stopped_before_its_server_names_its_run_cancels_the_run(
    server: str,
) -> None:
    async with stopped_before_its_run_is_named(server, forward=True) as (outcome, ledger, gate):
        assert outcome.status == "failed"
        assert outcome.answer.startswith("BudgetExceeded: the run's budget is spent")
        # No run of its thread goes on (the proxy still holds its stream open:
        # the server cannot tell it was given up), and what the run's record
        # says it spent is charged (no live charge came: its events never did).
        runs = await thread_runs(server, gate.thread_id)
        assert len(runs) == 1
        wheres = [{"url": server, "thread_id": gate.thread_id, "run_id": runs[0]["run_id"]}]
        assert await settled(wheres) == ["interrupted"]
        [record] = await records(wheres)
    spent = record["metadata"]["budget"]
    assert ledger.model_calls == SIBLING + spent["model_calls"]
    assert (ledger.input_tokens, ledger.output_tokens) == (
        spent["input_tokens"],
        spent["output_tokens"],
    )
    assert ledger.tool_calls == spent["tool_calls"]


async def test_a_child_stopped_before_its_run_was_made_charges_nothing(server: str) -> None:
    async with stopped_before_its_run_is_named(server, forward=False) as (outcome, ledger, gate):
        assert outcome.status == "failed"
        assert outcome.answer.startswith("BudgetExceeded: the run's budget is spent")
        assert outcome.usage is None
        assert (ledger.model_calls, ledger.input_tokens, ledger.tool_calls) == (SIBLING, 0, 0)
        assert await thread_runs(server, gate.thread_id) == []  # nor its thread
