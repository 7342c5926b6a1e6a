"""Times as people and other systems read them: ISO 8601, UTC, to the second."""

from __future__ import annotations

import time

__all__ = ["utc_stamp"]


def utc_stamp(at: float | None = None) -> str:
    """``at`` (``time.time()`` seconds; now when None) as ``2026-11-26T09:05:00Z``.

    The form deepagents stamps its tasks with, and what an outage's "since"
    and a summary's heading say.
    """
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))
