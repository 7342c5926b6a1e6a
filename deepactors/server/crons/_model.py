"""A cron: a run made on a schedule, and how its next firing is found."""

from __future__ import annotations

import importlib
import json
import math
import sys
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, tzinfo
from typing import Literal, final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import anyio.to_thread

from ...errors import InputError
from .._records import iso

__all__ = [
    "MAX_CRONS",
    "Cron",
    "check_schedule",
    "check_timezone",
    "load_croniter",
    "next_fire",
    "parse_time",
]

MAX_CRONS = 10_000
"""Crons one server keeps at most (each is read on every scheduling pass)."""

OnCompleted = Literal["delete", "keep"]


def check_timezone(name: str | None) -> tzinfo:
    """The IANA time zone ``name`` (UTC for None).

    Raises:
        InputError: Not a time zone this machine knows.
    """
    if name is None or name in ("UTC", "Z"):
        return UTC
    if not isinstance(name, str) or len(name) > 64:
        raise InputError("timezone: an IANA time zone name, like 'Europe/Paris'")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise InputError(f"timezone: {name!r} is not a known IANA time zone") from None


async def load_croniter() -> None:
    """Import croniter in a worker thread, once, before anything on the loop needs it.

    It is imported only by a server that has crons; importing it (with
    dateutil) takes tens of milliseconds, which on the event loop would hold up
    every request and stream of the server meanwhile.
    """
    if "croniter" not in sys.modules:
        await anyio.to_thread.run_sync(importlib.import_module, "croniter")


def check_schedule(schedule: object) -> str:
    """A cron expression: 5 fields (minute first), or 6 with seconds last.

    Raises:
        InputError: Not one (the message says what a schedule looks like).
    """
    if not isinstance(schedule, str) or not 0 < len(schedule) <= 200:
        raise InputError("schedule: a cron expression, like '0 9 * * 1-5'")
    from croniter import croniter  # a server with no crons never needs it (load_croniter)

    fields = schedule.split()
    if len(fields) not in (5, 6) or not croniter.is_valid(schedule):
        raise InputError(
            f"schedule: {schedule[:100]!r} is not a cron expression: five fields "
            "(minute hour day month weekday, e.g. '0 9 * * 1-5'), or six with seconds last"
        )
    return " ".join(fields)


def next_fire(schedule: str, zone: str | None, after: float) -> float:
    """The first time (Unix seconds) after ``after`` that ``schedule`` names, in ``zone``."""
    from croniter import croniter

    start = datetime.fromtimestamp(after, check_timezone(zone))
    return float(croniter(schedule, start).get_next(float))


def parse_time(value: object, what: str) -> float | None:
    """An ISO 8601 date-time (UTC when it names no zone) as Unix seconds; None stays None.

    Raises:
        InputError: Not such a date-time.
    """
    if value is None:
        return None
    if not isinstance(value, str):
        raise InputError(f"{what}: an ISO 8601 date-time, like 2026-12-31T23:00:00Z")
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise InputError(f"{what}: {value[:60]!r} is not an ISO 8601 date-time") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


@final
@dataclass(slots=True, kw_only=True)
class Cron:
    """One scheduled run.

    Attributes:
        cron_id: Its id.
        assistant_id: The graph id of the assistant it runs.
        thread_id: The thread it runs on; None: each firing runs on a new thread.
        schedule: The cron expression (see :func:`check_schedule`).
        timezone: The IANA zone the schedule is read in (None: UTC).
        payload: What each run is created with (the run body's fields).
        metadata: The cron's own metadata (searchable).
        on_run_completed: For a cron with no thread: ``delete`` the run's thread
            when it ends, or ``keep`` it.
        end_time: No firing after this time (Unix seconds); None: no end.
        enabled: Whether it fires.
        owner: The identity (as JSON) that made it: its runs act for it.
        next_run: When it fires next (Unix seconds); None: never again.
    """

    cron_id: str
    assistant_id: str
    thread_id: str | None
    schedule: str
    timezone: str | None = None
    payload: dict[str, object] = field(default_factory=dict)
    metadata: dict[str, object] = field(default_factory=dict)
    on_run_completed: OnCompleted = "delete"
    end_time: float | None = None
    enabled: bool = True
    owner: dict[str, object] | None = None
    created_at: float = field(default_factory=time.time)
    updated_at: float = field(default_factory=time.time)
    next_run: float | None = None

    @property
    def user_id(self) -> str | None:
        """The id of the identity that made it (None without authentication)."""
        found = None if self.owner is None else self.owner.get("id")
        return found if isinstance(found, str) else None

    def schedule_from(self, after: float) -> None:
        """Set :attr:`next_run` to the first firing after ``after`` (None past the end)."""
        if not self.enabled:
            self.next_run = None
            return
        upcoming = next_fire(self.schedule, self.timezone, after)
        ended = self.end_time is not None and upcoming > self.end_time
        self.next_run = None if ended or not math.isfinite(upcoming) else upcoming

    def to_json(self, assistant_uuid: str) -> dict[str, object]:
        """The SDK's ``Cron``."""
        return {
            "cron_id": self.cron_id,
            "assistant_id": assistant_uuid,
            "thread_id": self.thread_id,
            "on_run_completed": None if self.thread_id else self.on_run_completed,
            "end_time": None if self.end_time is None else iso(self.end_time),
            "schedule": self.schedule,
            "timezone": self.timezone,
            "created_at": iso(self.created_at),
            "updated_at": iso(self.updated_at),
            "payload": {**self.payload, "assistant_id": self.assistant_id},
            "user_id": self.user_id,
            "next_run_date": None if self.next_run is None else iso(self.next_run),
            "metadata": self.metadata,
            "enabled": self.enabled,
        }

    def dumps(self) -> str:
        """As stored."""
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def loads(cls, data: str | bytes) -> Cron:
        """As :meth:`dumps` stored it."""
        return cls(**json.loads(data))
