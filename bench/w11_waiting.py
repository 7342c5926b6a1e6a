"""W11's memory per waiting child: what a Ray-placed child costs its parent while it runs.

N children placed on two Ray workers (a local Ray of 2 CPUs) each wait in a tool
until cancelled; once every one has left in a batch (and a second more), the
parent's RSS above what it was before the run, per child, and the objects the
garbage collector tracks, per child, by type (the ten most). Then the run is
cancelled. Deterministic (no child ends by itself), so it is robust on a
loaded machine, unlike the wall time of W2 at 100,000 (``w11_ray.py --big``),
whose peak is mostly this figure times N.

    python bench/w11_waiting.py [--n 10000] [--loops asyncio trio]

Each loop runs in a fresh process.
"""

from __future__ import annotations

import argparse
import collections
import gc
import json
import sys
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).parent))

from _common import run_worker
from w11_ray import _start_ray, blocker_turn, wait_here

from deepactors import AssistantMessage, ToolCall, create_deep_agent
from deepactors.models import FunctionModel, ModelRequest
from deepactors.placement import RayPlacement


def make_agent(n: int, placement: RayPlacement) -> Any:
    """A main agent that starts ``n`` children which wait until cancelled."""
    fanout = AssistantMessage(
        tool_calls=[
            ToolCall(name="task", args={"description": f"wait {i}", "subagent_type": "b"})
            for i in range(n)
        ]
    )

    def main_answer(request: ModelRequest) -> AssistantMessage:
        return fanout if len(request.messages) == 1 else AssistantMessage(content="done")

    child = {
        "name": "b",
        "description": "waits",
        "system_prompt": "Wait.",
        "tools": [wait_here],
        "model": FunctionModel(blocker_turn),
    }
    return create_deep_agent(
        FunctionModel(main_answer),
        subagents=[child],
        max_concurrent_subagents=None,
        placement=placement,
    )


def rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def worker(backend: str, n: int) -> None:
    _start_ray()
    import w11_ray
    from ray import cloudpickle

    # The children's model and tool are w11_ray's, which the workers cannot
    # import (bench/ is not on their path): sent by value.
    cloudpickle.register_pickle_by_value(w11_ray)
    placement = RayPlacement(workers=2)

    async def warm() -> None:  # Ray's workers start and get an agent
        with anyio.move_on_after(3):
            await make_agent(10, placement).ainvoke("go")

    anyio.run(warm, backend=backend)

    async def main() -> dict[str, Any]:
        agent = make_agent(n, placement)  # (its fan-out answer made before the baseline)
        link = await placement._links.get()
        gc.collect()
        base = rss_kib()
        types = collections.Counter(type(o).__name__ for o in gc.get_objects())
        out: dict[str, Any] = {}

        async def watch(scope: anyio.CancelScope) -> None:
            while True:
                await anyio.sleep(0.2)
                if link.statistics().placed >= n and not any(lane.starts for lane in link._lanes):
                    await anyio.sleep(1.0)
                    out["running"] = link.statistics().running
                    out["kib_per_child"] = (rss_kib() - base) / n
                    now = collections.Counter(type(o).__name__ for o in gc.get_objects())
                    now.subtract(types)
                    out["objects_per_child"] = {k: v / n for k, v in now.most_common(10)}
                    scope.cancel()
                    return

        async with anyio.create_task_group() as tg:
            tg.start_soon(watch, tg.cancel_scope)
            await agent.ainvoke("go")
        return out

    print("RESULT " + json.dumps(anyio.run(main, backend=backend)), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--loops", nargs="+", default=["asyncio", "trio"])
    parser.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker[0], int(args.worker[1]))
        return
    for loop in args.loops:
        out = run_worker(Path(__file__), ["--worker", loop, str(args.n)])
        objects = ", ".join(f"{k} {v:.2f}" for k, v in out["objects_per_child"].items())
        print(
            f"{loop}, {args.n:,} children waiting ({out['running']:,} running): the parent's "
            f"RSS {out['kib_per_child']:.2f} KiB per child; objects per child: {objects}"
        )


if __name__ == "__main__":
    main()
