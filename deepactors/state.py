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

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import InputError
from .filediff import FileChange, FileDiff, FileRecord, MergeResult, merge
from .history import MessageList
from .messages import Message, to_message, to_messages

__all__ = [
    "REMOVE_ALL_MESSAGES",
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


def add_messages(current: MessageList, update: Iterable[Message | RemoveMessage]) -> MessageList:
    """The ``messages`` reducer: append, replace by id, or remove.

    Mutates ``current``: a state's value belongs to its one actor. (Views of it
    handed to model requests do not change: see :class:`MessageList`.)
    """
    for item in update:
        if isinstance(item, RemoveMessage):
            if item.id == REMOVE_ALL_MESSAGES:
                current.clear()
            else:
                current.remove_id(item.id)
        else:
            current.put(item)
    return current


def merge_files(
    current: dict[str, FileRecord], update: Mapping[str, FileRecord | None]
) -> dict[str, FileRecord]:
    """The ``files`` reducer: set each path to its new record, or delete it on ``None``.

    A subagent's :class:`~deepactors.filediff.FileDiff` reaches it already
    resolved into such a mapping (see :func:`~deepactors.filediff.merge`).
    """
    for path, record in update.items():
        if record is None:
            current.pop(path, None)
        else:
            current[path] = record
    return current


def replace(current: Any, update: Any) -> Any:
    """The reducer of channels where the latest value wins."""
    return update


def to_json(value: Any) -> Any:
    """A channel value as JSON data (pydantic models dumped at any depth)."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, list | tuple):
        return [to_json(v) for v in value]
    if isinstance(value, Mapping):
        return {k: to_json(v) for k, v in value.items()}
    return value


def _identity(value: Any) -> Any:
    return value


def _no_check(state: State, value: Any) -> Any:
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class Channel:
    """A named slot of agent state: its reducer, and how its values cross each edge.

    Attributes:
        reducer: ``reducer(current, update) -> new``; may mutate ``current``.
        default: Makes the initial value.
        private: User input may not set it (only tools and middleware can).
        coerce: Validates and converts a value from user input; raises
            :class:`~deepactors.errors.InputError`.
        check: Validates and converts an update a tool asked for:
            ``check(state, value)``; raises ``ValueError`` with a message for the
            model that made the call.
        resolve: Turns an update into the plain update the reducer folds, plus a
            report of what it did (the ``files`` channel resolves a subagent's
            diff into per-path records and merge outcomes).
        encode: An update value as JSON data, for checkpoints.
        decode: The inverse of ``encode`` (default: ``coerce``, then identity),
            so a channel holding pydantic values round-trips through a checkpoint.
    """

    reducer: Callable[[Any, Any], Any] = replace
    default: Callable[[], Any] = lambda: None
    private: bool = False
    coerce: Callable[[Any], Any] | None = None
    check: Callable[[State, Any], Any] = _no_check
    resolve: Callable[[Any, Any], tuple[Any, MergeResult | None]] | None = None
    encode: Callable[[Any], Any] = to_json
    decode: Callable[[Any], Any] | None = None

    def decoder(self) -> Callable[[Any], Any]:
        """How a stored update of this channel is read back."""
        return self.decode or self.coerce or _identity


@dataclass(frozen=True, slots=True)
class Applied:
    """What :meth:`State.apply` folded in: what listeners and the journal see.

    Attributes:
        update: The effective update: the input with each resolved value (a
            subagent's diff) replaced by its effect, so replaying it needs no merge.
        merge: What merging a subagent's diff did, if the update carried one.
    """

    update: Mapping[str, Any]
    merge: MergeResult | None = None

    def note(self) -> str:
        """A note for the model about the merge (conflicts above all), or ``""``."""
        return self.merge.report() if self.merge is not None else ""


def _coerce_files(value: Any) -> dict[str, FileRecord]:
    if not isinstance(value, Mapping):
        raise InputError("'files' must map paths to file contents")
    files: dict[str, FileRecord] = {}
    for path, item in value.items():
        if not isinstance(path, str) or not path.startswith("/"):
            raise InputError(f"file paths must be absolute strings like '/notes.md', not {path!r}")
        if ".." in path.split("/") or "\x00" in path or "\\" in path:
            raise InputError(f"file path {path!r} must not contain '..', '\\' or NUL")
        if isinstance(item, FileRecord):
            files[path] = item
        elif isinstance(item, str):
            files[path] = FileRecord(content=item)
        elif isinstance(item, Mapping) and _is_file_data(item):
            try:
                files[path] = FileRecord.from_file_data(item)
            except ValueError as exc:
                raise InputError(f"invalid file {path!r}: {exc}") from exc
        else:
            try:
                files[path] = FileRecord.model_validate(item)
            except ValidationError as exc:
                raise InputError(f"invalid file {path!r}: {exc.errors()[0]['msg']}") from exc
    return files


def _is_file_data(item: Mapping[str, Any]) -> bool:
    """deepagents' FileData: an encoding, ISO timestamps, or content as a list of lines."""
    return (
        "encoding" in item
        or isinstance(item.get("content"), list)
        or isinstance(item.get("created_at"), str)
        or isinstance(item.get("modified_at"), str)
    )


def _check_files(state: State, value: Any) -> Any:
    if isinstance(value, FileDiff):
        return value
    if not isinstance(value, Mapping):
        raise ValueError("'files' must map paths to text, a FileRecord or None")
    out: dict[str, FileRecord | None] = {}
    for path, item in value.items():
        if item is None or isinstance(item, FileRecord):
            out[path] = item
        elif isinstance(item, str):
            out[path] = FileRecord.written(state.files.get(path), item)
        else:
            raise ValueError(f"file {path!r} must be set to text, a FileRecord or None")
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class _Appended:
    """A stored append, read back: the file's next version is its current one plus
    ``text`` (see ``FileRecord.appended``); resolved against the state it lands on."""

    text: str
    at: int
    version: int
    modified_at: float

    def on(self, path: str, current: FileRecord | None) -> FileRecord:
        if (
            current is None
            or current.version != self.version - 1
            or len(current.content) != self.at
        ):
            found = "no file" if current is None else f"version {current.version}"
            raise ValueError(
                f"text appended to {path} at version {self.version - 1}, "
                f"offset {self.at}, but the state has {found} there"
            )
        return current.appended(self.text, modified_at=self.modified_at)


def _resolve_files(current: Any, value: Any) -> tuple[Any, MergeResult | None]:
    if isinstance(value, FileDiff):
        result = merge(current, value)
        return _settle_appends(current, result.changes), result
    return _settle_appends(current, value), None


def _settle_appends(current: dict[str, FileRecord], update: Any) -> Any:
    """The update with every append tied to the state it lands on.

    A stored append (read back from a checkpoint) becomes its record. A record
    that says it grew from an older version, but lands on another one (a child
    that appended twice, merged over the version it started from), becomes a
    plain record, so its checkpoint stores it whole instead of an append that
    would not replay. The update itself comes back when nothing changed.
    """
    settled: dict[str, Any] | None = None
    for path, value in update.items():
        if isinstance(value, _Appended):
            value = value.on(path, current.get(path))
        elif isinstance(value, FileRecord) and value.appended_at is not None:
            if _grows(current.get(path), value):
                continue
            value = FileRecord(
                content=value.content,
                version=value.version,
                created_at=value.created_at,
                modified_at=value.modified_at,
            )
        else:
            continue
        if settled is None:
            settled = dict(update)
        settled[path] = value
    return update if settled is None else settled


def _grows(base: FileRecord | None, record: FileRecord) -> bool:
    """Whether ``record`` is ``base`` with text added at its end (the stored append's claim)."""
    return (
        base is not None
        and base.version == record.version - 1
        and len(base.content) == record.appended_at
        and record.content.startswith(base.content)
    )


_DIFF_KEY = "__diff__"  # never a path: paths start with "/"


def _encode_files(value: Any) -> Any:
    if isinstance(value, FileDiff):
        # An unapplied diff (a tool result waiting for its step's end).
        return {
            _DIFF_KEY: {
                "label": value.label,
                "changes": {
                    p: {"base": _record(c.base), "new": _record(c.new)}
                    for p, c in value.changes.items()
                },
            }
        }
    return {p: _record_or_append(r) for p, r in value.items()}


_APPENDED_KEY = "appended"  # never a FileRecord field


def _record_or_append(record: FileRecord | None) -> dict[str, Any] | None:
    at = None if record is None else record.appended_at
    if record is None or at is None:
        return _record(record)
    return {
        _APPENDED_KEY: record.content[at:],
        "at": at,
        "version": record.version,
        "modified_at": record.modified_at,
    }


def _read_record_or_append(data: Any) -> FileRecord | _Appended | None:
    if isinstance(data, Mapping) and _APPENDED_KEY in data:
        text, at, version, modified = (
            data[k] for k in (_APPENDED_KEY, "at", "version", "modified_at")
        )
        if not isinstance(text, str) or not all(
            isinstance(n, int | float) and not isinstance(n, bool) for n in (at, version, modified)
        ):
            raise ValueError("an appended file record needs text, at, version and modified_at")
        return _Appended(text=text, at=int(at), version=int(version), modified_at=float(modified))
    return _read_record(data)


def _decode_files(data: Any) -> Any:
    raw = data.get(_DIFF_KEY) if isinstance(data, Mapping) else None
    if raw is not None:
        return FileDiff(
            changes={
                p: FileChange(base=_read_record(c["base"]), new=_read_record(c["new"]))
                for p, c in raw["changes"].items()
            },
            label=raw["label"],
        )
    return {p: _read_record_or_append(r) for p, r in data.items()}


def _record(record: FileRecord | None) -> dict[str, Any] | None:
    return None if record is None else record.model_dump(mode="json")


def _read_record(data: Any) -> FileRecord | None:
    return None if data is None else FileRecord.model_validate(data)


def _check_messages(state: State, value: Any) -> Any:
    return [v if isinstance(v, RemoveMessage) else to_message(v) for v in value]


def _encode_messages(value: Any) -> Any:
    return [
        {"remove": m.id} if isinstance(m, RemoveMessage) else m.model_dump(mode="json")
        for m in value
    ]


def _decode_messages(data: Any) -> Any:
    return [RemoveMessage(m["remove"]) if "remove" in m else to_message(m) for m in data]


def _coerce_todos(value: Any) -> list[Todo]:
    try:
        return [t if isinstance(t, Todo) else Todo.model_validate(t) for t in value]
    except (ValidationError, TypeError) as exc:
        raise InputError(f"invalid todos: {exc}") from exc


def default_channels() -> dict[str, Channel]:
    """The channels every agent has."""
    return {
        "messages": Channel(
            reducer=add_messages,
            default=MessageList,
            coerce=lambda v: MessageList(to_messages(v)),
            check=_check_messages,
            encode=_encode_messages,
            decode=_decode_messages,
        ),
        "todos": Channel(default=list, private=True, coerce=_coerce_todos),
        "files": Channel(
            reducer=merge_files,
            default=dict,
            coerce=_coerce_files,
            check=_check_files,
            resolve=_resolve_files,
            encode=_encode_files,
            decode=_decode_files,
        ),
        "structured_response": Channel(private=True),
    }


class State(Mapping[str, Any]):
    """The live state of one actor: read like a dict, changed only by :meth:`apply`.

    Args:
        channels: Every channel this state has.
        listener: Called with what each update did, after it is applied (events,
            checkpoints). ``None`` when nobody listens, so the hot path stays bare.
    """

    __slots__ = ("_channels", "_values", "listener")

    def __init__(
        self,
        channels: Mapping[str, Channel],
        values: Mapping[str, Any] | None = None,
        *,
        listener: Callable[[Applied], None] | None = None,
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
    def channels(self) -> Mapping[str, Channel]:
        """Every channel of this state, by name."""
        return self._channels

    @property
    def messages(self) -> MessageList:
        """The conversation so far."""
        return self._values["messages"]  # type: ignore[no-any-return]

    @property
    def files(self) -> dict[str, FileRecord]:
        """The files kept in state (path -> record)."""
        return self._values["files"]  # type: ignore[no-any-return]

    def apply(self, update: Mapping[str, Any]) -> Applied:
        """Fold an update into the state, channel by channel; return what it did.

        Raises:
            KeyError: The update names a channel this state does not have.
        """
        values = self._values
        effective: dict[str, Any] | None = None
        merged: MergeResult | None = None
        for name, value in update.items():
            try:
                ch = self._channels[name]
            except KeyError:
                raise KeyError(
                    f"state has no channel {name!r} (known: {', '.join(self._channels)})"
                ) from None
            if ch.resolve is not None:
                resolved, report = ch.resolve(values[name], value)
                if resolved is not value:
                    if effective is None:
                        effective = dict(update)
                    effective[name] = value = resolved
                merged = report or merged
            values[name] = ch.reducer(values[name], value)
        applied = Applied(update if effective is None else effective, merged)
        if self.listener is not None:
            self.listener(applied)
        return applied

    def check_update(self, update: Mapping[str, Any]) -> dict[str, Any]:
        """Validate an update from a tool before it is applied; return it converted.

        Names must be channels of this state; each channel checks its value
        (``files`` may be plain text, the next version of that path; ``messages``
        may be dicts; a subagent's diff passes as is).

        Raises:
            ValueError: With a message fit for the model that made the call.
        """
        out: dict[str, Any] = {}
        for name, value in update.items():
            ch = self._channels.get(name)
            if ch is None:
                raise ValueError(
                    f"cannot update {name!r}: the state has {', '.join(self._channels)}"
                )
            out[name] = ch.check(self, value)
        return out

    def add_message(self, message: Message) -> None:
        """Append one message (the loop's hot path: no dict built when nobody listens)."""
        add_messages(self._values["messages"], (message,))
        if self.listener is not None:
            self.listener(Applied({"messages": (message,)}))

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
