"""deepagents' file helpers, for scripts that read ``result["files"]``."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

__all__ = ["create_file_data", "file_data_to_string", "update_file_data"]


def create_file_data(
    content: str, created_at: str | None = None, encoding: str = "utf-8"
) -> dict[str, str]:
    """deepagents' ``FileData`` dict for ``content``, stamped now (UTC, ISO 8601).

    Give it wherever a file's value goes: a run's input ``files``, or a tool's
    ``Command(update={"files": {path: create_file_data(...)}})``.

    Args:
        content: The text (with ``encoding="base64"``: base64 of UTF-8 text).
        created_at: When the file was made (ISO 8601; default: now).
        encoding: ``"utf-8"`` or ``"base64"``.
    """
    now = datetime.now(UTC).isoformat()
    return {
        "content": content,
        "encoding": encoding,
        "created_at": created_at or now,
        "modified_at": now,
    }


def update_file_data(file_data: Mapping[str, Any], content: str) -> dict[str, str]:
    """deepagents' ``FileData`` with new ``content``: ``created_at`` kept, ``modified_at`` now."""
    return {
        **file_data,
        "content": content,
        "modified_at": datetime.now(UTC).isoformat(),
    }


def file_data_to_string(file_data: Any) -> str:
    """A file's text from deepagents' ``FileData`` (or a deepactors file record).

    ``content`` may be a string or, in deepagents' older format, a list of lines.

    Raises:
        TypeError: The content is neither.
    """
    if not isinstance(file_data, Mapping):
        to_file_data = getattr(file_data, "to_file_data", None)
        if to_file_data is None:
            raise TypeError(f"not file data: {type(file_data).__name__}")
        file_data = to_file_data()
    content = file_data["content"]
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(line, str) for line in content):
        return "\n".join(content)
    raise TypeError(f"file content must be a string or a list of strings, not {type(content)}")
