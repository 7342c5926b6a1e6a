"""SQLite checkpointer and store: one database file, on either event loop.

Each database is a connection on a worker thread (``aiosqlite``'s, or a thread
of the loop seam's on trio), in WAL mode; a lease per thread, kept in the file,
lets one run at a time write a thread across processes. A damaged file is
diagnosed, never silently read short.
"""

from __future__ import annotations

from ._checkpoint import CHECKPOINT_SCHEMA_VERSION as CHECKPOINT_SCHEMA_VERSION
from ._checkpoint import SqliteCheckpointer as SqliteCheckpointer
from ._conn import Database as Database
from ._conn import Errors as Errors
from ._conn import Schema as Schema
from ._store import STORE_SCHEMA_VERSION as STORE_SCHEMA_VERSION
from ._store import SqliteStore as SqliteStore
from ._thread_meta import THREAD_METADATA_SCHEMA_VERSION as THREAD_METADATA_SCHEMA_VERSION
from ._thread_meta import SqliteThreadMetadata as SqliteThreadMetadata
from ._thread_meta import ThreadMetadata as ThreadMetadata

__all__ = [
    "CHECKPOINT_SCHEMA_VERSION",
    "STORE_SCHEMA_VERSION",
    "THREAD_METADATA_SCHEMA_VERSION",
    "Database",
    "Errors",
    "Schema",
    "SqliteCheckpointer",
    "SqliteStore",
    "SqliteThreadMetadata",
    "ThreadMetadata",
]
