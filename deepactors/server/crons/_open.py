"""The cron book for a ``serve --db`` value."""

from __future__ import annotations

from ._books import CronBook, MemoryCronBook, SqliteCronBook

__all__ = ["open_cron_book"]


def open_cron_book(db: str | None) -> CronBook:
    """The cron book of ``serve --db``: in its SQLite file or PostgreSQL database, else memory.

    Raises:
        ConfigurationError: A PostgreSQL ``db`` without psycopg installed.
    """
    if db is None:
        return MemoryCronBook()
    if db.startswith(("postgresql://", "postgres://")):
        from ._postgres import PgCronBook

        return PgCronBook(db)
    return SqliteCronBook(db)
