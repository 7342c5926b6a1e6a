"""W4: a run deadline over a wide fan-out, beside the floor of the same tree.

The main agent starts N subagents whose model calls take 10 s; the run has a
0.5 s timeout. Printed: how late after the deadline the caller gets control back,
and how many child tasks are still alive then (should be 0). The floor is the
same tree of nested task groups (a task group per tool step, a task group per
child) cancelled by ``anyio.move_on_after``.

    python bench/w4_deadline.py [--n 500] [--loops asyncio trio]
"""

from __future__ import annotations

import argparse
import statistics
import time

import anyio
import anyio.lowlevel

from deepactors import AssistantMessage, ToolCall, create_deep_agent
from deepactors.models import FunctionModel, ModelRequest

DEADLINE = 0.5
MODEL_TIME = 10.0


class Alive:
    """Counts child tasks in flight (incremented on entry, decremented in finally)."""

    def __init__(self) -> None:
        self.count = 0

    async def slow_model_call(self) -> str:
        self.count += 1
        try:
            await anyio.sleep(MODEL_TIME)
        finally:
            self.count -= 1
        return "never"


async def floor_run(n: int, alive: Alive) -> tuple[float, int]:
    async def child() -> None:
        async with anyio.create_task_group() as tg:  # the child's own actor group
            tg.start_soon(alive.slow_model_call)

    start = time.perf_counter()
    with anyio.move_on_after(DEADLINE):
        await anyio.lowlevel.checkpoint()  # the main model's answer
        async with anyio.create_task_group() as tg:  # the main tool step
            for _ in range(n):
                tg.start_soon(child)
    return time.perf_counter() - start - DEADLINE, alive.count


async def ours_run(n: int, alive: Alive) -> tuple[float, int]:
    async def child_answer(request: ModelRequest) -> str:
        return await alive.slow_model_call()

    def main_answer(request: ModelRequest) -> AssistantMessage:
        return AssistantMessage(
            tool_calls=[
                ToolCall(name="task", args={"description": str(i), "subagent_type": "slow"})
                for i in range(n)
            ]
        )

    agent = create_deep_agent(
        FunctionModel(main_answer),
        subagents=[
            {
                "name": "slow",
                "description": "takes its time",
                "system_prompt": "Be slow.",
                "model": FunctionModel(child_answer),
            }
        ],
    )
    start = time.perf_counter()
    try:
        await agent.ainvoke("go", timeout=DEADLINE)
    except TimeoutError:
        pass
    else:
        raise AssertionError("the run should have timed out")
    return time.perf_counter() - start - DEADLINE, alive.count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=500)
    parser.add_argument("--loops", nargs="+", default=["asyncio", "trio"])
    parser.add_argument("--repeats", type=int, default=5, help="median of this many runs")
    args = parser.parse_args()
    print(f"W4: {args.n} children with {MODEL_TIME:g} s model calls, run timeout {DEADLINE} s")
    for backend in args.loops:
        for name, fn in (("floor", floor_run), ("deepactors", ours_run)):
            late, alive = [], []
            for _ in range(args.repeats):
                counter = Alive()
                delay, still = anyio.run(fn, args.n, counter, backend=backend)
                late.append(delay * 1000)
                alive.append(still)
            print(
                f"  {backend:8} {name:11} control back {statistics.median(late):6.1f} ms after "
                f"the deadline (max {max(late):6.1f}) | child tasks alive after: {max(alive)}"
            )


if __name__ == "__main__":
    main()
