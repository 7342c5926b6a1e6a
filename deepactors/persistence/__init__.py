"""Persistence: checkpointers (thread state) and stores (long-term memory).

Checkpointers keep each conversation thread's records and hand out its lease
(one run per thread at a time); stores keep long-term memory by namespace. Both
come in memory, SQLite and PostgreSQL forms that behave the same.

``PostgresCheckpointer`` and ``PostgresStore`` need psycopg 3, the optional
``[postgres]`` extra. They are resolved by the module ``__getattr__`` below on
first access, so that importing ``deepactors.persistence`` does not require
psycopg; without it, accessing them raises an ImportError saying
``pip install 'deepactors[postgres]'``. (Not an import-circle dodge: the
PostgreSQL modules import nothing above themselves.)
"""

from typing import TYPE_CHECKING

from .._core.public import publish as _publish
from ._checkpoint import Checkpointer as Checkpointer
from ._checkpoint import CheckpointRecord as CheckpointRecord
from ._checkpoint import CheckpointWrite as CheckpointWrite
from ._checkpoint import EncodedPut as EncodedPut
from ._checkpoint import EncodedWrite as EncodedWrite
from ._checkpoint import MemoryCheckpointer as MemoryCheckpointer
from ._checkpoint import Rewritable as Rewritable
from ._checkpoint import ThreadInfo as ThreadInfo
from ._checkpoint import check_thread_id as check_thread_id
from ._checkpoint import encode_writes as encode_writes
from ._checkpoint import encoded_put as encoded_put
from ._json import encode_object as encode_object
from ._lease import ThreadLease as ThreadLease
from ._lease import WhenBusy as WhenBusy
from ._open import is_postgres_url as is_postgres_url
from ._open import open_checkpointer as open_checkpointer
from ._open import open_store as open_store
from .postgres import POSTGRES_NAMES, load
from .sqlite import CHECKPOINT_SCHEMA_VERSION as CHECKPOINT_SCHEMA_VERSION
from .sqlite import STORE_SCHEMA_VERSION as STORE_SCHEMA_VERSION
from .sqlite import SqliteCheckpointer as SqliteCheckpointer
from .sqlite import SqliteStore as SqliteStore
from .sqlite import SqliteThreadMetadata as SqliteThreadMetadata
from .sqlite import ThreadMetadata as ThreadMetadata
from .store import MemoryStore as MemoryStore
from .store import Namespace as Namespace
from .store import Store as Store
from .store import StoreItem as StoreItem

if TYPE_CHECKING:
    from .postgres import PG_CHECKPOINT_SCHEMA_VERSION as PG_CHECKPOINT_SCHEMA_VERSION
    from .postgres import PG_STORE_SCHEMA_VERSION as PG_STORE_SCHEMA_VERSION
    from .postgres import PostgresCheckpointer as PostgresCheckpointer
    from .postgres import PostgresStore as PostgresStore


def __getattr__(name: str) -> object:
    # psycopg is optional: see the module docstring. (Its names are not in
    # __all__, so that a star import works without it.)
    if name in POSTGRES_NAMES:
        return load(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "CHECKPOINT_SCHEMA_VERSION",
    "STORE_SCHEMA_VERSION",
    "CheckpointRecord",
    "CheckpointWrite",
    "Checkpointer",
    "EncodedPut",
    "EncodedWrite",
    "MemoryCheckpointer",
    "MemoryStore",
    "Namespace",
    "Rewritable",
    "SqliteCheckpointer",
    "SqliteStore",
    "SqliteThreadMetadata",
    "Store",
    "StoreItem",
    "ThreadInfo",
    "ThreadLease",
    "ThreadMetadata",
    "WhenBusy",
    "check_thread_id",
    "is_postgres_url",
    "open_checkpointer",
    "open_store",
]

# Reprs and tracebacks name the public package, not the private module (see _core.public).
_publish(__all__, __name__, globals())
