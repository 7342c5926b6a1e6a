"""deepagents' file helpers, for scripts that read ``result["files"]``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["file_data_to_string"]


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
