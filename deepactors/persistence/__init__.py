"""Persistence: checkpointers (thread state) and stores (long-term memory).

Checkpointers keep each conversation thread's records and hand out its lease
(one run per thread at a time); stores keep long-term memory by namespace. Both
come in memory and SQLite forms that behave the same.
"""

from ._checkpoint import Checkpointer as Checkpointer
from ._checkpoint import CheckpointRecord as CheckpointRecord
from ._checkpoint import CheckpointWrite as CheckpointWrite
from ._checkpoint import MemoryCheckpointer as MemoryCheckpointer
from ._checkpoint import ThreadInfo as ThreadInfo
from ._lease import ThreadLease as ThreadLease
from ._lease import WhenBusy as WhenBusy
from ._sqlite_checkpoint import CHECKPOINT_SCHEMA_VERSION as CHECKPOINT_SCHEMA_VERSION
from ._sqlite_checkpoint import SqliteCheckpointer as SqliteCheckpointer
from ._sqlite_store import STORE_SCHEMA_VERSION as STORE_SCHEMA_VERSION
from ._sqlite_store import SqliteStore as SqliteStore
from .store import MemoryStore as MemoryStore
from .store import Namespace as Namespace
from .store import Store as Store
from .store import StoreItem as StoreItem

__all__ = [
    "CHECKPOINT_SCHEMA_VERSION",
    "STORE_SCHEMA_VERSION",
    "CheckpointRecord",
    "CheckpointWrite",
    "Checkpointer",
    "MemoryCheckpointer",
    "MemoryStore",
    "Namespace",
    "SqliteCheckpointer",
    "SqliteStore",
    "Store",
    "StoreItem",
    "ThreadInfo",
    "ThreadLease",
    "WhenBusy",
]
