"""Every error of deepactors survives a copy and a pickle whole (message and details)."""

from __future__ import annotations

import copy
import inspect
import pickle
from typing import Any

import pytest

import deepactors.errors as errors

ERRORS = [
    cls
    for name in errors.__all__
    if isinstance(cls := getattr(errors, name), type) and issubclass(cls, errors.DeepActorsError)
]


def _make(cls: type[errors.DeepActorsError]) -> errors.DeepActorsError:
    """An instance with a value for every keyword-only detail its constructor takes."""
    details: dict[str, Any] = {}
    for name, param in inspect.signature(cls.__init__).parameters.items():
        if param.kind is inspect.Parameter.KEYWORD_ONLY and param.default is param.empty:
            details[name] = f"{name}-value" if param.annotation in ("str", str) else 7.0
    return cls("what went wrong", **details)


@pytest.mark.parametrize("cls", ERRORS, ids=lambda c: c.__name__)
def test_an_error_survives_copies_and_pickles(cls: type[errors.DeepActorsError]) -> None:
    error = _make(cls)
    for again in (copy.copy(error), copy.deepcopy(error), pickle.loads(pickle.dumps(error))):
        assert type(again) is cls
        assert str(again) == str(error)
        assert again.__dict__ == error.__dict__
