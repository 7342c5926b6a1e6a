"""W5: W1 with every step checkpointed to SQLite, beside the storage floor.

The W1 agent (K model turns on a FunctionModel, one trivial async tool call each,
default middleware) runs twice in the same process: without a checkpointer and
with ``SqliteCheckpointer`` (every step durable before the next model call). The
difference is the CPU checkpointing adds per turn. The floor is the least SQLite
checkpointing can cost: one INSERT and one COMMIT per step of the same delta,
through aiosqlite on asyncio and sqlite3 in a worker thread on trio
(``bench/w5_checkpoint.py`` has the storage-only comparison).

Then a long thread: 200 turns over files totalling 1 MB, each turn editing one
file, to show that the file on disk grows with the changes, not with the state.

    python bench/w5_agent.py [--turns 300] [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).parent))

from w1_agent_loop import make_answer, noop
from w5_checkpoint import floor_asyncio, floor_trio, step_delta

from deepactors import AssistantMessage, ToolCall, ToolMessage, create_deep_agent
from deepactors.models import FunctionModel, ModelRequest
from deepactors.persistence import SqliteCheckpointer


def cpu_per_turn(turns: int, backend: str, db: Path | None) -> tuple[float, int]:
    kwargs: dict[str, Any] = {}
    if db is not None:
        kwargs["checkpointer"] = SqliteCheckpointer(db)
    agent = create_deep_agent(FunctionModel(make_answer(turns, 1)), tools=[noop], **kwargs)

    async def run() -> int:
        result = await agent.ainvoke("go", thread_id="w5" if db is not None else None)
        return sum(1 for m in result["messages"] if m.role == "assistant")

    t0 = time.process_time()
    calls = anyio.run(run, backend=backend)
    cpu = time.process_time() - t0
    size = db.stat().st_size if db is not None and db.exists() else 0
    return cpu / calls * 1000, size // max(calls, 1)


def floor_per_step(backend: str, folder: Path, steps: int) -> float:
    deltas = [step_delta(i) for i in range(steps)]
    file = folder / f"floor-{backend}-{time.monotonic_ns()}.db"
    fn = floor_asyncio if backend == "asyncio" else floor_trio
    seconds: float = anyio.run(fn, file, deltas, backend=backend)
    return seconds / steps * 1000


def long_thread(backend: str, folder: Path) -> tuple[int, int]:
    files = {f"/docs/{i:03d}.md": f"doc {i}\n" + "x" * 10_230 + "\nstatus: 0\n" for i in range(100)}
    turns = 200

    def answer(request: ModelRequest) -> AssistantMessage:
        done = [m for m in request.messages if isinstance(m, ToolMessage)]
        if len(done) >= 2 * turns:
            return AssistantMessage(content="done")
        n = len(done) // 2
        path = f"/docs/{n % 100:03d}.md"
        if len(done) % 2 == 0:
            return AssistantMessage(
                tool_calls=[ToolCall(name="read_file", args={"file_path": path, "limit": 1})]
            )
        old, new = f"status: {n // 100}", f"status: {n // 100 + 1}"
        return AssistantMessage(
            tool_calls=[
                ToolCall(
                    name="edit_file",
                    args={"file_path": path, "old_string": old, "new_string": new},
                )
            ]
        )

    db = folder / f"long-{backend}.db"
    agent = create_deep_agent(
        FunctionModel(answer), checkpointer=SqliteCheckpointer(db), max_steps=2 * turns + 5
    )

    async def run() -> None:
        await agent.ainvoke({"messages": "edit", "files": files}, thread_id="long")

    anyio.run(run, backend=backend)
    return sum(len(c) for c in files.values()), db.stat().st_size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(f"W5: {args.turns} turns, one tool call each, SQLite checkpoint after every step")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for backend in ("asyncio", "trio"):
            plain, saved, floor, size = [], [], [], []
            for i in range(args.repeats + 1):
                p, _ = cpu_per_turn(args.turns, backend, None)
                s, b = cpu_per_turn(args.turns, backend, folder / f"{backend}-{i}.db")
                f = floor_per_step(backend, folder, args.turns)
                if i:  # the first round warms up
                    plain.append(p)
                    saved.append(s)
                    floor.append(f)
                    size.append(b)
            added = statistics.median(saved) - statistics.median(plain)
            print(
                f"  {backend:8} no checkpointer {statistics.median(plain):.3f} ms/turn | "
                f"SQLite {statistics.median(saved):.3f} ms/turn | added {added:.3f} ms/turn | "
                f"floor (insert+commit) {statistics.median(floor):.3f} ms/step | "
                f"{statistics.median(size)} bytes/turn on disk"
            )
        for backend in ("asyncio", "trio"):
            total, on_disk = long_thread(backend, folder)
            print(
                f"  {backend:8} 200-turn thread over {total / 1e6:.2f} MB of files: "
                f"{on_disk / 1e6:.2f} MB on disk (a full snapshot per turn: "
                f"{200 * total / 1e6:.0f} MB)"
            )


if __name__ == "__main__":
    main()
