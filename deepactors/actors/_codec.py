"""JSON encoding of state updates and tool results, for checkpoints.

A checkpoint stores *changes*, never whole states: the effective update each
:meth:`~deepactors.state.State.apply` folded in, so a thread's size grows with
what changed, and replaying the updates in order rebuilds the state. Each
channel encodes and decodes its own values (:class:`~deepactors.state.Channel`);
this module only frames them.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

from pydantic import ValidationError

from .._core.jsonvalue import JSONObject
from ..context import ToolResult
from ..errors import CheckpointCorrupt
from ..messages import ToolMessage, to_message
from ..persistence import encode_object
from ..state import Channel, State, encode_text

__all__ = [
    "decode_tool_result",
    "decode_update",
    "encode_tool_result",
    "encode_update",
    "encode_update_text",
]


def encode_update(update: Mapping[str, object], state: State) -> JSONObject:
    """An applied (effective) update of ``state`` as JSON data."""
    channels = state.channels
    return {name: channels[name].encode(value) for name, value in update.items()}


def encode_update_text(update: Mapping[str, object], state: State) -> str:
    """:func:`encode_update` as the JSON text a checkpointer stores (``encode_writes``' text).

    A channel with a faster road to the text (the messages, through pydantic's
    serializer) takes it; any other is encoded as ``encode_writes`` would.

    Raises:
        TypeError: A channel's encoded value is not JSON-compatible.
        ValueError: It holds a string that cannot be stored (see ``encode_writes``).
    """
    channels = state.channels
    parts: list[str] = []
    for name, value in update.items():
        channel = channels[name]
        text = encode_text(channel, value)
        if text is None:
            # The member as encode_object writes it inside an object: "name":value.
            parts.append(encode_object({name: channel.encode(value)}, what="a state update")[1:-1])
        else:
            parts.append(_key(name) + text)
    return "{" + ",".join(parts) + "}"


@functools.lru_cache(maxsize=256)
def _key(name: str) -> str:
    """``"name":``, a channel's name as a JSON object's key (as ``encode_object`` writes it)."""
    return encode_object({name: 0}, what="a channel name")[1:-2]


def decode_update(data: Mapping[str, object], *, where: str, state: State) -> dict[str, object]:
    """The update :func:`encode_update` stored, for ``state``'s channels.

    Raises:
        CheckpointCorrupt: The data is not a valid update (``where`` names it,
            the stored data is not quoted).
    """
    channels: Mapping[str, Channel] = state.channels
    try:
        out: dict[str, object] = {}
        for name, value in data.items():
            channel = channels.get(name)
            if channel is None:
                raise KeyError(f"no channel {name!r} in this agent")
            out[name] = channel.decoder()(value)
        return out
    except (ValidationError, ValueError, TypeError, KeyError, AttributeError) as exc:
        raise CheckpointCorrupt(f"{where}: unreadable state update ({_kind(exc)})") from exc


def encode_tool_result(
    message: ToolMessage, update: Mapping[str, object] | None, state: State
) -> JSONObject:
    """A finished tool call's result, kept so a resumed step does not run it again."""
    encoded: JSONObject = {"message": message.model_dump(mode="json")}
    if update:
        encoded["update"] = encode_update(update, state)
    return encoded


def decode_tool_result(data: Mapping[str, object], *, where: str, state: State) -> ToolResult:
    """The ``(message, update)`` :func:`encode_tool_result` stored."""
    try:
        message = to_message(data["message"])
        if not isinstance(message, ToolMessage):
            raise TypeError("not a tool message")
    except (ValidationError, ValueError, TypeError, KeyError) as exc:
        raise CheckpointCorrupt(f"{where}: unreadable tool result ({_kind(exc)})") from exc
    update: dict[str, object] | None = None
    if "update" in data:
        update = decode_update(_object(data["update"], where), where=where, state=state)
    if "diff" in data:
        # Written before channels encoded their own values: the diff stood apart.
        legacy = decode_update({"files": {"__diff__": data["diff"]}}, where=where, state=state)
        update = {**(update or {}), **legacy}
    return message, update


def _object(data: object, where: str) -> Mapping[str, object]:
    if not isinstance(data, Mapping):
        raise CheckpointCorrupt(f"{where}: unreadable state update (not an object)")
    return data


def _kind(exc: Exception) -> str:
    """Say what is wrong without quoting the stored (user) data."""
    if isinstance(exc, ValidationError):
        return f"{exc.error_count()} validation error(s) in {exc.title}"
    if isinstance(exc, KeyError):
        return f"missing or unknown key {exc}"
    return type(exc).__name__
