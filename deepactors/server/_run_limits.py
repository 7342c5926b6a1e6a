"""A run's limits sent by the client that started it: its timeout and its budget.

A remote subagent's parent sends the time and the budget it has left under
``config.configurable.deepactors_limits`` (see :mod:`deepactors.remote._limits`
for the shape); the run is started with them as ``timeout=`` and ``budget=``,
so the child stops here at its parent's deadline and within its parent's
budget even if the parent's process is gone. A run past its timeout ends with
status ``timeout``; one whose budget refused a call ends with the budget's
report in its metadata, as any budgeted run.
"""

from __future__ import annotations

import dataclasses

from starlette.exceptions import HTTPException

from ..actors import RunInput
from ..remote import read_limits
from ._schemas import RunCreate

__all__ = ["with_limits"]


def with_limits(run_input: RunInput, body: RunCreate) -> tuple[RunInput, float | None]:
    """The run's input with the budget the request sent, and its timeout (None: none).

    Raises:
        HTTPException: 422, limits that are not limits (nothing was started).
    """
    try:
        timeout, budget = read_limits(body.config)
    except ValueError as exc:
        raise HTTPException(422, str(exc)) from None
    if budget is not None:
        run_input = dataclasses.replace(run_input, budget=budget)
    return run_input, timeout
