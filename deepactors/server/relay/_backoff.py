"""How long the relay waits between attempts to reach its database again, and for how long.

Apart from ``_pg_db`` so that importing the relay (every server does) does not
import psycopg, the ``postgres`` extra, which only a server with ``--runs-db`` needs.
"""

from __future__ import annotations

import math
import random

from ...errors import ConfigurationError

FOLLOW_PATIENCE = 30.0
"""Seconds a follower keeps trying to read another process's run while the database
is unreachable (the default of ``create_app``'s ``runs_db_patience``)."""


def patience(value: float) -> float:
    """``value`` as the seconds a follower keeps trying, checked.

    Raises:
        ConfigurationError: Not a finite number of seconds > 0.
    """
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
        raise ConfigurationError(
            f"runs_db_patience: seconds > 0 a follower keeps trying while the runs database "
            f"is unreachable, not {value!r}"
        )
    return float(value)


def backoff(attempt: int, *, first: float = 0.25, most: float = 5.0) -> float:
    """Seconds to wait before reconnection attempt ``attempt`` (0 for the first).

    Doubling from ``first`` up to ``most``, each drawn between half and all of
    that, so processes that lost the database together do not come back in step.
    """
    return min(most, first * 2.0**attempt) * random.uniform(0.5, 1.0)
