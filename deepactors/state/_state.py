"""The state machinery: :class:`Channel`, :class:`State` and the built-in channels.

The ``files`` channel's edges live in ``_files``; everything else about
state (the mapping, its single door :meth:`State.apply`, the messages and todos
channels, input validation) is here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, final

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_core import PydanticSerializationError

from .._core.jsonvalue import JSONObject
from ..errors import InputError
from ..filediff import FileDiff, FileRecord, MergeResult
from ..history import MessageList
from ..messages import Message, to_message, to_messages
from ._files import (
    check_files,
    coerce_files,
    decode_files,
    encode_files,
    merge_files,
    resolve_files,
)
from ._json import json_problem

__all__ = [
    "REMOVE_ALL_MESSAGES",
    "Applied",
    "Channel",
    "RemoveMessage",
    "State",
    "Todo",
    "add_messages",
    "default_channels",
    "replace",
    "to_json",
    "validate_input",
]

T = TypeVar("T")


class Todo(BaseModel):
    """One item of the agent's plan."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    content: str = Field(min_length=1, description="What to do, in a short imperative sentence.")
    status: Literal["pending", "in_progress", "completed"] = Field(
        "pending", description="pending, in_progress (one or two at a time) or completed."
    )


@final
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


def replace(current: object, update: T) -> T:
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


def _identity(value: T) -> T:
    return value


def _no_check(state: State, value: T) -> T:
    return value


@final
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


@final
@dataclass(frozen=True, slots=True)
class Applied:
    """What :meth:`State.apply` folded in: what listeners and the journal see.

    Attributes:
        update: The effective update: the input with each resolved value (a
            subagent's diff) replaced by its effect, so replaying it needs no merge.
        merge: What merging a subagent's diff did, if the update carried one.
    """

    update: Mapping[str, object]
    merge: MergeResult | None = None

    def note(self) -> str:
        """A note for the model about the merge (conflicts above all), or ``""``."""
        return self.merge.report() if self.merge is not None else ""


def _check_messages(state: State, value: Iterable[object]) -> list[Message | RemoveMessage]:
    return [v if isinstance(v, RemoveMessage) else to_message(v) for v in value]


def _encode_messages(value: Iterable[Message | RemoveMessage]) -> list[JSONObject]:
    return [
        {"remove": m.id} if isinstance(m, RemoveMessage) else m.model_dump(mode="json")
        for m in value
    ]


def _messages_text(value: Iterable[Message | RemoveMessage]) -> str | None:
    """``_encode_messages(value)`` as compact JSON text, through pydantic's serializer.

    The same JSON (a model dumped in JSON mode has string keys and no NaN, as
    its JSON has), made without the dicts. None where only the general road
    holds: a removal, or a string pydantic will not write (a lone surrogate,
    which the general road escapes).
    """
    parts: list[str] = []
    for m in value:
        if isinstance(m, RemoveMessage):
            return None
        try:
            parts.append(m.model_dump_json())
        except PydanticSerializationError:
            return None
    return "[" + ",".join(parts) + "]"


def encode_text(channel: Channel, value: Any) -> str | None:
    """``channel.encode(value)`` as the JSON text a checkpoint stores, where a faster road exists.

    None otherwise: the caller encodes ``channel.encode(value)`` itself.
    """
    if channel.encode is _encode_messages:
        return _messages_text(value)
    return None


def _decode_messages(data: Any) -> Any:
    return [RemoveMessage(m["remove"]) if "remove" in m else to_message(m) for m in data]


def _coerce_todos(value: object) -> list[Todo]:
    if not isinstance(value, Iterable):
        raise InputError(f"invalid todos: a list of todos, not {type(value).__name__}")
    try:
        return [t if isinstance(t, Todo) else Todo.model_validate(t) for t in value]
    except (ValidationError, TypeError) as exc:
        raise InputError(f"invalid todos: {exc}") from exc


def _check_todos(state: State, value: object) -> list[Todo]:
    # As from input: a list a checkpoint reads back (decode is coerce), never
    # dicts stored as a tool gave them.
    try:
        return _coerce_todos(value)
    except InputError as exc:
        raise ValueError(str(exc)) from None


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
        "todos": Channel(default=list, private=True, coerce=_coerce_todos, check=_check_todos),
        "files": Channel(
            reducer=merge_files,
            default=dict,
            coerce=coerce_files,
            check=check_files,
            resolve=resolve_files,
            encode=encode_files,
            decode=decode_files,
        ),
        "structured_response": Channel(private=True),
    }


@final
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
        values: Mapping[str, object] | None = None,
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
        messages: MessageList = self._values["messages"]
        return messages

    @property
    def files(self) -> dict[str, FileRecord]:
        """The files kept in state (path -> record)."""
        files: dict[str, FileRecord] = self._values["files"]
        return files

    def apply(self, update: Mapping[str, object]) -> Applied:
        """Fold an update into the state, channel by channel; return what it did.

        Raises:
            KeyError: The update names a channel this state does not have.
        """
        values = self._values
        effective: dict[str, object] | None = None
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

    def check_update(self, update: Mapping[str, object]) -> dict[str, object]:
        """Validate an update from a tool before it is applied; return it converted.

        Names must be channels of this state; each channel checks its value
        (``files`` may be plain text, the next version of that path; ``messages``
        may be dicts; a subagent's diff passes as is), then what the channel would
        write to a checkpoint must be JSON data with finite numbers: what could
        not be stored, or read back, is refused here rather than after it is
        applied (see :mod:`deepactors.state._json`).

        Raises:
            ValueError: With a message fit for the model that made the call.
        """
        out: dict[str, object] = {}
        for name, value in update.items():
            ch = self._channels.get(name)
            if ch is None:
                raise ValueError(
                    f"cannot update {name!r}: the state has {', '.join(self._channels)}"
                )
            checked = ch.check(self, value)
            # A subagent's diff is made of records its own tools' updates were
            # checked into: a fan-out's results are not walked twice.
            if not isinstance(checked, FileDiff):
                problem = json_problem(ch.encode(checked))
                if problem is not None:
                    raise ValueError(f"{name!r} cannot be saved: {problem}")
            out[name] = checked
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
    channels: Mapping[str, Channel], data: Mapping[str, object] | str, *, private: bool = False
) -> dict[str, object]:
    """Check a run's input against the channels and convert it.

    Args:
        channels: The agent's channels.
        data: The input.
        private: Also accept the channels only the agent's tools write
            (``todos``): a state update sets them, as LangGraph's ``update_state``.

    Raises:
        InputError: An unknown or private key, or a value its channel refuses.
    """
    if isinstance(data, str):
        data = {"messages": data}
    if not isinstance(data, Mapping):
        raise InputError(
            f"input must be a dict like {{'messages': [...]}}, not {type(data).__name__}"
        )
    out: dict[str, object] = {}
    for key, value in data.items():
        ch = channels.get(key)
        if ch is None:
            raise InputError(f"unknown input key {key!r}; known: {', '.join(channels)}")
        if ch.private and not private:
            raise InputError(f"{key!r} cannot be set from input; only the agent's tools set it")
        out[key] = ch.coerce(value) if ch.coerce else value
    return out
