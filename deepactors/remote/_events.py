"""A remote child's stream parts as the parent's typed events, under the child's actor path.

A deepactors server streams every event of a run as JSON in its ``events``
mode (:func:`deepactors.langchain.views.event_to_json`), and all but the state
updates in its ``events-lite`` mode, which a remote child asks for; :class:`EventRelay` turns
each back into its :mod:`deepactors.events` class, with its path moved under
the child's (the remote root ``main`` becomes ``main/task-2:remote``, and its
subagent ``main/task-1:x`` becomes ``main/task-2:remote/task-1:x``).

Left out: the remote root's own ``RunStarted``, ``RunFinished`` and
``Interrupted`` (the parent's ``Subagent*`` events say how the child went,
as for a local child, which has none of them either), and every
``StateUpdated``: its values are the remote state in LangChain's JSON shapes,
which the parent's listeners (its own server's stream among them) would take
for deepactors objects. The child's state is on the remote server's thread.

LangGraph's own server has no such mode: from it come ``custom`` parts (as
:class:`~deepactors.events.CustomEvent`) and ``updates``, whose assistant
messages become :class:`~deepactors.events.ModelCallFinished`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import TypeAdapter, ValidationError

from .. import events as ev
from .._core.jsonvalue import JSONValue
from ..langchain.views import message_from_lc
from ..messages import AssistantMessage

__all__ = ["EventRelay"]

# Events whose name the remote's JSON gives (snake case of the class name).
_CLASSES: dict[str, type[ev.Event]] = {
    re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower(): getattr(ev, name)
    for name in ev.__all__
    if isinstance(getattr(ev, name), type) and issubclass(getattr(ev, name), ev.Event)
}
_SKIPPED_EVERYWHERE = frozenset({"state_updated"})
_SKIPPED_AT_ROOT = frozenset({"run_started", "run_finished", "interrupted"})
_PATH_FIELDS = ("path", "child")


_ADAPTERS: dict[type[ev.Event], TypeAdapter[Any]] = {}


def _adapter(cls: type[ev.Event]) -> TypeAdapter[Any]:
    adapter = _ADAPTERS.get(cls)
    if adapter is None:
        adapter = _ADAPTERS[cls] = TypeAdapter(cls)
    return adapter


class EventRelay:
    """Emits a remote child's parts into its parent's stream.

    Args:
        emit: The parent run's event sink.
        path: The child's actor path in the parent's tree.
    """

    __slots__ = ("_emit", "_path", "_steps", "dropped")

    def __init__(self, emit: Callable[[ev.Event], None], path: str) -> None:
        self._emit = emit
        self._path = path
        self._steps = 0
        #: Parts that could not be read as events (a newer server's): counted, not raised.
        self.dropped = 0

    def part(self, mode: str, data: JSONValue, run_id: str) -> None:
        """One stream part of the remote run ``run_id``."""
        match mode:
            case "events" | "events-lite":
                self._event(data)
            case "custom":
                self._emit(ev.CustomEvent(path=self._path, run_id=run_id, data=data))
            case "updates":
                self._updates(data, run_id)
            case _:
                pass  # a mode not asked for (metadata of a newer server, say)

    def _event(self, data: JSONValue) -> None:
        if not isinstance(data, Mapping):
            self.dropped += 1
            return
        name = data.get("event")
        cls = _CLASSES.get(name) if isinstance(name, str) else None
        path = data.get("path")
        if cls is None or not isinstance(path, str) or name in _SKIPPED_EVERYWHERE:
            self.dropped += cls is None
            return
        if "/" not in path and name in _SKIPPED_AT_ROOT:
            return
        fields = {k: v for k, v in data.items() if k != "event"}
        for key in _PATH_FIELDS:
            value = fields.get(key)
            if isinstance(value, str):
                fields[key] = self._moved(value)
        try:
            event = _adapter(cls).validate_python(fields)
        except ValidationError:
            self.dropped += 1
            return
        self._emit(event)

    def _moved(self, remote_path: str) -> str:
        _, sep, rest = remote_path.partition("/")
        return f"{self._path}/{rest}" if sep else self._path

    def _updates(self, data: JSONValue, run_id: str) -> None:
        # {"<node>": {"messages": [...], ...}, ...}: the messages a step added.
        if not isinstance(data, Mapping):
            return
        for update in data.values():
            messages = update.get("messages") if isinstance(update, Mapping) else None
            if not isinstance(messages, list):
                continue
            for raw in messages:
                if not isinstance(raw, Mapping) or raw.get("type") not in ("ai", "AIMessageChunk"):
                    continue
                try:
                    message = message_from_lc(raw)
                except Exception:  # a shape we do not read: not worth failing the child
                    self.dropped += 1
                    continue
                if isinstance(message, AssistantMessage):
                    self._steps += 1
                    self._emit(
                        ev.ModelCallFinished(
                            path=self._path, run_id=run_id, step=self._steps, message=message
                        )
                    )
