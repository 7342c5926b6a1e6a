"""How long the relay waits between attempts to reach its database again.

Apart from ``_pg_db`` so that importing the relay (every server does) does not
import psycopg, the ``postgres`` extra, which only a server with ``--runs-db`` needs.
"""

from __future__ import annotations

import random


def backoff(attempt: int, *, first: float = 0.25, most: float = 5.0) -> float:
    """Seconds to wait before reconnection attempt ``attempt`` (0 for the first).

    Doubling from ``first`` up to ``most``, each drawn between half and all of
    that, so processes that lost the database together do not come back in step.
    """
    return min(most, first * 2.0**attempt) * random.uniform(0.5, 1.0)
