"""Persistence: checkpointers (thread state) and stores (long-term memory)."""

from .store import MemoryStore as MemoryStore
from .store import Namespace as Namespace
from .store import Store as Store
from .store import StoreItem as StoreItem

__all__ = ["MemoryStore", "Namespace", "Store", "StoreItem"]
