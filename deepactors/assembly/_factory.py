"""``create_deep_agent``: a model, tools, and the default middleware stack, resolved once."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Unpack

from ..agent import DeepAgent
from ..backends import FilesystemPermission
from ..messages import SystemMessage
from ..middleware import AgentMiddleware
from ..models import ChatModel
from ..tools import ToolLike
from ._assemble import DeepAgentCall, assemble
from ._options import AgentOptions
from ._parts import DEFAULT_PROMPT
from ._subagents import SubAgentLike

if TYPE_CHECKING:
    from ..backends import Backend
    from ..persistence import Checkpointer, Store

__all__ = ["DEFAULT_PROMPT", "create_deep_agent"]


def create_deep_agent(
    model: str | ChatModel | None = None,
    tools: Sequence[ToolLike] | None = None,
    *,
    system_prompt: str | SystemMessage | None = None,
    middleware: Sequence[AgentMiddleware] = (),
    subagents: Sequence[SubAgentLike] | None = None,
    skills: Sequence[str] | None = None,
    memory: Sequence[str] | None = None,
    permissions: Sequence[FilesystemPermission] | None = None,
    backend: Backend | None = None,
    interrupt_on: Mapping[str, bool | Mapping[str, Any]] | None = None,
    response_format: Any = None,
    state_schema: type | None = None,
    context_schema: Any = None,
    checkpointer: Checkpointer | None = None,
    store: Store | None = None,
    debug: bool = False,
    name: str | None = None,
    cache: object = None,
    **options: Unpack[AgentOptions],
) -> DeepAgent:
    """Build a deep agent: a model, tools, and the default middleware stack.

    The keywords follow LangChain's ``deepagents``, so a script ports by changing
    imports. The default stack (planning, files, ``task``, summarization, ...) is
    listed in ``docs/middleware.md``; a middleware of yours with the same ``name``
    as a default one replaces it in place.

    Args:
        model: ``"anthropic:<model id>"`` or a :class:`~deepactors.models.ChatModel`.
        tools: Functions (sync or async, with type hints) or :class:`Tool` objects,
            and :class:`~deepactors.mcp.MCPServer` objects (their tools).
        system_prompt: Your instructions (text, or a ``SystemMessage`` of text:
            deepactors' or LangChain's); middleware sections are appended.
        middleware: Extra middleware, after the default stack.
        subagents: What ``task`` can start besides ``general-purpose`` (a dict so
            named replaces it): dicts with ``name``, ``description``,
            ``system_prompt`` and optional overrides (``tools``, ``model``,
            ``timeout``...: see ``docs/subagents.md``), or a prebuilt agent as
            ``{"name", "description", "agent": <DeepAgent>}``.
        skills: Folders of ``<name>/SKILL.md`` skills in the backend (later ones
            override earlier ones by name); ``general-purpose`` gets these.
        memory: Memory files (``AGENTS.md``) in the backend, shown to the model on
            every call and reloaded whenever they change.
        permissions: ``FilesystemPermission`` rules for the file tools (first
            match wins, no match allows); subagents inherit them unless they set
            their own.
        backend: Where the file tools keep files (default: in agent state).
        interrupt_on: The tools a human decides on before they run: name ->
            ``True`` or ``{"allowed_decisions": [...]}``; needs a ``checkpointer``.
        response_format: A schema (pydantic model class, dataclass, TypedDict or
            JSON schema dict, or a ``ToolStrategy`` / ``ProviderStrategy`` /
            ``AutoStrategy``) the run's final answer must fit, landing in
            ``result["structured_response"]``.
        state_schema: A ``TypedDict`` of state keys beyond deepactors' own (such as
            deepagents' ``DeepAgentState`` extended): each a channel of every agent
            of the tree, set by input, hooks and tools (see ``docs/porting.md``).
        context_schema: The type a run's ``context=`` must fit (pydantic model,
            dataclass or TypedDict); hooks and tools get the validated instance.
        checkpointer: Where threads are saved (``MemoryCheckpointer``,
            ``SqliteCheckpointer``, ``PostgresCheckpointer``); LangGraph's
            ``InMemorySaver`` stands for a ``MemoryCheckpointer`` (one per saver).
        store: Long-term key-value store for backends and memory.
        debug: Log every hook and model call, at DEBUG level, to the ``deepactors``
            logger; they show once the application lets them through, e.g.
            ``logging.basicConfig()``, ``logging.getLogger("deepactors").setLevel(logging.DEBUG)``.
        name: The agent's name and the root of its actor paths (default ``main``).
        cache: LangGraph's node cache: refused (there are no graph nodes here).
        **options: deepactors' own keywords, documented in :class:`AgentOptions`.

    Raises:
        TypeError: An unknown keyword (the error names the closest one).
        ConfigurationError: A bad argument, or one whose feature is not available.
        InputError: ``interrupt_before``/``interrupt_after`` name a node a deep
            agent does not have.
    """
    # locals() here is the parameters and nothing else (nothing is bound before it),
    # handed on as one typed value: DeepAgentCall, whose fields a test keeps in step.
    return assemble(DeepAgentCall(**locals()))
