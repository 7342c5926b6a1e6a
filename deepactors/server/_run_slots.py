"""The cap on runs in flight per client: its identity, else its address.

Every run counts from its creation until its record is final, whatever its kind:
streamed, waited for, in the background, stateless, queued behind another on its
thread. A run past the cap is refused before anything of it is done (no fork, no
run interrupted to make room, nothing queued), with 429 and ``Retry-After``.

Who a run counts against is the request's key (``_guard.CLIENT``): its identity
when the server authenticates, else its address, which is the client's own from
a trusted proxy's ``X-Forwarded-For`` (``trusted_proxies``); a request with
neither (work the server starts itself) is not counted. One process counts its
own runs: with ``--workers N`` a client may have N times the cap in all.
"""

from __future__ import annotations

from collections.abc import Hashable

from starlette.exceptions import HTTPException

from ..errors import ConfigurationError
from ._guard import CLIENT

__all__ = ["DEFAULT_MAX_RUNS_PER_CLIENT", "RETRY_AFTER_FULL", "RunSlots"]

DEFAULT_MAX_RUNS_PER_CLIENT = 100
"""Runs one client may have in flight at once (as many as streams: a stream is a
run, and a client at its stream cap can still start no more than that)."""

RETRY_AFTER_FULL = 1
"""Seconds a client refused for its runs in flight is told to wait (``Retry-After``):
how long its runs last is not known, and asking again costs a lookup."""


class RunSlots:
    """Runs in flight per client key.

    Args:
        cap: Runs one key may have in flight (None: no cap, nothing counted).

    Raises:
        ConfigurationError: A cap below 1.
    """

    __slots__ = ("_held", "cap")

    def __init__(self, cap: int | None) -> None:
        if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 1):
            raise ConfigurationError(
                f"max_runs_per_client must be at least 1 (None: no cap), not {cap!r}"
            )
        self.cap = cap
        self._held: dict[Hashable, int] = {}

    def take(self) -> Hashable | None:
        """Count a new run against the request's key; the key, to give back when it ends.

        Raises:
            HTTPException: 429, the key has ``cap`` runs in flight already.
        """
        key = CLIENT.get() if self.cap is not None else None
        if key is None:
            return None
        held = self._held.get(key, 0)
        assert self.cap is not None
        if held >= self.cap:
            raise HTTPException(
                429,
                f"this client has {held} runs in flight, the most it may: wait for one to "
                "end, or cancel one (the server's --max-runs-per-client)",
                headers={"Retry-After": str(RETRY_AFTER_FULL)},
            )
        self._held[key] = held + 1
        return key

    def give_back(self, key: Hashable | None) -> None:
        """A run counted against ``key`` has ended (or was never made)."""
        if key is None:
            return
        left = self._held[key] - 1
        if left:
            self._held[key] = left
        else:
            del self._held[key]

    def held(self, key: Hashable) -> int:
        """Runs in flight counted against ``key`` now."""
        return self._held.get(key, 0)
