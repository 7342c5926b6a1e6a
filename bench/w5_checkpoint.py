"""W5 (storage part): CPU per checkpointed step in SQLite, beside the storage floor.

Each step saves one record: a realistic per-step delta of ~1.5 KB of JSON (one
assistant message with a tool call, and the tool's result), as the runtime will
save before its next model call.

- **ours**: ``SqliteCheckpointer.put(thread, [CheckpointWrite(...)])``, which
  encodes the JSON, opens one transaction, numbers the record and commits.
- **floor**: the least any SQLite checkpointing can do per step: the same
  compact JSON text of the delta, one INSERT into a bare table and one COMMIT, through
  aiosqlite on asyncio and through ``sqlite3`` in an anyio worker thread on trio.

Both use WAL with ``synchronous=NORMAL`` on a fresh file. CPU is
``time.process_time`` (every thread of the process: SQLite works in a worker
thread), median of the repeats after a discarded warm-up.

    python bench/w5_checkpoint.py [--steps 2000] [--repeats 5]

Prints ms per step for both, the ratio and the difference, and bytes on disk
per step (the file after the WAL is checkpointed away on close).
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiosqlite
import anyio
import anyio.to_thread

from deepactors import AssistantMessage, ToolCall, ToolMessage
from deepactors.persistence import CheckpointWrite, SqliteCheckpointer


def step_delta(step: int) -> dict[str, Any]:
    """One step's changes: an assistant turn with a tool call, and its result."""
    call = ToolCall(
        name="internet_search",
        args={"query": f"actor runtimes structured concurrency, part {step}", "max_results": 5},
    )
    assistant = AssistantMessage(
        content=f"Step {step}: I will look for recent work on actor runtimes before I write.",
        tool_calls=[call],
    )
    result = ToolMessage(
        tool_call_id=call.id,
        name=call.name,
        content="\n".join(
            f"{k}. https://example.org/paper-{step}-{k} — Structured concurrency and actors: "
            f"supervision trees, cancellation scopes and mailboxes, compared (result {k})."
            for k in range(1, 6)
        ),
    )
    return {
        "messages": [assistant.model_dump(mode="json"), result.model_dump(mode="json")],
        "pending_tool_calls": [],
    }


def compact(delta: dict[str, Any]) -> str:
    """The same JSON text the checkpointer stores."""
    return json.dumps(delta, separators=(",", ":"), ensure_ascii=False)


def fresh(folder: Path, name: str) -> Path:
    file = folder / f"{name}.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{file}{suffix}").unlink(missing_ok=True)
    return file


def bare_table(file: Path) -> None:
    with sqlite3.connect(file) as raw:
        raw.execute("PRAGMA journal_mode=WAL")
        raw.execute("CREATE TABLE steps (id INTEGER PRIMARY KEY, data TEXT NOT NULL)")
    raw.close()


async def floor_asyncio(file: Path, deltas: list[dict[str, Any]]) -> float:
    bare_table(file)
    db = await aiosqlite.connect(file)
    try:
        await db.execute("PRAGMA synchronous=NORMAL")
        c0 = time.process_time()
        for delta in deltas:
            await db.execute("INSERT INTO steps (data) VALUES (?)", (compact(delta),))
            await db.commit()
        return time.process_time() - c0
    finally:
        await db.close()


async def floor_trio(file: Path, deltas: list[dict[str, Any]]) -> float:
    bare_table(file)
    raw = sqlite3.connect(file, check_same_thread=False)
    raw.execute("PRAGMA synchronous=NORMAL")

    def insert(text: str) -> None:
        raw.execute("INSERT INTO steps (data) VALUES (?)", (text,))
        raw.commit()

    try:
        c0 = time.process_time()
        for delta in deltas:
            await anyio.to_thread.run_sync(insert, compact(delta))
        return time.process_time() - c0
    finally:
        raw.close()


async def ours(file: Path, deltas: list[dict[str, Any]]) -> float:
    async with SqliteCheckpointer(file) as cp:
        await cp.threads()  # open before the clock starts, as the floor does
        c0 = time.process_time()
        for step, delta in enumerate(deltas):
            await cp.put(
                "bench", [CheckpointWrite(path="main", step=step, kind="step", data=delta)]
            )
        return time.process_time() - c0


Runner = Callable[[Path, list[dict[str, Any]]], Awaitable[float]]


def measure(
    backend: str, runner: Runner, folder: Path, deltas: list[dict[str, Any]], repeats: int
) -> tuple[float, int]:
    """Median CPU seconds per step, and bytes on disk per step of the last run."""
    per_step: list[float] = []
    file = folder
    for i in range(repeats + 1):
        file = fresh(folder, f"{backend}-{runner.__name__}")
        cpu = anyio.run(runner, file, deltas, backend=backend)
        if i:  # the first run warms caches and imports
            per_step.append(cpu / len(deltas))
    return statistics.median(per_step), file.stat().st_size // len(deltas)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    deltas = [step_delta(i) for i in range(args.steps)]
    json_bytes = statistics.mean(len(compact(d).encode()) for d in deltas)
    print(
        f"W5 storage: {args.steps} steps, one record of ~{json_bytes:.0f} B JSON per step "
        f"(median of {args.repeats})"
    )
    print(
        f"{'loop':8} {'floor ms/step':>14} {'ours ms/step':>13} {'ratio':>6} {'added ms':>9}"
        f" {'floor B/step':>13} {'ours B/step':>12}"
    )
    floors: dict[str, Runner] = {"asyncio": floor_asyncio, "trio": floor_trio}
    with tempfile.TemporaryDirectory(prefix="w5-") as tmp:
        folder = Path(tmp)
        for backend, floor in floors.items():
            floor_cpu, floor_bytes = measure(backend, floor, folder, deltas, args.repeats)
            our_cpu, our_bytes = measure(backend, ours, folder, deltas, args.repeats)
            print(
                f"{backend:8} {floor_cpu * 1e3:14.3f} {our_cpu * 1e3:13.3f}"
                f" {our_cpu / floor_cpu:6.2f} {(our_cpu - floor_cpu) * 1e3:+9.3f}"
                f" {floor_bytes:13d} {our_bytes:12d}"
            )


if __name__ == "__main__":
    main()
