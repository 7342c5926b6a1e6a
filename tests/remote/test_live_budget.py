"""Remote children's spending is charged to their parent's budget as it happens, on
real ``deepactors serve`` servers, both loops: children running at once cannot
together spend more than the parent's budget, past the calls in flight when it
ran out, and nothing is charged twice."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio
from langgraph_sdk import get_sync_client

from deepactors import Budget, ToolMessage
from deepactors.budget import BudgetLedger
from deepactors.context import RunContext
from deepactors.messages import Usage
from deepactors.remote import RemoteAgent

from .conftest import parent, remote, remote_runs_in, run_collecting, say

CHILDREN = 5
# Each child wants 6 model calls (5 `noop` calls, then its answer), each taking
# 0.3 s: longer than a round trip to the server, as the documented bound needs.
ORDER = "pace 5 0.3"


def _records(wheres: Sequence[dict[str, str]]) -> list[dict[str, Any]]:
    out = []
    for where in wheres:
        with get_sync_client(url=where["url"], api_key=None) as client:
            out.append(client.runs.get(where["thread_id"], where["run_id"]))
    return out


async def records(wheres: Sequence[dict[str, str]]) -> list[dict[str, Any]]:
    """The remote runs' records (langgraph-sdk's client, in a worker thread)."""
    return await anyio.to_thread.run_sync(_records, wheres)


async def test_remote_children_running_at_once_stay_within_their_parents_budget(
    server: str,
) -> None:
    limit = 10
    agent = parent([remote("r", server, keep_threads=True)])
    result, events = await run_collecting(
        agent, say([("r", ORDER)] * CHILDREN), budget=Budget(model_calls=limit), timeout=60
    )
    assert isinstance(result, dict), result
    tools = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert len(tools) == CHILDREN
    # Together they wanted 30 calls of 9 left: each was stopped as its parent's
    # budget ran out, as a local child is.
    for tool in tools:
        assert tool.status == "error"
        assert "BudgetExceeded: the run's budget is spent" in tool.text, tool.text
    assert result["messages"][-1].stop_reason == "budget_exhausted"
    report = result["budget"]
    # The bound (docs/remote-subagents.md, Budgets): past the limit, at most two
    # model calls per remote child running when it ran out (the one whose
    # report was on its way, the one its server started before the cancel came).
    assert limit <= report.model_calls <= limit + 2 * CHILDREN
    # Charged once: the parent's own first call (its second was refused), and
    # what the servers recorded of each child's run, no more, no less.
    runs = await records(remote_runs_in(events))
    assert len(runs) == CHILDREN
    assert all(r["status"] != "success" for r in runs)
    spent = [r["metadata"]["budget"] for r in runs]
    assert report.model_calls == 1 + sum(s["model_calls"] for s in spent)
    assert report.input_tokens == sum(s["input_tokens"] for s in spent)
    assert report.output_tokens == sum(s["output_tokens"] for s in spent)
    assert report.tool_calls == CHILDREN + sum(s["tool_calls"] for s in spent)
    usages = [Usage.model_validate(r["metadata"]["usage"]) for r in runs]
    total = sum(usages[1:], usages[0])
    usage = result["usage"]
    assert (usage.input_tokens, usage.output_tokens, usage.requests) == (
        total.input_tokens,
        total.output_tokens,
        total.requests,
    )
    assert "model_calls" in report.exhausted


async def test_a_childs_spending_is_charged_as_it_happens_and_once(server: str) -> None:
    # Nobody listens to the parent's events: its child's are streamed all the
    # same, and charged as they come. Three calls, then it hangs.
    agent = RemoteAgent(name="r", graph_id="agent", url=server, keep_threads=True)
    ledger = BudgetLedger(Budget(model_calls=50))
    run = RunContext(path="main", run_id="parent-run", budget=ledger)

    async def child() -> None:
        await agent.run_child(
            description="burn 2 block",
            path="main/task-1:r",
            label="task-1",
            parent=run,
            files={},
            timeout=60,
        )

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(child)
            while ledger.model_calls < 3:  # (charged live: the child has not ended)
                await ledger.changed().wait()
            assert (ledger.input_tokens, ledger.output_tokens) == (300, 30)
            assert ledger.tool_calls == 2  # the two `noop` calls that ran
            assert run.usage is None  # (its usage comes with its end)
            tg.cancel_scope.cancel()
    # Cancelled, its final charge is what its run's record says beyond the live
    # charges: the `wait_here` call it was in, and nothing twice.
    assert run.usage is not None
    assert (run.usage.input_tokens, run.usage.output_tokens, run.usage.requests) == (300, 30, 3)
    assert (ledger.model_calls, ledger.input_tokens, ledger.output_tokens) == (3, 300, 30)
    assert ledger.tool_calls == 3


async def test_a_completed_childs_charges_equal_its_runs_record(server: str) -> None:
    agent = RemoteAgent(name="r", graph_id="agent", url=server, keep_threads=True)
    ledger = BudgetLedger(Budget(model_calls=50, output_tokens=10_000))
    events: list[Any] = []
    run = RunContext(path="main", run_id="parent-run", emit=events.append, budget=ledger)
    with anyio.fail_after(30):
        outcome = await agent.run_child(
            description="pace 2 0.05",
            path="main/task-1:r",
            label="task-1",
            parent=run,
            files={},
            timeout=60,
        )
    assert (outcome.status, outcome.answer) == ("completed", "paced 2")
    [record] = await records(remote_runs_in(events))
    spent = record["metadata"]["budget"]
    assert (ledger.model_calls, ledger.input_tokens, ledger.output_tokens) == (3, 300, 30)
    assert (ledger.model_calls, ledger.input_tokens, ledger.output_tokens, ledger.tool_calls) == (
        spent["model_calls"],
        spent["input_tokens"],
        spent["output_tokens"],
        spent["tool_calls"],
    )
    assert run.usage == Usage.model_validate(record["metadata"]["usage"])
