"""The error for keywords a function does not take, naming the closest it does."""

from __future__ import annotations

import difflib
from collections.abc import Collection

__all__ = ["unexpected_keywords"]


def unexpected_keywords(caller: str, unknown: Collection[str], known: Collection[str]) -> TypeError:
    """The ``TypeError`` Python raises for ``unknown`` keywords, each with its close match.

    For a function that takes keywords through ``**options: Unpack[...]``, where
    Python itself cannot refuse a misspelt one.

    Args:
        caller: The function, named in the message.
        unknown: The keywords it does not take (at least one).
        known: Every keyword it takes, for the close matches.
    """
    names = sorted(unknown)
    choices = sorted(known)
    named = ", ".join(_with_close_match(name, choices) for name in names)
    which = "an unexpected keyword argument" if len(names) == 1 else "unexpected keyword arguments"
    return TypeError(f"{caller}() got {which} {named}")


def _with_close_match(name: str, known: list[str]) -> str:
    near = difflib.get_close_matches(name, known, 1, 0.6)
    return f"{name!r}" + (f" (did you mean {near[0]!r}?)" if near else "")
