"""Reading a remote child's end: its answer, its file changes, what it spent.

The remote thread's state comes in LangChain's JSON shapes (as ``GET
/threads/{id}/state`` answers on deepactors and LangGraph servers alike):
messages as ``{"type": "ai", "content": ...}``, files as deepagents'
``FileData`` (content and ISO timestamps, no version).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from ..filediff import FileChange, FileRecord, diff_files
from ..langchain.views import message_from_lc
from ..messages import AssistantMessage, Usage

__all__ = ["answer_of", "file_changes", "interrupt_note", "spent_of"]

_AI = ("ai", "assistant")
_NO_ANSWER = "(the remote subagent finished without a final message)"


def answer_of(values: Mapping[str, object]) -> tuple[str, bool]:
    """The child's final answer, and whether its budget stopped it.

    The structured response as JSON when there is one (as a local child's),
    else the text of the last assistant message that has any.
    """
    structured = values.get("structured_response")
    if structured is not None:
        return json.dumps(structured), False
    messages = values.get("messages")
    found: list[object] = messages if isinstance(messages, list) else []
    for raw in reversed(found):
        if not isinstance(raw, Mapping) or raw.get("type", raw.get("role")) not in _AI:
            continue
        try:
            message = message_from_lc(raw)
        except Exception:  # a shape we cannot read as a message: its content as text
            text: object = raw.get("content")
            if isinstance(text, str) and text.strip():
                return text, False
            continue
        if isinstance(message, AssistantMessage) and message.text.strip():
            return message.text, message.stop_reason == "budget_exhausted"
    return _NO_ANSWER, False


def file_changes(sent: Mapping[str, FileRecord], final: object) -> dict[str, FileChange]:
    """The child's file changes: its final files against those it was sent.

    A file whose content is what was sent is unchanged (its record is the one
    sent, so it is no change); another is the next version of the one sent
    (or a new file), with the remote's timestamps; a path sent and missing
    (or None) at the end was deleted.

    Raises:
        ValueError: ``final`` is not a mapping of paths to files.
    """
    if final is None:
        final = {}
    if not isinstance(final, Mapping):
        raise ValueError(f"'files' is a {type(final).__name__}, not a mapping of paths")
    ended: dict[str, FileRecord] = {}
    for path, data in final.items():
        if data is None:
            continue  # deleted (a reducer's tombstone)
        if not isinstance(path, str) or not isinstance(data, Mapping):
            raise ValueError(f"{path!r} is not a path with a file")
        remote = FileRecord.from_file_data(data)
        base = sent.get(path)
        if base is not None and base.content == remote.content:
            ended[path] = base
        elif base is not None:
            ended[path] = FileRecord(
                content=remote.content,
                version=base.version + 1,
                created_at=base.created_at,
                modified_at=remote.modified_at,
            )
        else:
            ended[path] = remote
    return diff_files(sent, ended)


def interrupt_note(state: Mapping[str, object]) -> str:
    """What a remote thread waits for a human to decide on ('' when nothing)."""
    interrupts = list(_listed(state.get("interrupts")))
    for task in _listed(state.get("tasks")):
        if isinstance(task, Mapping):
            interrupts.extend(_listed(task.get("interrupts")))
    names: list[str] = []
    for item in interrupts:
        value = item.get("value") if isinstance(item, Mapping) else None
        requests = value.get("action_requests") if isinstance(value, Mapping) else None
        for request in requests or ():
            if isinstance(request, Mapping):
                names.append(f"{request.get('name') or request.get('tool') or '?'}(...)")
    if names:
        return "approve " + ", ".join(dict.fromkeys(names))
    return "an interrupt" if interrupts else ""


def _listed(value: object) -> list[object] | tuple[object, ...]:
    """A JSON list as it came (anything else, a missing key included: none)."""
    return value if isinstance(value, list | tuple) else ()


def spent_of(metadata: object) -> tuple[Usage | None, Mapping[str, object]]:
    """A run's usage and budget report from its metadata (``usage``, ``budget``)."""
    if not isinstance(metadata, Mapping):
        return None, {}
    usage: Usage | None = None
    raw = metadata.get("usage")
    if isinstance(raw, Mapping):
        try:
            usage = Usage.model_validate(raw)
        except ValueError:
            usage = None
    report = metadata.get("budget")
    return usage, report if isinstance(report, Mapping) else {}
