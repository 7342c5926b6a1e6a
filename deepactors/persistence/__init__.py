"""Persistence: checkpointers (thread state) and stores (long-term memory)."""

from ._checkpoint import Checkpointer as Checkpointer
from ._checkpoint import CheckpointRecord as CheckpointRecord
from ._checkpoint import CheckpointWrite as CheckpointWrite
from ._checkpoint import MemoryCheckpointer as MemoryCheckpointer
from ._checkpoint import ThreadInfo as ThreadInfo
from ._sqlite import CHECKPOINT_SCHEMA_VERSION as CHECKPOINT_SCHEMA_VERSION
from ._sqlite import STORE_SCHEMA_VERSION as STORE_SCHEMA_VERSION
from ._sqlite import SqliteCheckpointer as SqliteCheckpointer
from ._sqlite import SqliteStore as SqliteStore
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
]
