"""W1: CPU per model turn of the agent loop, beside a framework-free floor.

One agent, K model turns, each calling one trivial async tool, on a
FunctionModel with no latency, with the default middleware stack. The floor is
the same loop as plain coroutines: pydantic messages, one model call and one
tool call per turn, a task group per tool step, run in the same process.

    python bench/w1_agent_loop.py [--turns 200 3000] [--repeats 7] [--json PATH]

Prints CPU ms per turn for both, and the ratio, on asyncio and trio (median of
the repeats; the first run of each is a discarded warm-up), at each number of
turns, and how deepactors' cost per turn grows from the shortest run to the
longest (a history copied into every request would make it grow with K). The issue's shape is
one tool call per turn; the loop skips the task group for a lone call, so a
second row with 3 concurrent calls per turn shows the cost with a task group on
both sides. ``--json PATH`` also writes every repeat's figure, with the machine,
date and load, for ``bench/plots.py``.
"""

from __future__ import annotations

import argparse
import functools
import logging
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import structlog

sys.path.insert(0, str(Path(__file__).parent))

from _common import machine_info, write_json

from deepactors import AssistantMessage, ToolCall, ToolMessage, UserMessage, create_deep_agent
from deepactors.messages import Message
from deepactors.models import FunctionModel, ModelRequest


def make_answer(
    turns: int, calls: int
) -> Callable[[list[Message] | ModelRequest], AssistantMessage]:
    def answer(request: list[Message] | ModelRequest) -> AssistantMessage:
        if isinstance(request, list):
            n = len(request)
            done = n >= (calls + 1) * turns + 1
        else:
            # By the run's step, not the history's length: at 3,000 turns of 3
            # calls, summarization shortens the history the model sees.
            assert request.run is not None
            n = request.run.step
            done = n > turns
        if done:
            return AssistantMessage(content="done")
        return AssistantMessage(
            tool_calls=[ToolCall(name="noop", args={"i": n + k}) for k in range(calls)]
        )

    return answer


async def noop(i: int) -> str:
    """Do nothing.

    Args:
        i: Any number.
    """
    return "ok"


async def floor_run(turns: int, calls_per_turn: int) -> int:
    """The floor: the same loop with no framework at all."""
    answer = make_answer(turns, calls_per_turn)
    messages: list[Message] = [UserMessage(content="go")]

    async def model(msgs: list[Message]) -> AssistantMessage:
        return answer(msgs)

    calls = 0
    while True:
        msg = await model(messages)
        calls += 1
        messages.append(msg)
        if not msg.tool_calls:
            break
        results: list[ToolMessage] = []

        async def run_tool(call: ToolCall, out: list[ToolMessage]) -> None:
            text = await noop(**call.args)
            out.append(ToolMessage(tool_call_id=call.id, name=call.name, content=text))

        async with anyio.create_task_group() as tg:
            for call in msg.tool_calls:
                tg.start_soon(run_tool, call, results)
        messages.extend(results)
    return calls


def agent_runner(turns: int, calls_per_turn: int) -> Callable[[], Awaitable[int]]:
    agent = create_deep_agent(
        FunctionModel(make_answer(turns, calls_per_turn)), tools=[noop], max_steps=turns + 1
    )

    async def run() -> int:
        result = await agent.ainvoke({"messages": [{"role": "user", "content": "go"}]})
        return sum(1 for m in result["messages"] if m.role == "assistant")

    return run


def cpu_per_turn(run: Callable[[], Awaitable[int]], backend: str, repeats: int) -> list[float]:
    """CPU ms per turn of each repeat (after one discarded warm-up run)."""
    samples = []
    for i in range(repeats + 1):
        t0 = time.process_time()
        calls = anyio.run(run, backend=backend)
        dt = time.process_time() - t0
        if i:  # the first run warms caches and imports
            samples.append(dt / calls * 1000)
    return samples


def worker(impl: str, backend: str, turns: int, calls: int) -> None:
    """A warm-up run, then one run of ``turns`` on a fresh agent: for bench/instructions.py."""
    make = agent_runner if impl == "deepactors" else _floor_runner
    anyio.run(make(10, calls), backend=backend)
    anyio.run(make(turns, calls), backend=backend)


def _floor_runner(turns: int, calls: int) -> Callable[[], Awaitable[int]]:
    return functools.partial(floor_run, turns, calls)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, nargs="+", default=[200, 3000])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--json", type=Path, help="write every repeat's figure here")
    parser.add_argument(
        "--worker", nargs=4, metavar=("IMPL", "LOOP", "K", "C"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    # The 3-call rows summarize at 3,000 turns; the figures should not include a console.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    if args.worker:
        impl, backend, turns, calls = args.worker
        worker(impl, backend, int(turns), int(calls))
        return
    print(f"W1: {args.turns} model turns on a FunctionModel (latency 0), default middleware")
    header = f"{'loop':8} {'turns':>6} {'calls/turn':>10} {'floor ms/turn':>14}"
    print(f"{header} {'deepactors ms/turn':>19} {'ratio':>6}")
    results: list[dict[str, Any]] = []
    for calls in (1, 3):
        for backend in ("asyncio", "trio"):
            ours_by_turns = {}
            for turns in args.turns:
                floor = cpu_per_turn(
                    functools.partial(floor_run, turns, calls), backend, args.repeats
                )
                ours = cpu_per_turn(agent_runner(turns, calls), backend, args.repeats)
                floor_ms, ours_ms = statistics.median(floor), statistics.median(ours)
                for impl, samples in (("floor", floor), ("deepactors", ours)):
                    results.append(
                        {
                            "loop": backend,
                            "turns": turns,
                            "calls": calls,
                            "impl": impl,
                            "ms_per_turn": samples,
                        }
                    )
                ours_by_turns[turns] = ours_ms
                print(
                    f"{backend:8} {turns:6} {calls:10} {floor_ms:14.4f} {ours_ms:19.4f} "
                    f"{ours_ms / floor_ms:5.2f}x"
                )
            if len(args.turns) > 1:
                lo, hi = min(args.turns), max(args.turns)
                growth = ours_by_turns[hi] / ours_by_turns[lo]
                print(f"{'':8} deepactors per turn at {hi} turns / at {lo}: {growth:.2f}x")
    if args.json:
        meta = {"benchmark": "w1", "repeats": args.repeats}
        write_json(args.json, {**machine_info(), **meta, "results": results})


if __name__ == "__main__":
    main()
