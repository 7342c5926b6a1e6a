"""Scheduled runs (crons), as LangGraph's server offers them to ``client.crons``.

A cron names an assistant, a schedule (a cron expression, read in a time zone)
and what its runs are created with; on a thread, each firing runs on that
thread, else on a new one (deleted when its run ends, or kept). Its runs act
for the identity that made it. The crons live in the server's database
(``serve --db``: its SQLite file or PostgreSQL database; in memory without one),
and with several server processes on one database each firing is made by one
of them. See ``docs/serving.md`` for the policy on firings missed while no
server ran.
"""

from __future__ import annotations

from ._api import cron_routes as cron_routes
from ._books import CronBook as CronBook
from ._books import MemoryCronBook as MemoryCronBook
from ._books import SqliteCronBook as SqliteCronBook
from ._model import Cron as Cron
from ._open import open_cron_book as open_cron_book
from ._scheduler import Scheduler as Scheduler

__all__ = [
    "Cron",
    "CronBook",
    "MemoryCronBook",
    "Scheduler",
    "SqliteCronBook",
    "cron_routes",
    "open_cron_book",
]
