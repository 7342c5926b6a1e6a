"""W5 (storage part): what durability costs per step, beside framework-free floors.

Two comparisons, each in one run, the floor and deepactors alternating:

**The journal per turn** (the figure to hold deepactors to, issue 45): the W1
agent (``bench/w1_agent_loop.py``: turns of one trivial tool call each, the
default middleware) runs with and without ``SqliteCheckpointer``; what the
checkpointer adds per turn (every step durable before the next model call) is
set beside **the async journal floor**: a framework-free async program that
makes a turn durable the plainest way there is: the turn's messages (the
assistant message with its tool call and the tool's result, the same pydantic
messages) to JSON, then one INSERT and one COMMIT on a worker thread
(``anyio.to_thread``, on asyncio and trio alike), WAL with
``synchronous=NORMAL``. CPU is ``time.process_time`` (every thread).

**The store per record**: one record of a realistic ~1.5 KB JSON per step
(an assistant message with a tool call, and the tool's result):

- **ours**: ``SqliteCheckpointer.put(thread, [CheckpointWrite(...)])``, which
  encodes the JSON, opens one transaction, numbers the record and commits.
- **floor**: the least any SQLite checkpointing can do per step: the same
  compact JSON text of the delta, one INSERT into a bare table and one COMMIT, through
  aiosqlite on asyncio and through ``sqlite3`` in an anyio worker thread on trio.

Both use WAL with ``synchronous=NORMAL`` on a fresh file; medians of the
repeats after a discarded warm-up, with their ranges.

    python bench/w5_checkpoint.py [--turns 300] [--steps 2000] [--repeats 5]
                                  [--loops asyncio trio] [--only journal|store]

Prints ms per turn (per step) for both, the ratio and the difference, and for
the store, bytes on disk per step (the file after the WAL is checkpointed away
on close). ``bench/instructions.py w5`` counts the journal's instructions.
"""

from __future__ import annotations

import argparse
import functools
import json
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiosqlite
import anyio
import anyio.to_thread
import sniffio

sys.path.insert(0, str(Path(__file__).parent))

from w1_agent_loop import make_answer, noop

from deepactors import AssistantMessage, ToolCall, ToolMessage, UserMessage, create_deep_agent
from deepactors.messages import Message
from deepactors.models import FunctionModel
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


# -- the journal per turn ---------------------------------------------------------------


def turn_messages(turns: int) -> list[list[Message]]:
    """Each turn's new messages as W1's agent makes them: a call of ``noop``, its result."""
    answer = make_answer(turns, 1)
    out: list[list[Message]] = []
    history: list[Message] = [UserMessage(content="go")]
    for _ in range(turns):
        message = answer(history)
        call = message.tool_calls[0]
        result = ToolMessage(tool_call_id=call.id, name=call.name, content="ok")
        history += [message, result]
        out.append([message, result])
    return out


async def journal_floor(file: Path, turns: list[list[Message]]) -> float:
    """The async journal floor: JSON of a turn's messages, one INSERT, one COMMIT, off the loop.

    Written against each loop directly (``asyncio.to_thread``, ``trio.to_thread``):
    the least a program pays for a worker thread's round trip on it.
    """
    c0 = time.process_time()
    bare_table(file)
    raw = sqlite3.connect(file, check_same_thread=False)
    raw.execute("PRAGMA synchronous=NORMAL")

    def insert(text: str) -> None:
        raw.execute("INSERT INTO steps (data) VALUES (?)", (text,))
        raw.commit()

    if sniffio.current_async_library() == "trio":
        import trio

        hop: Callable[[str], Awaitable[None]] = functools.partial(trio.to_thread.run_sync, insert)
    else:
        import asyncio

        hop = functools.partial(asyncio.to_thread, insert)
    try:
        for messages in turns:
            await hop(compact({"messages": [m.model_dump(mode="json") for m in messages]}))
        return time.process_time() - c0
    finally:
        raw.close()


def agent_cpu(backend: str, turns: int, db: Path | None) -> float:
    """CPU seconds of one W1 run of ``turns`` turns, checkpointed to ``db`` (None: not)."""
    kwargs: dict[str, Any] = {}
    if db is not None:
        kwargs["checkpointer"] = SqliteCheckpointer(db)
    agent = create_deep_agent(FunctionModel(make_answer(turns, 1)), tools=[noop], **kwargs)

    async def run() -> None:
        result = await agent.ainvoke("go", thread_id="w5" if db is not None else None)
        assert sum(1 for m in result["messages"] if m.role == "tool") == turns

    c0 = time.process_time()
    anyio.run(run, backend=backend)
    return time.process_time() - c0


def journal_worker(impl: str, backend: str, turns: int) -> None:
    """One run, for an instruction counter: ``floor``, ``plain`` or ``sqlite``."""
    with tempfile.TemporaryDirectory(prefix="w5-") as tmp:
        folder = Path(tmp)
        if impl == "floor":
            anyio.run(journal_floor, folder / "warm.db", turn_messages(5), backend=backend)
            anyio.run(journal_floor, folder / "floor.db", turn_messages(turns), backend=backend)
            return
        db = None if impl == "plain" else folder / "ours.db"
        agent_cpu(backend, 5, None if db is None else folder / "warm.db")
        agent_cpu(backend, turns, db)


def journal_table(loops: list[str], turns: int, repeats: int) -> None:
    # Per turn as a difference of two run lengths, for the floor and deepactors
    # alike: what a run pays once (a connection, the schema check, the lease,
    # the agent's set-up) cancels out.
    base = max(turns // 10, 2)
    print(
        f"W5 journal: W1 turns (one tool call each), every step durable; per turn from runs "
        f"of {turns} and {base} turns; medians of {repeats} (ranges)"
    )
    print(
        f"{'loop':8} {'floor ms/turn':>22} {'deepactors adds':>22} {'ratio':>6}"
        f"   (deepactors without a checkpointer: ms/turn)"
    )
    long, short = turn_messages(turns), turn_messages(base)
    with tempfile.TemporaryDirectory(prefix="w5-") as tmp:
        folder = Path(tmp)

        def floor_cpu(backend: str, messages: list[list[Message]]) -> float:
            file = fresh(folder, "floor")
            return float(anyio.run(journal_floor, file, messages, backend=backend))

        for backend in loops:
            floor: list[float] = []
            added: list[float] = []
            plain: list[float] = []
            for i in range(repeats + 1):
                # Alternating, so a change in the machine's load hits all of them.
                f = floor_cpu(backend, long) - floor_cpu(backend, short)
                p = agent_cpu(backend, turns, None) - agent_cpu(backend, base, None)
                s = agent_cpu(backend, turns, fresh(folder, "ours")) - agent_cpu(
                    backend, base, fresh(folder, "ours-short")
                )
                if i:  # the first round warms up
                    floor.append(f / (turns - base) * 1e3)
                    added.append((s - p) / (turns - base) * 1e3)
                    plain.append(p / (turns - base) * 1e3)
            fm, am = statistics.median(floor), statistics.median(added)
            print(
                f"{backend:8} {fm:8.3f} ({min(floor):.3f}..{max(floor):.3f})"
                f" {am:8.3f} ({min(added):.3f}..{max(added):.3f}) {am / fm:6.2f}"
                f"   ({statistics.median(plain):.3f})"
            )


def store_table(loops: list[str], steps: int, repeats: int) -> None:
    deltas = [step_delta(i) for i in range(steps)]
    json_bytes = statistics.mean(len(compact(d).encode()) for d in deltas)
    print(
        f"W5 storage: {steps} steps, one record of ~{json_bytes:.0f} B JSON per step "
        f"(median of {repeats})"
    )
    print(
        f"{'loop':8} {'floor ms/step':>14} {'ours ms/step':>13} {'ratio':>6} {'added ms':>9}"
        f" {'floor B/step':>13} {'ours B/step':>12}"
    )
    floors: dict[str, Runner] = {"asyncio": floor_asyncio, "trio": floor_trio}
    with tempfile.TemporaryDirectory(prefix="w5-") as tmp:
        folder = Path(tmp)
        for backend in loops:
            floor_cpu, floor_bytes = measure(backend, floors[backend], folder, deltas, repeats)
            our_cpu, our_bytes = measure(backend, ours, folder, deltas, repeats)
            print(
                f"{backend:8} {floor_cpu * 1e3:14.3f} {our_cpu * 1e3:13.3f}"
                f" {our_cpu / floor_cpu:6.2f} {(our_cpu - floor_cpu) * 1e3:+9.3f}"
                f" {floor_bytes:13d} {our_bytes:12d}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--turns", type=int, default=300, help="turns of the journal's W1 run")
    parser.add_argument("--steps", type=int, default=2000, help="records of the store's run")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--loops", nargs="+", default=["asyncio", "trio"])
    parser.add_argument("--only", choices=["journal", "store"])
    parser.add_argument(
        "--worker", nargs=3, metavar=("IMPL", "LOOP", "TURNS"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.worker:
        impl, backend, turns = args.worker
        journal_worker(impl, backend, int(turns))
        return
    if args.only != "store":
        journal_table(args.loops, args.turns, args.repeats)
    if args.only != "journal":
        store_table(args.loops, args.steps, args.repeats)


if __name__ == "__main__":
    main()
