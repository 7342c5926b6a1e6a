"""What a remote child spent is charged to its parent however the child ended, on a
real ``deepactors serve``, both loops: the server records a run's usage and
budget report when it fails, times out or is cancelled too, and the parent
adds it to its usage and charges it to its budget."""

from __future__ import annotations

import anyio

from deepactors import Budget
from deepactors.budget import BudgetLedger
from deepactors.context import RunContext
from deepactors.events import Event, ModelCallFinished
from deepactors.remote import RemoteAgent

from .conftest import answers, parent, remote, remote_runs_in, run_collecting, say

# The parent's own model calls: the one that calls `task`, the one that answers.
PARENT_CALLS = 2


async def test_a_failed_remote_childs_spending_is_charged_to_its_parent(server: str) -> None:
    # Two calls that report 100 + 10 tokens each, then a third that raises:
    # the run failed, and what it spent (its three calls, its tokens) is the
    # parent's too.
    agent = parent([remote("r", server)])
    result, _ = await run_collecting(
        agent, say([("r", "burn 2 fail")]), budget=Budget(model_calls=50), timeout=60
    )
    assert isinstance(result, dict), result
    [(status, text)] = answers(result)
    assert status == "error"
    assert "the model broke after 2 calls" in text
    # (The parent's model reports no usage: all of it is the child's.)
    usage = result["usage"]
    assert (usage.input_tokens, usage.output_tokens, usage.requests) == (200, 20, 2)
    budget = result["budget"]
    assert budget.model_calls == PARENT_CALLS + 3  # (the call that raised counts)
    assert (budget.input_tokens, budget.output_tokens) == (200, 20)
    assert budget.tool_calls == 1 + 2  # the parent's task call, the child's two


async def test_a_timed_out_remote_childs_spending_is_charged_to_its_parent(server: str) -> None:
    # Three calls, then it hangs: its own timeout cancels its run, whose record
    # then says what it spent.
    agent = parent([remote("r", server, timeout=3)])
    result, events = await run_collecting(
        agent, say([("r", "burn 2 block")]), budget=Budget(model_calls=50), timeout=60
    )
    assert isinstance(result, dict), result
    [(status, text)] = answers(result)
    assert status == "error"
    assert "did not finish within its 3 s timeout" in text
    usage = result["usage"]
    assert (usage.input_tokens, usage.output_tokens, usage.requests) == (300, 30, 3)
    assert result["budget"].model_calls == PARENT_CALLS + 3
    assert len(remote_runs_in(events)) == 1


async def test_a_cancelled_remote_childs_spending_is_charged_to_its_parent(server: str) -> None:
    agent = RemoteAgent(name="r", graph_id="agent", url=server)
    calls: list[Event] = []
    three_calls = anyio.Event()

    def emit(event: Event) -> None:
        # Its calls come back (relayed) as they are made.
        if isinstance(event, ModelCallFinished):
            calls.append(event)
            if len(calls) == 3:
                three_calls.set()

    ledger = BudgetLedger(Budget(model_calls=50))
    run = RunContext(path="main", run_id="parent-run", emit=emit, budget=ledger)

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
            await three_calls.wait()  # (its third call made, it hangs)
            tg.cancel_scope.cancel()
    assert run.usage is not None
    assert (run.usage.input_tokens, run.usage.output_tokens, run.usage.requests) == (300, 30, 3)
    assert (ledger.model_calls, ledger.input_tokens, ledger.output_tokens) == (3, 300, 30)
