"""LangChain's built-in middleware that become deepactors' own, and the entry point.

Most of LangChain's built-ins run as they are, through
:class:`~deepactors.langchain._middleware.LangChainMiddleware`
(``ModelCallLimitMiddleware``, ``ToolCallLimitMiddleware``,
``SummarizationMiddleware``, ``ModelRetryMiddleware``, ``ModelFallbackMiddleware``,
...). Two are deepactors' own, because what they do belongs to the runtime:

* ``HumanInTheLoopMiddleware``: LangChain's stops with LangGraph's
  ``interrupt()``, which needs LangGraph's graph; deepactors' stops the same
  way from the outside (the same requests and decisions, resumed with
  ``Command(resume={"decisions": [...]})``). What has no counterpart (a callable
  ``description``, ``interrupt_mode="per_call"``, another ``description_prefix``
  or ``edit_notice``) is refused with what to write.
* ``TodoListMiddleware`` with its default texts: deepactors' own ``write_todos``
  (the same tool and ``todos`` key, with its events); with texts of your own,
  LangChain's runs as it is.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from langchain.agents.middleware import HumanInTheLoopMiddleware as LCHumanInTheLoop
from langchain.agents.middleware import TodoListMiddleware as LCTodoList
from langchain.agents.middleware import human_in_the_loop as lc_hitl
from langchain.agents.middleware import todo as lc_todo

from ..errors import ConfigurationError
from ..hooks import AgentMiddleware
from ..middleware import HumanInTheLoopMiddleware, TodoListMiddleware
from ..models import ChatModel
from ._middleware import LangChainMiddleware

__all__ = ["from_langchain_middleware"]


def from_langchain_middleware(
    middleware: object, *, model: ChatModel | None = None
) -> AgentMiddleware:
    """The deepactors middleware that does what LangChain's ``middleware`` does.

    Args:
        middleware: A LangChain ``AgentMiddleware``.
        model: The agent's model.

    Raises:
        ConfigurationError: An option with no deepactors counterpart (the error
            says what to write), or a middleware the adapter cannot run.
    """
    for cls, convert in _OWN.items():
        if type(middleware) is cls:
            mapped = convert(middleware)
            if mapped is not None:
                return mapped
    return LangChainMiddleware(middleware, model=model)


def _todo_list(mw: Any) -> AgentMiddleware | None:
    if (
        mw.system_prompt == lc_todo.WRITE_TODOS_SYSTEM_PROMPT
        and mw.tool_description == lc_todo.WRITE_TODOS_TOOL_DESCRIPTION
    ):
        return TodoListMiddleware()
    return None  # texts of your own: LangChain's, as it is


def _human_in_the_loop(mw: Any) -> AgentMiddleware:
    def refuse(what: str, fix: str) -> ConfigurationError:
        return ConfigurationError(
            f"LangChain's HumanInTheLoopMiddleware: {what} has no counterpart in deepactors "
            f"(which stops the run itself, not through LangGraph's interrupt): {fix}"
        )

    if getattr(mw, "interrupt_mode", "batched") != "batched":
        raise refuse("interrupt_mode='per_call'", "drop it (one interrupt per model turn)")
    if mw.description_prefix != "Tool execution requires approval":
        raise refuse(
            "description_prefix", "give each tool's text as interrupt_on[name]['description']"
        )
    if getattr(mw, "edit_notice", None) != getattr(lc_hitl, "_EDIT_NOTICE", None):
        raise refuse("edit_notice", "drop it")
    config: dict[str, bool | Mapping[str, Any]] = {}
    for name, setting in mw.interrupt_on.items():
        if not isinstance(setting, Mapping):
            config[name] = bool(setting)
            continue
        extra = set(setting) - {"allowed_decisions", "description"}
        if extra:
            raise refuse(f"interrupt_on[{name!r}] key(s) {sorted(extra)}", "drop them")
        description = setting.get("description")
        if description is not None and not isinstance(description, str):
            raise refuse(
                f"interrupt_on[{name!r}]['description'] as a function",
                "give the description as text",
            )
        config[name] = {k: v for k, v in setting.items() if v is not None}
    return HumanInTheLoopMiddleware(config)


_OWN: dict[type, Callable[[Any], AgentMiddleware | None]] = {
    LCTodoList: _todo_list,
    LCHumanInTheLoop: _human_in_the_loop,
}
