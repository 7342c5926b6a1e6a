"""JSON encoding of state updates and tool results, for checkpoints.

A checkpoint stores *changes*, never whole states: the update each
:meth:`~deepactors.state.State.apply` folded in, encoded here, so a thread's
size grows with what changed. Replaying the updates in order rebuilds the state.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from ..errors import CheckpointCorrupt
from ..filediff import FileChange, FileDiff
from ..messages import ToolMessage, to_message
from ..state import FileRecord, RemoveMessage, State, Todo

__all__ = [
    "decode_tool_result",
    "decode_update",
    "encode_tool_result",
    "encode_update",
]


def _record(record: FileRecord | None) -> dict[str, Any] | None:
    return None if record is None else record.model_dump(mode="json")


def _value(value: Any) -> Any:
    """A channel value as JSON data (models dumped at any depth)."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, list | tuple):
        return [_value(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _value(v) for k, v in value.items()}
    return value


def encode_update(update: Mapping[str, Any], state: State | None = None) -> dict[str, Any]:
    """An applied update as JSON.

    A subagent's :class:`FileDiff` is stored as its effect (the records now at
    the paths it touched), so replay needs no merge.
    """
    out: dict[str, Any] = {}
    for name, value in update.items():
        if name == "messages":
            out[name] = [
                {"remove": m.id} if isinstance(m, RemoveMessage) else m.model_dump(mode="json")
                for m in value
            ]
        elif name == "files":
            if isinstance(value, FileDiff):
                # A merged diff comes from an applied update: the state is at hand.
                assert state is not None
                files = state.files
                touched = {o.saved_as or o.path for o in value.outcomes} | {
                    o.path for o in value.outcomes
                }
                out[name] = {p: _record(files.get(p)) for p in sorted(touched)}
            else:
                out[name] = {p: _record(r) for p, r in value.items()}
        else:
            out[name] = _value(value)
    return out


def decode_update(data: Mapping[str, Any], *, where: str) -> dict[str, Any]:
    """The update :func:`encode_update` stored.

    Raises:
        CheckpointCorrupt: The data is not a valid update (``where`` names it).
    """
    try:
        out: dict[str, Any] = {}
        for name, value in data.items():
            if name == "messages":
                out[name] = [
                    RemoveMessage(m["remove"]) if "remove" in m else to_message(m) for m in value
                ]
            elif name == "files":
                out[name] = {
                    p: None if r is None else FileRecord.model_validate(r) for p, r in value.items()
                }
            elif name == "todos":
                out[name] = [Todo.model_validate(t) for t in value]
            else:
                out[name] = value
        return out
    except (ValidationError, ValueError, TypeError, KeyError, AttributeError) as exc:
        raise CheckpointCorrupt(f"{where}: unreadable state update: {exc}") from exc


def encode_tool_result(message: ToolMessage, update: Mapping[str, Any] | None) -> dict[str, Any]:
    """A finished tool call's result, kept so a resumed step does not run it again."""
    encoded: dict[str, Any] = {"message": message.model_dump(mode="json")}
    if update:
        rest = {k: v for k, v in update.items() if k != "files"}
        files = update.get("files")
        if isinstance(files, FileDiff):
            encoded["diff"] = {
                "label": files.label,
                "changes": {
                    p: {"base": _record(c.base), "new": _record(c.new)}
                    for p, c in files.changes.items()
                },
            }
        elif files is not None:
            rest["files"] = files
        if rest:
            encoded["update"] = encode_update(rest)
    return encoded


def decode_tool_result(
    data: Mapping[str, Any], *, where: str
) -> tuple[ToolMessage, dict[str, Any] | None]:
    """The ``(message, update)`` :func:`encode_tool_result` stored."""
    try:
        message = to_message(data["message"])
        if not isinstance(message, ToolMessage):
            raise TypeError("not a tool message")
        update: dict[str, Any] | None = None
        if "update" in data:
            update = decode_update(data["update"], where=where)
        if "diff" in data:
            raw = data["diff"]
            changes = {
                p: FileChange(
                    base=None if c["base"] is None else FileRecord.model_validate(c["base"]),
                    new=None if c["new"] is None else FileRecord.model_validate(c["new"]),
                )
                for p, c in raw["changes"].items()
            }
            update = dict(update or {})
            update["files"] = FileDiff(changes=changes, label=raw["label"])
        return message, update
    except CheckpointCorrupt:
        raise
    except (ValidationError, ValueError, TypeError, KeyError) as exc:
        raise CheckpointCorrupt(f"{where}: unreadable tool result: {exc}") from exc
