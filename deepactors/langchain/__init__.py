"""LangChain inside deepactors: its tools, messages and chat models accepted as they are.

Needs the optional extra ``pip install 'deepactors[langchain]'`` (``langchain-core``);
nothing here is imported unless it is used, and without the extra using it raises
a :class:`~deepactors.errors.ConfigurationError` that names the extra.

* LangChain tools (``BaseTool``, ``StructuredTool``, ``@tool``) need nothing: pass
  them wherever deepactors takes tools; :func:`from_langchain_tool` is the converter.
* :func:`to_langchain` / :func:`from_langchain`: a deepactors message as the
  ``langchain_core`` message of the same role, and back.
* :class:`LangChainChatModel`: any ``BaseChatModel`` as a deepactors model; passing
  the chat model itself as ``model=`` wraps it (:func:`adapt_model`, the models
  registry's LangChain adapter), and ``init_chat_model`` strings such as
  ``"google_genai:gemini-3-pro"`` resolve through :func:`resolve_model_string`.
* :func:`create_deep_agent`: deepactors' own, whose agent speaks LangChain's
  message objects in results and ``stream_mode`` streams (``isinstance(msg,
  AIMessage)`` and ``pretty_print()`` work): ``from deepactors.langchain import
  create_deep_agent`` is the one import a deepagents script changes.
* LangChain's middleware (``langchain.agents.middleware``: ``AgentMiddleware``
  subclasses, ``@before_model`` and the other decorators, the built-ins) need
  nothing: pass them in ``middleware=``; :func:`from_langchain_middleware` is the
  converter and :class:`LangChainMiddleware` the adapter that runs them.
* :class:`SubAgent` / :class:`CompiledSubAgent`: deepagents' subagent dict types;
  :class:`DeepAgentState`: its state keys, to extend for ``state_schema=``;
  :func:`file_data_to_string`, :func:`create_file_data`, :func:`update_file_data`:
  deepagents' ``FileData`` helpers (none need LangChain).
* :mod:`deepactors.langchain.views`: LangChain's and LangGraph's shapes of
  messages, state, interrupts and stream parts, as JSON (no ``langchain-core``
  needed); the facade and the server speak LangGraph through it.

On import this package runs only ``_files`` and ``_specs`` (plain values), never
the agent it names: ``views``, ``_messages`` and ``_tools`` sit in a layer below
the runtime, which imports them (``tests/core/test_layers.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._files import create_file_data as create_file_data
from ._files import file_data_to_string as file_data_to_string
from ._files import update_file_data as update_file_data
from ._specs import CompiledSubAgent as CompiledSubAgent
from ._specs import DeepAgentState as DeepAgentState
from ._specs import SubAgent as SubAgent

if TYPE_CHECKING:
    from ._agent import LangChainAgent as LangChainAgent
    from ._agent import as_langchain as as_langchain
    from ._agent import create_deep_agent as create_deep_agent
    from ._chat_model import LangChainChatModel as LangChainChatModel
    from ._chat_model import adapt_model as adapt_model
    from ._chat_model import resolve_model_string as resolve_model_string
    from ._errors import GraphRecursionError as GraphRecursionError
    from ._lc_builtins import from_langchain_middleware as from_langchain_middleware
    from ._messages import from_langchain as from_langchain
    from ._messages import to_langchain as to_langchain
    from ._middleware import LangChainMiddleware as LangChainMiddleware
    from ._tools import from_langchain_tool as from_langchain_tool
    from ._tools import from_langgraph_command as from_langgraph_command

__all__ = [
    "CompiledSubAgent",
    "DeepAgentState",
    "GraphRecursionError",
    "LangChainAgent",
    "LangChainChatModel",
    "LangChainMiddleware",
    "SubAgent",
    "adapt_model",
    "as_langchain",
    "create_deep_agent",
    "create_file_data",
    "file_data_to_string",
    "from_langchain",
    "from_langchain_middleware",
    "from_langchain_tool",
    "from_langgraph_command",
    "require_langchain",
    "resolve_model_string",
    "to_langchain",
    "update_file_data",
]

_LAZY = {
    "LangChainAgent": "_agent",
    "as_langchain": "_agent",
    "create_deep_agent": "_agent",
    "GraphRecursionError": "_errors",
    "LangChainChatModel": "_chat_model",
    "adapt_model": "_chat_model",
    "resolve_model_string": "_chat_model",
    "from_langchain": "_messages",
    "to_langchain": "_messages",
    "LangChainMiddleware": "_middleware",
    "from_langchain_middleware": "_lc_builtins",
    "from_langchain_tool": "_tools",
    "from_langgraph_command": "_tools",
}


def require_langchain(what: str) -> None:
    """Raise a clear error when ``langchain-core`` is not installed.

    Raises:
        ConfigurationError: Naming ``what`` needed it and the extra that brings it.
    """
    try:
        import langchain_core  # noqa: F401
    except ImportError as exc:
        from ..errors import ConfigurationError

        raise ConfigurationError(
            f"{what} needs langchain-core, which is not installed: "
            f"pip install 'deepactors[langchain]' ({exc})"
        ) from None


def __getattr__(name: str) -> object:
    # LangChain is imported only when one of its adapters is asked for.
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    require_langchain(f"deepactors.langchain.{name}")
    import importlib

    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
