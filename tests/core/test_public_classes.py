"""Every class the package exports is final unless it is meant for subclassing,
and a handle users receive but must not build has no public constructor.

trio's rule (``@final`` on its public classes, ``NoPublicConstructor`` on
``Nursery`` and ``Task``): a class that can be subclassed is an interface to
keep, so which ones are is a decision, listed here with its reason.
"""

from __future__ import annotations

import importlib
import pkgutil
from enum import Enum
from typing import Any, Protocol

import pytest
from pydantic import BaseModel

import deepactors
from deepactors import actors, agent, backends, budget, events, hooks, tools
from deepactors._core.public import NoPublicConstructor, is_private
from deepactors.models import testing
from deepactors.persistence import MemoryCheckpointer

# Handed out by the package, never built by users: no public constructor (and final).
HANDLES: dict[type, str] = {
    actors.Runtime: "open_runtime()",
    actors.RunHandle: "a handle's start()",
    actors.EventStream: "agent.astream() / actors.event_stream()",
    actors.ThreadHandle: "rt.thread(agent, thread_id)",
    actors.OneShotHandle: "rt.thread(agent)",
}

# Meant for subclassing, and why.
OPEN: dict[type, str] = {
    hooks.AgentMiddleware: "the middleware base: hooks to override",
    events.Event: "the base of the event types",
    agent.DeepAgent: "the LangChain-speaking agent extends it (deepactors.langchain)",
    tools.Tool: "MCP and LangChain tools extend it",
    testing.FunctionModel: "ScriptedModel and test models extend it",
    backends.FilesOnly: "the base of backends that keep files only",
    backends.FilesystemBackend: "the shell backend and sandbox workspaces extend it",
    MemoryCheckpointer: "test checkpointers that fail on purpose extend it",
    budget.BudgetLedger: "Ray placement's worker ledger extends it (placement._ledger)",
}


def _open_by_kind(cls: type) -> str | None:
    """Why a class of this kind stays open, or None."""
    if issubclass(cls, BaseException):
        return "an error: the error tree is extended (and caught) by subclass"
    if getattr(cls, "_is_protocol", False) or cls is Protocol:
        return "a protocol: implemented by subclassing or by shape"
    if hasattr(cls, "__total__"):
        return "a TypedDict: cannot be final"
    if issubclass(cls, Enum):
        return "an enum: final by nature"
    if issubclass(cls, BaseModel):
        return "a pydantic model: a schema is extended by subclassing"
    if issubclass(cls, hooks.AgentMiddleware):
        return "middleware: customised by overriding its hooks, as in LangChain"
    if cls.__name__ == "LangChainAgent":
        return "made per event loop by subclassing (deepactors.langchain)"
    return None


def needs_final(cls: type) -> bool:
    """Whether the rule asks for ``@final`` on ``cls``."""
    return cls not in OPEN and _open_by_kind(cls) is None


# Old paths kept as deprecated aliases (tests/core/test_moved_paths.py): importing
# one warns, and what it exports its new path exports too.
DEPRECATED_PATHS = {"deepactors.demo", "deepactors.factory", "deepactors.lc_views"}


def _exported() -> list[Any]:
    modules = ["deepactors"] + [
        m.name
        for m in pkgutil.walk_packages(deepactors.__path__, "deepactors.")
        if not is_private(m.name) and m.name not in DEPRECATED_PATHS
    ]
    seen: dict[type, str] = {}
    for name in modules:
        module = importlib.import_module(name)
        for attr in getattr(module, "__all__", ()):
            obj = getattr(module, attr)
            if isinstance(obj, type):
                seen.setdefault(obj, f"{name}.{attr}")
    return [pytest.param(cls, id=where) for cls, where in seen.items()]


EXPORTED = _exported()


def test_the_lists_name_exported_classes() -> None:
    exported = {p.values[0] for p in EXPORTED}
    assert set(HANDLES) <= exported
    assert set(OPEN) <= exported
    assert len(exported) > 150  # the walk found the package


@pytest.mark.parametrize("cls", EXPORTED)
def test_an_exported_class_is_final_unless_meant_for_subclassing(cls: type) -> None:
    if needs_final(cls):
        assert getattr(cls, "__final__", False), (
            f"{cls.__module__}.{cls.__qualname__} is not meant for subclassing: "
            "mark it @typing.final (or list it in OPEN with the reason)"
        )
    else:
        assert not getattr(cls, "__final__", False), "listed as open, yet final"


@pytest.mark.parametrize("cls", EXPORTED)
def test_only_a_handle_lacks_a_public_constructor(cls: type) -> None:
    if cls in HANDLES:
        assert type(cls) is NoPublicConstructor
        assert cls.__final__  # type: ignore[attr-defined]
        with pytest.raises(TypeError, match="has no public constructor: "):
            cls()
    else:
        assert not isinstance(cls, NoPublicConstructor)
