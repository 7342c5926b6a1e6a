"""The actor runtime: thread actors with mailboxes under anyio task groups.

A run starts through a handle, and only through one: ``rt.thread(agent,
thread_id)`` (a :class:`ThreadHandle`) for a thread, ``rt.thread(agent)`` (a
:class:`OneShotHandle`) for a run that belongs to none.
"""

from __future__ import annotations

from .._core.public import publish as _publish
from ._actor import RunHandle as RunHandle
from ._actor import RunOptions as RunOptions
from ._actor import StartOptions as StartOptions
from ._background import BackgroundTask as BackgroundTask
from ._background import BackgroundTasks as BackgroundTasks
from ._background import TaskStatus as TaskStatus
from ._background import collected_update as collected_update
from ._background import task_notice as task_notice
from ._child import ChildOutcome as ChildOutcome
from ._child import ChildRunner as ChildRunner
from ._child import ChildStatus as ChildStatus
from ._child import outcome_event as outcome_event
from ._child import run_child as run_child
from ._handle import OneShotHandle as OneShotHandle
from ._handle import ThreadHandle as ThreadHandle
from ._runtime import ActorStatistics as ActorStatistics
from ._runtime import Runtime as Runtime
from ._runtime import SharedKey as SharedKey
from ._runtime import await_handle as await_handle
from ._runtime import current_runtime as current_runtime
from ._runtime import open_runtime as open_runtime
from ._spec import AgentSpec as AgentSpec
from ._spec import HasSpec as HasSpec
from ._spec import RunInput as RunInput
from ._spec import prepare_input as prepare_input
from ._stream import EventStream as EventStream
from ._stream import event_stream as event_stream
from ._sync import run_sync as run_sync
from ._sync import stream_sync as stream_sync
from ._threads import ThreadState as ThreadState
from ._threads import ThreadTask as ThreadTask
from ._threads import saved_state as saved_state

__all__ = [
    "ActorStatistics",
    "AgentSpec",
    "BackgroundTask",
    "BackgroundTasks",
    "ChildOutcome",
    "ChildRunner",
    "ChildStatus",
    "EventStream",
    "HasSpec",
    "OneShotHandle",
    "RunHandle",
    "RunInput",
    "RunOptions",
    "Runtime",
    "SharedKey",
    "StartOptions",
    "TaskStatus",
    "ThreadHandle",
    "ThreadState",
    "ThreadTask",
    "await_handle",
    "collected_update",
    "current_runtime",
    "event_stream",
    "open_runtime",
    "outcome_event",
    "prepare_input",
    "run_child",
    "run_sync",
    "saved_state",
    "stream_sync",
    "task_notice",
]

# Reprs and tracebacks name the public package, not the private module (see _core.public).
_publish(__all__, __name__, globals())
