"""The actor runtime: thread actors with mailboxes under anyio task groups."""

from __future__ import annotations

from ._loop import CompiledAgent as CompiledAgent
from ._runtime import ActorStatistics as ActorStatistics
from ._runtime import RunHandle as RunHandle
from ._runtime import Runtime as Runtime
from ._runtime import open_runtime as open_runtime
from ._stream import EventStream as EventStream

__all__ = [
    "ActorStatistics",
    "CompiledAgent",
    "EventStream",
    "RunHandle",
    "Runtime",
    "open_runtime",
]
