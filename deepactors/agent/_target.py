"""An agent named on a command line: ``module:attribute`` or ``path/to/file.py:attribute``.

``deepactors serve``, ``deepactors run --agent`` and ``langgraph.json`` name
agents this way. The attribute may be a :class:`~deepactors.agent.DeepAgent` (or,
for ``serve``, a dict of them), or a function of no arguments that returns one;
anything else is a :class:`~deepactors.errors.ConfigurationError` saying what was
found, never a traceback from calling it.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from ..errors import ConfigurationError
from ._agent import DeepAgent

__all__ = ["import_from", "load_target"]


def load_target(target: str, folder: Path) -> object:
    """The attribute ``target`` names, called if it is a function of no arguments.

    Modules of ``folder`` (and a file's own folder) are importable, as under
    uvicorn and LangGraph.

    Raises:
        ConfigurationError: ``target`` is malformed, cannot be imported, names
            nothing, or names a function that needs arguments, is async, or
            fails when called (the error names it and what happened).
    """
    module_name, _, attribute = target.rpartition(":")
    if not module_name or not attribute:
        raise ConfigurationError(f"give the agent as module:attribute, not {target!r}")
    module = import_from(module_name, folder)
    try:
        value: object = getattr(module, attribute)
    except AttributeError:
        raise ConfigurationError(f"{module_name} has no {attribute!r}") from None
    if callable(value) and not isinstance(value, DeepAgent):
        value = _call(target, value)
    return value


def _call(target: str, fn: Callable[..., object]) -> object:
    """What a factory function returns; a clear error for what is no factory."""
    if inspect.iscoroutinefunction(fn):
        raise ConfigurationError(
            f"{target} is an async function: name the agent itself, or a plain function "
            "of no arguments that returns it"
        )
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        signature = None
    if signature is not None:
        needed = [
            p.name
            for p in signature.parameters.values()
            if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        ]
        if needed:
            raise ConfigurationError(
                f"{target} is a function that needs argument(s) {', '.join(needed)}: name "
                "the agent itself (module:agent), or a function of no arguments that "
                "returns it"
            )
    try:
        return fn()
    except Exception as exc:
        raise ConfigurationError(
            f"{target}() failed while making the agent: {type(exc).__name__}: {exc}"
        ) from exc


def _importable(folder: Path) -> None:
    entry = str(folder)
    if entry not in sys.path:
        sys.path.insert(0, entry)


def import_from(name: str, folder: Path) -> ModuleType:
    """Import ``name`` (``package.module``, or ``./file.py`` relative to ``folder``),
    with ``folder`` importable, as uvicorn and langgraph do.

    Raises:
        ConfigurationError: It cannot be imported.
    """
    _importable(folder)
    if not (name.endswith(".py") or "/" in name or os.sep in name):
        try:
            return importlib.import_module(name)
        except ImportError as exc:
            raise ConfigurationError(f"cannot import {name!r}: {exc}") from exc
    file = (folder / name).resolve()
    if not file.is_file():
        raise ConfigurationError(f"cannot import {name!r}: no such file {file}")
    # Its own folder too, so it imports its neighbours as it does when run.
    _importable(file.parent)
    module_name = file.stem
    loaded = sys.modules.get(module_name)
    if loaded is not None and getattr(loaded, "__file__", None) == str(file):
        return loaded
    spec = importlib.util.spec_from_file_location(module_name, file)
    if spec is None or spec.loader is None:
        raise ConfigurationError(f"cannot import {name!r}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(module_name, None)
        raise
    return module
