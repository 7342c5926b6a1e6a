"""Agent state: named channels, each folded by its own reducer.

A state is owned by exactly one actor, which changes it only through
:meth:`State.apply`. That single door is what lets the runtime record every
change (for events and checkpoints) and what makes reducers the only place where
concurrent results meet.

Built-in channels:

* ``messages``: appends; a message whose id is already present replaces it;
  :class:`RemoveMessage` removes one (or all, with :data:`REMOVE_ALL_MESSAGES`).
* ``todos``: the latest list replaces the previous one. Private: only
  ``write_todos`` sets it, never user input.
* ``files``: a per-path merge; a :class:`FileRecord` sets a path, ``None`` deletes it.
* ``structured_response``: replaces.

Middleware declare further channels with :class:`Channel`.

The package is split along one seam: ``_files`` holds the ``files`` channel at
each edge (input, a tool's update, a subagent's diff, checkpoints), ``_state``
the rest (the mapping, its channels, validating a run's input).
"""

from __future__ import annotations

from ..filediff import FileRecord as FileRecord
from ..history import MessageList as MessageList
from ._files import merge_files as merge_files
from ._result import AgentResult as AgentResult
from ._state import REMOVE_ALL_MESSAGES as REMOVE_ALL_MESSAGES
from ._state import Applied as Applied
from ._state import Channel as Channel
from ._state import RemoveMessage as RemoveMessage
from ._state import State as State
from ._state import Todo as Todo
from ._state import add_messages as add_messages
from ._state import default_channels as default_channels
from ._state import encode_text as encode_text
from ._state import replace as replace
from ._state import to_json as to_json
from ._state import validate_input as validate_input

__all__ = [
    "REMOVE_ALL_MESSAGES",
    "AgentResult",
    "Applied",
    "Channel",
    "FileRecord",
    "MessageList",
    "RemoveMessage",
    "State",
    "Todo",
    "add_messages",
    "default_channels",
    "merge_files",
    "replace",
]
