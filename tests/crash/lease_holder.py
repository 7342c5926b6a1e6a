"""Holds thread ``t`` until killed, for the lease-takeover test.

    python lease_holder.py DB LOOP

DB is a SQLite file (whose lease lasts 10 minutes unless renewed) or a
``postgresql://`` URL (whose lease is an advisory lock on a connection).
Prints ``held`` once it holds the thread's lease, then waits to be killed.
"""

from __future__ import annotations

import sys

import anyio

from deepactors.persistence import is_postgres_url, open_checkpointer

DB, LOOP = sys.argv[1:3]


async def main() -> None:
    options = {} if is_postgres_url(DB) else {"lease_ttl": 600}
    async with open_checkpointer(DB, **options) as cp, cp.lease("t"):
        print("held", flush=True)
        await anyio.sleep_forever()  # until the test kills the process


anyio.run(main, backend=LOOP)
