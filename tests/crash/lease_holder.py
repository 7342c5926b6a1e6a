"""Holds thread ``t`` of a SQLite file until killed, for the lease-takeover test.

    python lease_holder.py DB LOOP

Prints ``held`` once it holds the thread's lease (which lasts 10 minutes
unless renewed), then waits to be killed.
"""

from __future__ import annotations

import sys

import anyio

from deepactors.persistence import SqliteCheckpointer

DB, LOOP = sys.argv[1:3]


async def main() -> None:
    async with SqliteCheckpointer(DB, lease_ttl=600) as cp, cp.lease("t"):
        print("held", flush=True)
        await anyio.sleep(600)


anyio.run(main, backend=LOOP)
