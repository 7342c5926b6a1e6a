"""The middleware seam: hooks around the agent loop, and decorators for one-hook middleware.

Order, for a stack ``[a, b, c]``:

* ``before_agent`` / ``before_model``: a, b, c.
* ``after_model`` / ``after_agent``: c, b, a.
* ``wrap_model_call`` / ``wrap_tool_call``: a is outermost (a calls b calls c calls
  the model), so a sees the request first and the answer last.

A ``before_*``/``after_*`` hook returns ``None`` or a state update (a dict of
channel -> value); the special key ``"jump_to"`` (``"model"``, ``"tools"`` or
``"end"``) redirects the loop. A ``wrap_*`` hook may call its handler zero times
(short-circuit), once, or several times (retry).
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias, final

from .context import RunContext
from .messages import AssistantMessage, ToolCall, ToolMessage
from .models import ModelRequest
from .state import Channel, State
from .tools import Command, Tool

__all__ = [
    "AgentMiddleware",
    "HookResult",
    "JumpTo",
    "ModelHandler",
    "ToolCallRequest",
    "ToolHandler",
    "after_agent",
    "after_model",
    "before_agent",
    "before_model",
    "wrap_model_call",
    "wrap_tool_call",
]

JumpTo: TypeAlias = Literal["model", "tools", "end"]
HookResult: TypeAlias = Mapping[str, Any] | None
ModelHandler: TypeAlias = Callable[[ModelRequest], Awaitable[AssistantMessage]]


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallRequest:
    """One tool call on its way to the tool, as ``wrap_tool_call`` sees it.

    Attributes:
        call: The model's call (name, args, id).
        tool: The tool it names, or ``None`` if the model named an unknown tool.
        state: The calling actor's state.
        run: The calling actor's run context.
    """

    call: ToolCall
    tool: Tool | None
    state: State
    run: RunContext

    def replace(self, **changes: Any) -> ToolCallRequest:
        """A copy with some fields changed (for example other ``call`` arguments)."""
        return dataclasses.replace(self, **changes)


ToolHandler: TypeAlias = Callable[[ToolCallRequest], Awaitable[ToolMessage | Command]]


class AgentMiddleware:
    """Base class of middleware. Override only the hooks you need.

    Attributes:
        tools: Tools this middleware adds to the agent.
        system_prompt: Text this middleware adds to the system prompt.
        channels: State channels this middleware declares.
        starts_background: Whether it (or an agent it runs as a subagent) can
            start background tasks, which outlive the run that started them
            and are kept by the thread's actor. Only an agent with such a
            middleware gets that bookkeeping; the others pay nothing for it.
    """

    tools: Sequence[Tool] = ()
    system_prompt: str | None = None
    channels: Mapping[str, Channel] = {}
    starts_background: bool = False

    @property
    def name(self) -> str:
        """Identifies the middleware; a user middleware with a default's name replaces it."""
        return type(self).__name__

    async def before_agent(self, state: State, run: RunContext) -> HookResult:
        """Once per run, before the first model call."""
        return None

    async def before_model(self, state: State, run: RunContext) -> HookResult:
        """Before every model call."""
        return None

    async def after_model(self, state: State, run: RunContext) -> HookResult:
        """After every model call, before its tool calls run."""
        return None

    async def after_agent(self, state: State, run: RunContext) -> HookResult:
        """Once per run, after the model answered without tool calls."""
        return None

    async def wrap_model_call(
        self, request: ModelRequest, handler: ModelHandler
    ) -> AssistantMessage:
        """Around every model call: change the request, retry, or answer yourself."""
        return await handler(request)

    async def wrap_tool_call(
        self, request: ToolCallRequest, handler: ToolHandler
    ) -> ToolMessage | Command:
        """Around every tool call: change the call, retry, or answer yourself."""
        return await handler(request)


HOOKS = ("before_agent", "before_model", "after_model", "after_agent")
WRAPS = ("wrap_model_call", "wrap_tool_call")


def overrides(mw: AgentMiddleware, hook: str) -> bool:
    """Whether ``mw`` implements ``hook`` (the loop skips the no-op defaults)."""
    return getattr(type(mw), hook) is not getattr(AgentMiddleware, hook)


class _FunctionMiddleware(AgentMiddleware):
    """Middleware made from one function by a decorator."""

    def __init__(self, hook: str, fn: Callable[..., Any], name: str | None) -> None:
        self._fn = fn
        self._hook = hook
        self._name: str = name or str(getattr(fn, "__name__", hook))
        self._is_async = inspect.iscoroutinefunction(fn)

    @property
    def name(self) -> str:
        return self._name

    async def _call(self, *args: Any) -> Any:
        result = self._fn(*args)
        if self._is_async or inspect.isawaitable(result):
            result = await result
        return result


def _hook_decorator(hook: str) -> Callable[..., Any]:
    def decorator(
        fn: Callable[..., Any] | None = None, *, name: str | None = None
    ) -> AgentMiddleware | Callable[[Callable[..., Any]], AgentMiddleware]:
        def build(f: Callable[..., Any]) -> AgentMiddleware:
            cls = type(f"{hook}_middleware", (_FunctionMiddleware,), {hook: _FORWARDERS[hook]})
            made: AgentMiddleware = cls(hook, f, name)
            return made

        return build(fn) if fn is not None else build

    decorator.__name__ = hook
    decorator.__doc__ = (
        f"Make a middleware from one ``{hook}`` function (sync or async).\n\n"
        f"Usable bare (``@{hook}``) or with a name (``@{hook}(name=...)``)."
    )
    return decorator


async def _fwd_hook(self: _FunctionMiddleware, state: State, run: RunContext) -> HookResult:
    result: HookResult = await self._call(state, run)
    return result


async def _fwd_wrap(self: _FunctionMiddleware, request: Any, handler: Any) -> Any:
    return await self._call(request, handler)


_FORWARDERS: dict[str, Callable[..., Any]] = {
    "before_agent": _fwd_hook,
    "before_model": _fwd_hook,
    "after_model": _fwd_hook,
    "after_agent": _fwd_hook,
    "wrap_model_call": _fwd_wrap,
    "wrap_tool_call": _fwd_wrap,
}

before_agent = _hook_decorator("before_agent")
before_model = _hook_decorator("before_model")
after_model = _hook_decorator("after_model")
after_agent = _hook_decorator("after_agent")
wrap_model_call = _hook_decorator("wrap_model_call")
wrap_tool_call = _hook_decorator("wrap_tool_call")
