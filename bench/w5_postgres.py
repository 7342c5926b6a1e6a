"""W5 on PostgreSQL: W1 with every step checkpointed, beside the driver's floor.

The W1 agent (K model turns on a FunctionModel, one trivial async tool call each,
default middleware) runs without a checkpointer and with ``PostgresCheckpointer``
(every step durable, committed, before the next model call), each in a fresh
database of a private server started with PostgreSQL's crash-safe defaults
(``PostgresServer(durable=True)``: fsync, synchronous commit). The difference is
the CPU checkpointing adds per turn.

The floor is the least PostgreSQL checkpointing can cost through the same
driver: the same compact JSON of one step's delta, one INSERT into a bare table
and one COMMIT per step, on one connection kept open (psycopg's
``AsyncConnection`` on asyncio, a sync ``Connection`` in an anyio worker thread
on trio, as the checkpointer does). Each turn commits ``commits/turn`` times
(counted afterwards: the rows of one transaction share its ``xmin``), so the
fair comparison is the added CPU per turn against ``floor x commits/turn``.

CPU is ``time.process_time``: this whole process, every thread included (the
pool's and anyio's workers); the server's own CPU is another process and not
counted. Medians of ``--repeats`` after a discarded warm-up. The machine is
shared: the figures are indicative.

    python bench/w5_postgres.py [--turns 300] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import psycopg

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent))

from w1_agent_loop import make_answer, noop
from w5_checkpoint import compact, step_delta

from deepactors import create_deep_agent
from deepactors.models import FunctionModel
from deepactors.persistence import PostgresCheckpointer
from tests.pgserver import PostgresServer


def cpu_per_turn(turns: int, backend: str, dsn: str | None) -> tuple[float, float]:
    """CPU ms per turn, and commits per turn (0 without a checkpointer)."""
    kwargs: dict[str, Any] = {}
    cp = PostgresCheckpointer(dsn) if dsn is not None else None
    if cp is not None:
        kwargs["checkpointer"] = cp
    agent = create_deep_agent(FunctionModel(make_answer(turns, 1)), tools=[noop], **kwargs)

    async def run() -> tuple[int, int]:
        if cp is not None:
            await cp.threads()  # pool open and schema made before the clock starts
        t0 = time.process_time()
        result = await agent.ainvoke("go", thread_id="w5" if cp is not None else None)
        cpu = time.process_time() - t0
        calls = sum(1 for m in result["messages"] if m.role == "assistant")
        if cp is not None:
            await cp.aclose()
        return int(cpu * 1e9) // calls, calls

    ns, calls = anyio.run(run, backend=backend)
    return ns / 1e6, (commits(dsn) / calls if dsn is not None else 0.0)


def commits(dsn: str) -> int:
    """Transactions that stored records (rows of one transaction share its xmin)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT count(DISTINCT xmin::text) FROM checkpoint_records").fetchone()
    assert row is not None
    return int(row[0])


_BARE = "CREATE TABLE IF NOT EXISTS steps (id bigserial PRIMARY KEY, data text NOT NULL)"
_INSERT = "INSERT INTO steps (data) VALUES (%s)"


async def floor_asyncio(dsn: str, texts: list[str]) -> float:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        await conn.execute(_BARE)
        c0 = time.process_time()
        for text in texts:
            # Autocommit: each INSERT is its own transaction, committed on return.
            await conn.execute(_INSERT, (text,))
        return time.process_time() - c0


async def floor_trio(dsn: str, texts: list[str]) -> float:
    conn = await anyio.to_thread.run_sync(lambda: psycopg.Connection.connect(dsn, autocommit=True))
    try:
        await anyio.to_thread.run_sync(conn.execute, _BARE)
        c0 = time.process_time()
        for text in texts:
            await anyio.to_thread.run_sync(conn.execute, _INSERT, (text,))
        return time.process_time() - c0
    finally:
        await anyio.to_thread.run_sync(conn.close)


def floor_per_step(backend: str, dsn: str, steps: int) -> float:
    texts = [compact(step_delta(i)) for i in range(steps)]
    fn = floor_asyncio if backend == "asyncio" else floor_trio
    seconds: float = anyio.run(fn, dsn, texts, backend=backend)
    return seconds / steps * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(
        f"W5 on PostgreSQL: {args.turns} turns, one tool call each, checkpoint after every "
        f"step (durable server; median of {args.repeats}; indicative, shared machine)"
    )
    with PostgresServer(durable=True) as server:
        for backend in ("asyncio", "trio"):
            plain, saved, floor, commit_counts = [], [], [], []
            for i in range(args.repeats + 1):
                p, _ = cpu_per_turn(args.turns, backend, None)
                s, c = cpu_per_turn(args.turns, backend, server.new_database())
                f = floor_per_step(backend, server.new_database(), args.turns)
                if i:  # the first round warms up
                    plain.append(p)
                    saved.append(s)
                    floor.append(f)
                    commit_counts.append(c)
            added = statistics.median(saved) - statistics.median(plain)
            per_turn = statistics.median(commit_counts)
            floor_step = statistics.median(floor)
            print(
                f"  {backend:8} no checkpointer {statistics.median(plain):.3f} ms/turn | "
                f"PostgreSQL {statistics.median(saved):.3f} ms/turn | added {added:.3f} ms/turn"
                f" | floor {floor_step:.3f} ms/commit (insert+commit) x {per_turn:.2f} commits/turn"
                f" = {floor_step * per_turn:.3f} ms/turn"
            )


if __name__ == "__main__":
    main()
