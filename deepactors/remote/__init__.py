"""Remote subagents: a subagent that runs as a run on another Agent Protocol server.

A fleet of ``deepactors serve`` processes (or LangGraph's own server) becomes
the engine that runs one tree's subagents: the ``task`` tool (and the
background-task tools) run a :class:`RemoteAgent` where a local subagent
would run, and its answer and file changes merge into the parent exactly as a
local child's do. Deadlines, budgets and cancellation carry over; events
stream back under the child's actor path. See ``docs/remote-subagents.md``.

Needs ``httpx`` (``pip install 'deepactors[remote]'``; it comes with the
Anthropic client too).
"""

from __future__ import annotations

from .._core.public import publish as _publish
from ._agent import DEFAULT_CANCEL_TIMEOUT as DEFAULT_CANCEL_TIMEOUT
from ._agent import DEFAULT_CONNECT_TIMEOUT as DEFAULT_CONNECT_TIMEOUT
from ._agent import DEFAULT_IDLE_TIMEOUT as DEFAULT_IDLE_TIMEOUT
from ._agent import DEFAULT_MAX_ANSWER_BYTES as DEFAULT_MAX_ANSWER_BYTES
from ._agent import DEFAULT_READ_TIMEOUT as DEFAULT_READ_TIMEOUT
from ._agent import RemoteAgent as RemoteAgent
from ._child import DEADLINE_GRACE as DEADLINE_GRACE
from ._child import REMOTE_RUN as REMOTE_RUN
from ._limits import LIMITS_KEY as LIMITS_KEY
from ._limits import read_limits as read_limits

__all__ = [
    "DEADLINE_GRACE",
    "DEFAULT_CANCEL_TIMEOUT",
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_IDLE_TIMEOUT",
    "DEFAULT_MAX_ANSWER_BYTES",
    "DEFAULT_READ_TIMEOUT",
    "LIMITS_KEY",
    "REMOTE_RUN",
    "RemoteAgent",
    "read_limits",
]

_publish(__all__, __name__, globals())
