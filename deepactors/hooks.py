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

Hooks are ``async def``. LangChain's async hook names (``abefore_model``,
``awrap_model_call``, ...) are taken as the hook of the plain name, so a
LangChain middleware ported by changing its import keeps working; a class is
checked when it is defined: a sync hook, a hook given under both names, or a
method named like a hook that is none (``before_tool``, ``wrap_model``) is a
:class:`~deepactors.errors.ConfigurationError` then, never a hook silently not
called. (LangChain's own middleware, sync hooks included, runs as it is through
:mod:`deepactors.langchain`.)
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias, final

from .context import RunContext
from .errors import ConfigurationError
from .interrupts import ActionRequest
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
HookResult: TypeAlias = Mapping[str, object] | None
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

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        _adopt_langchain_names(cls)
        _check_hooks(cls)

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

    def asks_before(self, calls: Sequence[ToolCall], run: RunContext) -> list[ActionRequest]:
        """What a human must answer before any of ``calls`` runs (default: nothing).

        Asked when a run is about to stop at a breakpoint before a tool step
        (``interrupt_before=["tools"]``): a middleware that stops for a human
        on some of these calls (``interrupt_on``) says so here, and the run
        stops for those requests instead, first, as LangGraph's approval step
        (after the model, before the tools node) comes before the breakpoint.
        """
        return []


HOOKS = ("before_agent", "before_model", "after_model", "after_agent")
WRAPS = ("wrap_model_call", "wrap_tool_call")
ALL_HOOKS = (*HOOKS, *WRAPS)

LANGCHAIN_ASYNC_NAMES: Mapping[str, str] = {f"a{hook}": hook for hook in ALL_HOOKS}
"""LangChain's async hook names (``abefore_model``...) -> the hook they are here."""

# What a misspelt or invented hook looks like: before_/after_ anything, or a wrap
# of a model or tool (a helper named wrap_text is not taken for one).
_HOOKISH = re.compile(r"^a?(?:before|after)_\w+$|^a?wrap_\w*(?:model|tool)\w*$")


def unknown_hooks(cls: type, known: Sequence[str]) -> list[str]:
    """Public methods of ``cls`` named like a hook that are none of ``known``.

    Catches ``before_tool``, ``after_tools``, ``wrap_model``, ``befor_model``...:
    a hook under a name the loop does not know would never be called.
    """
    found = []
    for klass in cls.__mro__:
        if klass.__module__.startswith(("deepactors.", "langchain.")) and klass is not cls:
            break  # the library's own bases define only real hooks
        for name, value in vars(klass).items():
            if name.startswith("_") or name in known or not callable(value):
                continue
            if _HOOKISH.match(name) or difflib.get_close_matches(name, known, 1, 0.85):
                found.append(name)
    return found


def _unknown_hook_error(cls: type, names: Sequence[str], known: Sequence[str]) -> str:
    hints = []
    for name in names:
        near = difflib.get_close_matches(name, known, 1, 0.6)
        hints.append(f"{name!r}" + (f" (did you mean {near[0]!r}?)" if near else ""))
    return (
        f"middleware {cls.__qualname__} has method(s) named like hooks that are none: "
        f"{', '.join(hints)}; the hooks are {', '.join(known)}. Rename a hook to one of "
        "them, or a helper method so that it starts with '_'"
    )


def _adopt_langchain_names(cls: type[AgentMiddleware]) -> None:
    """``abefore_model`` and company, LangChain's async names, as the hooks they are."""
    for lc_name, hook in LANGCHAIN_ASYNC_NAMES.items():
        fn = vars(cls).get(lc_name)
        if fn is None:
            continue
        if not inspect.iscoroutinefunction(fn):
            raise ConfigurationError(
                f"{cls.__qualname__}.{lc_name} must be 'async def' (LangChain's async hook)"
            )
        own = vars(cls).get(hook)
        if own is not None and inspect.iscoroutinefunction(own):
            raise ConfigurationError(
                f"{cls.__qualname__} defines both {hook} and {lc_name}, which are the same "
                f"hook here (deepactors' hooks are async): keep one"
            )
        # A sync hook beside it is LangChain's sync twin; the async one runs, as
        # LangChain runs it in an async agent.
        setattr(cls, hook, fn)


def _check_hooks(cls: type[AgentMiddleware]) -> None:
    for hook in ALL_HOOKS:
        fn = vars(cls).get(hook)
        if fn is not None and not inspect.iscoroutinefunction(fn):
            raise ConfigurationError(
                f"{cls.__qualname__}.{hook} must be 'async def': deepactors' hooks are async "
                f"(a sync hook is awaited by nothing). Write 'async def {hook}', or subclass "
                "langchain.agents.middleware.AgentMiddleware, whose sync hooks deepactors "
                "runs with the langchain extra"
            )
    known = (*ALL_HOOKS, *LANGCHAIN_ASYNC_NAMES)
    unknown = unknown_hooks(cls, known)
    if unknown:
        raise ConfigurationError(_unknown_hook_error(cls, unknown, known))


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

    async def _call(self, *args: object) -> Any:
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


async def _fwd_wrap(self: _FunctionMiddleware, request: object, handler: object) -> object:
    return await self._call(request, handler)


_FORWARDERS: dict[str, Callable[..., Awaitable[object]]] = {
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
