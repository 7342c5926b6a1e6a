"""JSON data as a type: what ``json.loads`` returns and ``json.dumps`` takes.

For values that are JSON by construction (a checkpoint's encoded update, a
record read back) where the code reading them narrows what it finds, instead
of trusting it: ``isinstance(value, dict)`` before ``value["key"]``.
"""

from __future__ import annotations

from typing import TypeAlias

__all__ = ["JSONObject", "JSONValue"]

JSONValue: TypeAlias = "bool | int | float | str | list[JSONValue] | dict[str, JSONValue] | None"
"""A JSON value (a list or an object holds more of them)."""

JSONObject: TypeAlias = "dict[str, JSONValue]"
"""A JSON object: what a checkpoint record's ``data`` and a state update encode to."""
