"""Stored JSON: one encoding, the same for every checkpointer and store.

Stored values are JSON objects kept as compact UTF-8 text, in memory as on disk.
Two things ``json.dumps`` does quietly are made loud or exact here, identically
for the in-memory and the SQLite forms:

- **Keys must be strings.** ``json.dumps`` turns ``1``, ``1.5``, ``True`` and
  ``None`` keys into strings, so ``{1: "x"}`` would come back as ``{"1": "x"}``
  and ``{1: "x", "1": "y"}`` would lose one of its values. Such a key is a
  ``TypeError`` naming where it is.
- **Lone surrogates round-trip.** A string may hold code points U+D800-U+DFFF
  (``os.fsdecode`` of a file name that is not UTF-8, ``json.loads('"\\udcff"')``).
  UTF-8 cannot encode them (SQLite failed with a bare ``UnicodeEncodeError``), so
  they are stored as JSON ``\\uXXXX`` escapes, and read back as the same string.
  The one string that cannot round-trip is a high surrogate directly followed by
  a low one: JSON reads that escape pair as one character outside the BMP, so
  it is a ``ValueError``.

Identifiers stored as SQLite text (thread ids, actor paths, record kinds, store
keys, namespace parts) must not hold surrogates at all: ``check_text`` refuses
them with a ``ValueError``.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["check_text", "decode_object", "encode_object"]

# Compact separators and raw UTF-8: the stored size is the JSON size. One shared
# encoder, because json.dumps with non-default options builds a new one per call.
_encode = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
# Strict JSON for what other programs read back (store items, served over HTTP):
# NaN and Infinity are no JSON, and a client's parser would fail on them.
_encode_finite = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode

_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_PAIR = re.compile("[\ud800-\udbff][\udc00-\udfff]")


def _escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def check_text(text: str, *, what: str) -> str:
    """Return ``text`` unless it holds a surrogate code point.

    Raises:
        ValueError: It does; UTF-8 (and so SQLite) cannot store it.
    """
    if not text.isascii() and _SURROGATE.search(text):
        raise ValueError(f"{what} {text!r} holds a lone surrogate, which cannot be stored")
    return text


def encode_object(value: object, *, what: str, finite: bool = False) -> str:
    """Encode a JSON-compatible dict as the compact text that is stored.

    Args:
        value: The dict.
        what: What it is, for error messages (``"checkpoint data"``).
        finite: Refuse NaN and Infinity (a ``ValueError``): for values other
            programs read as JSON.

    Raises:
        TypeError: ``value`` is not a dict, holds a non-string key, or holds a
            value JSON cannot encode.
        ValueError: It holds a circular reference, or a surrogate pair split
            into two code points (see the module docstring).
    """
    if not isinstance(value, dict):
        raise TypeError(f"{what} must be a dict (a JSON object), not {type(value).__name__}")
    try:
        text = (_encode_finite if finite else _encode)(value)
    except TypeError as exc:
        raise TypeError(f"{what} is not JSON-compatible: {exc}") from exc
    except ValueError as exc:
        raise ValueError(f"{what} is not JSON-compatible: {exc}") from exc
    # After encoding, which has ruled out cycles.
    _check_keys(value, what)
    if text.isascii() or not _SURROGATE.search(text):
        return text  # the common case: one C-speed scan
    if _SURROGATE_PAIR.search(text):
        raise ValueError(
            f"{what} holds a string with a surrogate pair as two code points, which JSON "
            "would read back as one character; join it first "
            "(s.encode('utf-16', 'surrogatepass').decode('utf-16'))"
        )
    return _SURROGATE.sub(_escape, text)


def _check_keys(value: dict[Any, Any], what: str) -> None:
    # Iterative, dispatching on exact types first (what JSON data is made of),
    # and building no path unless a bad key is found: this runs on every put.
    stack: list[Any] = [value]
    pop, push = stack.pop, stack.append
    while stack:
        node = pop()
        if type(node) is dict or isinstance(node, dict):
            for key in node:
                if type(key) is not str and not isinstance(key, str):
                    raise TypeError(
                        f"{what} has a {type(key).__name__} key {key!r} at "
                        f"{_where(value, node)}; JSON object keys must be strings"
                    )
            node = node.values()
        for child in node:
            kind = type(child)
            if kind is str or kind is int or kind is float or kind is bool or child is None:
                continue
            if kind is dict or kind is list or isinstance(child, dict | list | tuple):
                push(child)


def _where(root: object, target: object) -> str:
    """The path from ``root`` to the container ``target``, as subscripts."""
    stack: list[tuple[object, str]] = [(root, "the top level")]
    while stack:
        node, at = stack.pop()
        if node is target:
            return at
        prefix = "" if node is root else at
        if isinstance(node, dict):
            items: Any = node.items()
        elif isinstance(node, list | tuple):
            items = enumerate(node)
        else:
            continue
        stack.extend((child, f"{prefix}[{key!r}]") for key, child in items)
    return "an unknown place"  # pragma: no cover - target is always inside root


def decode_object(text: str) -> dict[str, Any]:
    """Decode stored text back into a fresh dict.

    Raises:
        ValueError: The text is not JSON, or not a JSON object.
    """
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError(f"expected a JSON object, found {type(data).__name__}")
    return data
