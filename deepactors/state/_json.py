"""What a checkpoint can keep: JSON data, with finite numbers only.

A tool's state update is checked against it before the update is applied (see
:meth:`~deepactors.state.State.check_update`): a value JSON has no form for (NaN
or an infinity, a set, a ``datetime``, a key that is not a string) would be
applied, then fail the checkpoint written behind the run, or be written in a
form that no reader of the thread (the next run, the server's ``/state``) can
take back. Refused at the tool, it is an error the model reads, and the thread
stays as it was.
"""

from __future__ import annotations

import math
from typing import cast

__all__ = ["json_problem"]

_LEAVES = (str, int, bool, type(None))


def json_problem(value: object) -> str | None:
    """What keeps ``value`` (a channel's encoded update) from being stored, or None.

    The answer names the place (``[0]['score']``) and the offending value's
    kind, not the value, which may be large.
    """
    # Iterative: an update may be deep, and this runs on every tool update.
    stack: list[tuple[object, tuple[str | int, ...]]] = [(value, ())]
    pop, push = stack.pop, stack.append
    while stack:
        node, at = pop()
        kind = type(node)
        if kind in _LEAVES:
            continue
        if kind is float:
            if math.isfinite(cast(float, node)):  # type(node) is float, said above
                continue
            return f"{_where(at)}: {node} is not a finite number (JSON has no NaN or Infinity)"
        if isinstance(node, dict):
            for key, child in node.items():
                if type(key) is not str:
                    return f"{_where(at)}: the key {key!r} is not a string"
                push((child, (*at, key)))
        elif isinstance(node, list | tuple):
            for i, child in enumerate(node):
                push((child, (*at, i)))
        elif isinstance(node, str | int | float):
            # A subclass (an IntEnum, a str Enum): JSON writes it as its base value.
            if isinstance(node, float) and not math.isfinite(node):
                return f"{_where(at)}: {node} is not a finite number (JSON has no NaN or Infinity)"
        else:
            return f"{_where(at)}: a {kind.__name__} is not JSON data"
    return None


def _where(at: tuple[str | int, ...]) -> str:
    return "".join(f"[{k!r}]" for k in at) or "the value"
