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
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import InputError
from .messages import Message, to_message, to_messages

__all__ = [
    "REMOVE_ALL_MESSAGES",
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


class FileRecord(BaseModel):
    """A file kept in agent state.

    Attributes:
        content: The whole text, line endings as written.
        version: 1 when created, +1 on every change. Subagent diffs are checked
            against it to tell whether a sibling changed the file meanwhile.
        created_at: Creation time, seconds since the epoch.
        modified_at: Time of the last change, seconds since the epoch.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    content: str
    version: int = 1
    created_at: float = Field(default_factory=time.time)
    modified_at: float = Field(default_factory=time.time)

    def changed(self, content: str) -> FileRecord:
        """The next version of this file with new content."""
        return FileRecord(
            content=content,
            version=self.version + 1,
            created_at=self.created_at,
            modified_at=time.time(),
        )

    @staticmethod
    def written(current: FileRecord | None, content: str) -> FileRecord:
        """The record after writing ``content`` over ``current`` (None: a new file)."""
        return FileRecord(content=content) if current is None else current.changed(content)


class Todo(BaseModel):
    """One item of the agent's plan."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    content: str = Field(min_length=1, description="What to do, in a short imperative sentence.")
    status: Literal["pending", "in_progress", "completed"] = Field(
        "pending", description="pending, in_progress (one or two at a time) or completed."
    )


@dataclass(frozen=True, slots=True)
class RemoveMessage:
    """Put in a ``messages`` update to remove the message with this id."""

    id: str


REMOVE_ALL_MESSAGES = "__remove_all__"
"""``RemoveMessage(REMOVE_ALL_MESSAGES)`` clears the history before the rest of the update."""


class MessageList(list[Message]):
    """The ``messages`` channel's value: a list that also indexes its ids.

    The index is what keeps replace-by-id O(1) for long threads.
    """

    __slots__ = ("_index",)

    def __init__(self, items: Iterable[Message] = ()) -> None:
        super().__init__(items)
        self._index = {m.id: i for i, m in enumerate(self)}

    def index_of(self, message_id: str) -> int | None:
        """Position of the message with this id, or None."""
        return self._index.get(message_id)


def add_messages(current: MessageList, update: Iterable[Message | RemoveMessage]) -> MessageList:
    """The ``messages`` reducer: append, replace by id, or remove.

    Mutates ``current``: a state's value belongs to its one actor.
    """
    index = current._index
    for item in update:
        if isinstance(item, RemoveMessage):
            if item.id == REMOVE_ALL_MESSAGES:
                current.clear()
                index.clear()
            elif item.id in index:
                del current[index[item.id]]
                current._index = index = {m.id: i for i, m in enumerate(current)}
            continue
        pos = index.get(item.id)
        if pos is None:
            index[item.id] = len(current)
            current.append(item)
        else:
            current[pos] = item
    return current


def merge_files(
    current: dict[str, FileRecord], update: Mapping[str, FileRecord | None] | Any
) -> dict[str, FileRecord]:
    """The ``files`` reducer: set each path to its new record, or delete it on ``None``.

    A subagent's :class:`~deepactors.filediff.FileDiff` is merged against the
    versions the subagent started from instead (see :mod:`deepactors.filediff`).
    """
    if not isinstance(update, Mapping):
        return update.merge_into(current)  # type: ignore[no-any-return]
    for path, record in update.items():
        if record is None:
            current.pop(path, None)
        else:
            current[path] = record
    return current


def replace(current: Any, update: Any) -> Any:
    """The reducer of channels where the latest value wins."""
    return update


@dataclass(frozen=True, slots=True, kw_only=True)
class Channel:
    """A named slot of agent state and how updates fold into it.

    Attributes:
        reducer: ``reducer(current, update) -> new``; may mutate ``current``.
        default: Makes the initial value.
        private: User input may not set it (only tools and middleware can).
        coerce: Validates and converts a value from user input or a checkpoint.
        copy: Makes the value a child's snapshot starts from (default: the default).
    """

    reducer: Callable[[Any, Any], Any] = replace
    default: Callable[[], Any] = lambda: None
    private: bool = False
    coerce: Callable[[Any], Any] | None = None


def _coerce_files(value: Any) -> dict[str, FileRecord]:
    if not isinstance(value, Mapping):
        raise InputError("'files' must map paths to file contents")
    files: dict[str, FileRecord] = {}
    for path, item in value.items():
        if not isinstance(path, str) or not path.startswith("/"):
            raise InputError(f"file paths must be absolute strings like '/notes.md', not {path!r}")
        if isinstance(item, FileRecord):
            files[path] = item
        elif isinstance(item, str):
            files[path] = FileRecord(content=item)
        else:
            try:
                files[path] = FileRecord.model_validate(item)
            except ValidationError as exc:
                raise InputError(f"invalid file {path!r}: {exc.errors()[0]['msg']}") from exc
    return files


def _coerce_todos(value: Any) -> list[Todo]:
    try:
        return [t if isinstance(t, Todo) else Todo.model_validate(t) for t in value]
    except (ValidationError, TypeError) as exc:
        raise InputError(f"invalid todos: {exc}") from exc


def default_channels() -> dict[str, Channel]:
    """The channels every agent has."""
    return {
        "messages": Channel(
            reducer=add_messages, default=MessageList, coerce=lambda v: MessageList(to_messages(v))
        ),
        "todos": Channel(default=list, private=True, coerce=_coerce_todos),
        "files": Channel(reducer=merge_files, default=dict, coerce=_coerce_files),
        "structured_response": Channel(private=True),
    }


class State(Mapping[str, Any]):
    """The live state of one actor: read like a dict, changed only by :meth:`apply`.

    Args:
        channels: Every channel this state has.
        listener: Called with each applied update, after it is applied (events,
            checkpoints). ``None`` when nobody listens, so the hot path stays bare.
    """

    __slots__ = ("_channels", "_values", "listener")

    def __init__(
        self,
        channels: Mapping[str, Channel],
        values: Mapping[str, Any] | None = None,
        *,
        listener: Callable[[Mapping[str, Any]], None] | None = None,
    ) -> None:
        self._channels = channels
        self._values: dict[str, Any] = {name: ch.default() for name, ch in channels.items()}
        self.listener = listener
        if values:
            for name, value in values.items():
                ch = channels[name]
                self._values[name] = ch.coerce(value) if ch.coerce else value

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    @property
    def messages(self) -> MessageList:
        """The conversation so far."""
        return self._values["messages"]  # type: ignore[no-any-return]

    @property
    def files(self) -> dict[str, FileRecord]:
        """The files kept in state (path -> record)."""
        return self._values["files"]  # type: ignore[no-any-return]

    def apply(self, update: Mapping[str, Any]) -> None:
        """Fold an update into the state, channel by channel.

        Raises:
            KeyError: The update names a channel this state does not have.
        """
        values = self._values
        for name, value in update.items():
            try:
                ch = self._channels[name]
            except KeyError:
                raise KeyError(
                    f"state has no channel {name!r} (known: {', '.join(self._channels)})"
                ) from None
            values[name] = ch.reducer(values[name], value)
        if self.listener is not None:
            self.listener(update)

    def check_update(self, update: Mapping[str, Any]) -> dict[str, Any]:
        """Validate an update from a tool before it is applied; return it converted.

        Names must be channels of this state. ``files`` values may be plain text
        (the next version of that path), a :class:`FileRecord` or ``None``; a
        subagent's diff passes as is. ``messages`` may be dicts.

        Raises:
            ValueError: With a message fit for the model that made the call.
        """
        out: dict[str, Any] = {}
        for name, value in update.items():
            if name not in self._channels:
                raise ValueError(
                    f"cannot update {name!r}: the state has {', '.join(self._channels)}"
                )
            if name == "files" and isinstance(value, Mapping):
                value = {p: self._next_file(p, v) for p, v in value.items()}
            elif name == "messages":
                value = [v if isinstance(v, RemoveMessage) else to_message(v) for v in value]
            out[name] = value
        return out

    def _next_file(self, path: str, value: Any) -> FileRecord | None:
        if value is None or isinstance(value, FileRecord):
            return value
        if not isinstance(value, str):
            raise ValueError(f"file {path!r} must be set to text, a FileRecord or None")
        return FileRecord.written(self.files.get(path), value)

    def add_message(self, message: Message) -> None:
        """Append one message (the loop's hot path: no dict built per call)."""
        add_messages(self._values["messages"], (message,))
        if self.listener is not None:
            self.listener({"messages": [message]})

    def to_dict(self) -> dict[str, Any]:
        """A shallow copy of every channel's value."""
        out = dict(self._values)
        out["messages"] = list(out["messages"])
        out["files"] = dict(out["files"])
        return out


def validate_input(
    channels: Mapping[str, Channel], data: Mapping[str, Any] | str
) -> dict[str, Any]:
    """Check a run's input against the channels and convert it.

    Raises:
        InputError: An unknown or private key, or a value its channel refuses.
    """
    if isinstance(data, str):
        data = {"messages": data}
    if not isinstance(data, Mapping):
        raise InputError(
            f"input must be a dict like {{'messages': [...]}}, not {type(data).__name__}"
        )
    out: dict[str, Any] = {}
    for key, value in data.items():
        ch = channels.get(key)
        if ch is None:
            raise InputError(f"unknown input key {key!r}; known: {', '.join(channels)}")
        if ch.private:
            raise InputError(f"{key!r} cannot be set from input; only the agent's tools set it")
        out[key] = ch.coerce(value) if ch.coerce else value
    return out
