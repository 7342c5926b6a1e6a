"""LangGraph's ``GraphRecursionError``, as a deepactors error too.

It lives here rather than in :mod:`deepactors.errors` because it subclasses
LangGraph's own class (when LangGraph is installed), so that a ported script's
``except GraphRecursionError`` (imported from ``langgraph.errors``) catches it,
and deepactors itself never imports LangGraph.
"""

from __future__ import annotations

from ..errors import StepLimitExceeded

__all__ = ["GraphRecursionError"]

try:
    from langgraph.errors import GraphRecursionError as _LangGraphRecursionError
except ImportError:  # LangGraph not installed: Python's RecursionError, as LangGraph's is
    _LangGraphRecursionError = RecursionError  # type: ignore[misc, assignment]


class GraphRecursionError(StepLimitExceeded, _LangGraphRecursionError):
    """The agent loop ran more model turns than ``recursion_limit`` (or ``max_steps``) allow.

    Raised by the LangChain agent (:func:`deepactors.langchain.create_deep_agent`)
    where deepactors' own raises :class:`~deepactors.errors.StepLimitExceeded`;
    ``except StepLimitExceeded`` and LangGraph's ``except GraphRecursionError`` both
    catch it.
    """
