"""LangChain and LangGraph views of deepactors' messages, state, interrupts and events.

Pure functions and one small stateful adapter, shared by the agent facade
(``agent.astream(stream_mode=...)``) and the HTTP server (the LangGraph Agent
Protocol): whatever speaks LangChain's shapes to the outside goes through here.

* :func:`message_to_lc` / :func:`message_from_lc`: a message as LangChain's
  message dict (``type`` ``human``/``ai``/``tool``/``system``, ``content``,
  ``tool_calls`` with ``{"name", "args", "id", "type": "tool_call"}``,
  ``tool_call_id``, ``usage_metadata``...) and back.
* :func:`values_to_lc`: a state (or a run's result) as JSON: messages as
  LangChain dicts, files as deepagents' ``FileData``, todos as dicts, and
  ``__interrupt__`` as LangGraph's ``[{"value": ..., "id": ...}]``.
* :class:`LangGraphStream`: turns the typed event stream of a run into
  LangGraph's stream parts ``(namespace, mode, data)`` for the modes ``values``,
  ``updates``, ``messages`` (``messages-tuple``), ``custom``, ``events`` and
  ``debug``; a subagent at ``main/task-2:researcher`` streams under the
  namespace ``("task-2:researcher",)``.

This package sits just above messages, state, interrupts and events; it imports
nothing of the runtime, the facade or the server, and needs no ``langchain-core``.
It was ``deepactors.lc_views`` (a deprecated alias now).
"""

from __future__ import annotations

from ..._core.public import publish as _publish
from ._stream import STREAM_MODES as STREAM_MODES
from ._stream import LangGraphStream as LangGraphStream
from ._stream import StreamMode as StreamMode
from ._stream import StreamPart as StreamPart
from ._stream import parse_stream_modes as parse_stream_modes
from ._views import Namespace as Namespace
from ._views import content_to_lc as content_to_lc
from ._views import event_to_json as event_to_json
from ._views import interrupts_to_lc as interrupts_to_lc
from ._views import message_from_lc as message_from_lc
from ._views import message_to_lc as message_to_lc
from ._views import messages_to_lc as messages_to_lc
from ._views import namespace_of as namespace_of
from ._views import update_to_lc as update_to_lc
from ._views import usage_to_lc as usage_to_lc
from ._views import values_to_lc as values_to_lc

__all__ = [
    "STREAM_MODES",
    "LangGraphStream",
    "Namespace",
    "StreamMode",
    "StreamPart",
    "content_to_lc",
    "event_to_json",
    "interrupts_to_lc",
    "message_from_lc",
    "message_to_lc",
    "messages_to_lc",
    "namespace_of",
    "parse_stream_modes",
    "update_to_lc",
    "usage_to_lc",
    "values_to_lc",
]

# Reprs and tracebacks name the public package, not the private module (see _core.public).
_publish(__all__, __name__, globals())
