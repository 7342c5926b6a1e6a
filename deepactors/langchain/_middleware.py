"""LangChain's middleware (``langchain.agents.middleware``) run as LangChain runs it.

``create_deep_agent(middleware=[...])`` takes LangChain ``AgentMiddleware``
objects (subclasses, and what ``@before_model``, ``@wrap_model_call``,
``@dynamic_prompt`` and the other decorators make) beside deepactors' own.
LangChain's built-ins whose behaviour deepactors has become deepactors' own
(:mod:`._lc_builtins`); every other one is wrapped in :class:`LangChainMiddleware`:

* **Hooks.** Each hook the class implements is called where LangChain calls it
  (``before_*`` in list order, ``after_*`` in reverse, the first ``wrap_*``
  outermost), under its sync or async name. On asyncio the async hook
  (``abefore_model``...) runs when the class has one, else the sync one; on trio,
  whose loop LangChain's async machinery cannot use, the sync hook runs when
  there is one, else the async one is awaited directly. A sync hook runs in a
  worker thread, never on the event loop; the ``handler`` a sync ``wrap_*`` hook
  calls runs the rest of the chain back on the loop.
* **What hooks see.** ``state`` is the agent's state in LangChain's shapes
  (messages as ``langchain_core`` objects, files as ``FileData`` dicts; keys
  never written are absent), read lazily; ``runtime`` is LangGraph's
  ``Runtime`` (``context``, ``store``, ``stream_writer``). ``wrap_model_call``
  gets LangChain's ``ModelRequest`` (``model`` is the LangChain chat model when
  the agent's model is one, else the deepactors model; ``tools`` are
  ``BaseTool`` objects and provider tool dicts) and ``wrap_tool_call`` its
  ``ToolCallRequest``.
* **What hooks return.** A state update (``messages`` as LangChain objects,
  ``RemoveMessage`` included; ``jump_to``); a ``ModelResponse`` or an
  ``AIMessage``; a ``ToolMessage`` or LangGraph's ``Command(update=...)``.
* **State.** The keys of the middleware's ``state_schema`` beyond
  ``AgentState``'s become channels of the agent (private when marked so; an
  ``UntrackedValue`` key starts each run empty and is never checkpointed).

What cannot map is refused when the agent is built, never ignored: a method
named like a hook that is none, a ``wrap_model_call`` that returns an
``ExtendedModelResponse`` with a ``Command`` (a model call here cannot update
state: return the update from ``after_model``), a tool added to the request that
the agent does not have.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from typing import Any, TypeVar

import anyio
import anyio.from_thread
import anyio.to_thread
import sniffio
from langchain.agents.middleware import AgentMiddleware as LCMiddleware
from langchain.agents.middleware import ModelRequest as LCModelRequest
from langchain.agents.middleware import ModelResponse
from langchain_core.messages import AIMessage, SystemMessage
from langchain_core.messages import ToolMessage as LCToolMessage
from langchain_core.tools import BaseTool
from langgraph.prebuilt.tool_node import ToolCallRequest as LCToolCallRequest
from langgraph.runtime import Runtime as LGRuntime
from langgraph.types import Command as LGCommand

from ..context import RunContext
from ..errors import ConfigurationError
from ..hooks import (
    ALL_HOOKS,
    AgentMiddleware,
    HookResult,
    ModelHandler,
    ToolCallRequest,
    ToolHandler,
    unknown_hooks,
)
from ..messages import AssistantMessage, ToolCall, ToolMessage
from ..models import ChatModel, ModelRequest
from ..state import State
from ..tools import Command, ProviderTool, Tool, provider_tool
from ._chat_model import LangChainChatModel
from ._messages import from_langchain, to_langchain
from ._mw_views import (
    StateView,
    lc_runtime,
    lc_tool_result,
    lc_tool_runtime,
    our_message,
    our_model,
    schema_channels,
    tool_view,
)
from ._tools import LangChainTool, from_langchain_tool

__all__ = ["LangChainMiddleware", "is_langchain_middleware"]

_Request = TypeVar("_Request")  # the LangChain request a wrap hook's handler takes

_LC_KNOWN = (*ALL_HOOKS, *(f"a{hook}" for hook in ALL_HOOKS))


def is_langchain_middleware(obj: object) -> bool:
    """A LangChain ``AgentMiddleware``, told by its class (LangChain not imported)."""
    return any(
        cls.__name__ == "AgentMiddleware" and cls.__module__.startswith("langchain.agents.")
        for cls in type(obj).__mro__
    )


def _implemented(cls: type) -> dict[str, tuple[bool, bool]]:
    """Hook -> (sync implemented, async implemented), for hooks the class has."""
    out = {}
    for hook in ALL_HOOKS:
        sync = getattr(cls, hook) is not getattr(LCMiddleware, hook)
        asyn = getattr(cls, f"a{hook}") is not getattr(LCMiddleware, f"a{hook}")
        if sync or asyn:
            out[hook] = (sync, asyn)
    return out


class LangChainMiddleware(AgentMiddleware):
    """A LangChain ``AgentMiddleware`` as deepactors middleware (see the module docstring).

    Args:
        middleware: The LangChain middleware.
        model: The agent's model (what ``ModelRequest.model`` shows).

    Raises:
        ConfigurationError: A method named like a hook that is none, a
            ``state_schema`` key that clashes with a channel it cannot be, or
            tools that cannot be described to a model.
    """

    def __new__(cls, middleware: Any, *, model: ChatModel | None = None) -> LangChainMiddleware:
        # A class per set of hooks: the loop calls only hooks a class overrides.
        hooks = frozenset(_implemented(type(middleware)))
        return super().__new__(_class_for(hooks))

    def __init__(self, middleware: Any, *, model: ChatModel | None = None) -> None:
        cls = type(middleware)
        unknown = unknown_hooks(cls, _LC_KNOWN)
        if unknown:
            raise ConfigurationError(
                f"LangChain middleware {cls.__qualname__} has method(s) named like hooks that "
                f"are none: {', '.join(map(repr, unknown))}; LangChain's hooks are "
                f"{', '.join(_LC_KNOWN)}"
            )
        self.middleware = middleware
        self.model = model
        self._hooks = _implemented(cls)
        self.tools = tuple(from_langchain_tool(t) for t in getattr(middleware, "tools", ()) or ())
        self.channels, self._untracked = schema_channels(middleware)
        self._tool_views: dict[str, BaseTool] = {}

    @property
    def name(self) -> str:
        return str(self.middleware.name)

    def __repr__(self) -> str:
        return f"LangChainMiddleware({self.middleware!r})"

    # -- calling LangChain's hooks ---------------------------------------------------

    async def _call(
        self,
        hook: str,
        *args: object,
        handler: Callable[[_Request], Coroutine[object, object, object]] | None = None,
    ) -> object:
        """Call ``hook`` (sync or async, see the module docstring) with ``args``."""
        sync, asyn = self._hooks[hook]
        if asyn and (not sync or sniffio.current_async_library() == "asyncio"):
            fn = getattr(self.middleware, f"a{hook}")
            return await (fn(*args) if handler is None else fn(*args, handler))
        fn = getattr(self.middleware, hook)
        if handler is not None:
            call_handler = handler

            def sync_handler(request: _Request) -> object:
                # The sync hook calls a sync handler, from its worker thread: the
                # rest of the chain runs back on the loop.
                return anyio.from_thread.run(call_handler, request)

            args = (*args, sync_handler)
        return await anyio.to_thread.run_sync(functools.partial(fn, *args))

    async def _state_hook(self, hook: str, state: State, run: RunContext) -> HookResult:
        result = await self._call(hook, StateView(state), lc_runtime(run))
        return self._update(hook, result, state)

    def _update(self, hook: str, result: object, state: State) -> HookResult:
        if result is None:
            return None
        if not isinstance(result, Mapping):
            raise ConfigurationError(
                f"{self.name}.{hook} returned {type(result).__name__}: a hook returns a dict "
                "of state updates, or None"
            )
        update = dict(result)
        jump = update.pop("jump_to", None)
        if "messages" in update:
            update["messages"] = [our_message(m) for m in update["messages"]]
        try:
            out = state.check_update(update)
        except ValueError as exc:
            raise ConfigurationError(
                f"{self.name}.{hook} returned an update deepactors cannot apply: {exc}. "
                "Declare the middleware's own keys in its state_schema"
            ) from None
        if jump is not None:
            out["jump_to"] = jump
        return out

    async def _before_agent(self, state: State, run: RunContext) -> HookResult:
        reset = dict.fromkeys(self._untracked) if self._untracked else None
        if reset:
            state.apply(reset)  # LangGraph's UntrackedValue: nothing carried between runs
        if "before_agent" not in self._hooks:
            return None
        return await self._state_hook("before_agent", state, run)

    async def _before_model(self, state: State, run: RunContext) -> HookResult:
        return await self._state_hook("before_model", state, run)

    async def _after_model(self, state: State, run: RunContext) -> HookResult:
        return await self._state_hook("after_model", state, run)

    async def _after_agent(self, state: State, run: RunContext) -> HookResult:
        return await self._state_hook("after_agent", state, run)

    # -- the model call ------------------------------------------------------------

    async def _wrap_model_call(
        self, request: ModelRequest, handler: ModelHandler
    ) -> AssistantMessage:
        assert request.run is not None
        assert request.state is not None
        runtime = lc_runtime(request.run)
        view = StateView(request.state)
        lc_request = self._lc_model_request(request, view, runtime)
        answers: dict[int, AssistantMessage] = {}  # LangChain's message -> ours

        async def call_model(lc: LCModelRequest) -> ModelResponse:
            answer = await handler(self._from_lc_model_request(lc, lc_request, request))
            message = to_langchain(answer)
            answers[id(message)] = answer
            return ModelResponse(result=[message])

        result = await self._call("wrap_model_call", lc_request, handler=call_model)
        return self._answer(result, answers)

    def _lc_model_request(
        self, request: ModelRequest, view: StateView, runtime: LGRuntime[Any]
    ) -> LCModelRequest:
        model = request.model or self.model
        settings = dict(request.settings)
        return LCModelRequest(
            model=model.chat_model if isinstance(model, LangChainChatModel) else model,  # type: ignore[arg-type]
            messages=[to_langchain(m) for m in request.messages],  # type: ignore[misc]
            system_message=None
            if request.system_prompt is None
            else SystemMessage(content=request.system_prompt),
            tool_choice=settings.pop("tool_choice", None),
            tools=[self._lc_tool(t) for t in request.tools],
            state=view,  # type: ignore[arg-type]
            runtime=runtime,
            model_settings=settings,
        )

    def _from_lc_model_request(
        self, lc: LCModelRequest, sent: LCModelRequest, request: ModelRequest
    ) -> ModelRequest:
        """Our request with what the middleware changed in LangChain's (nothing else copied)."""
        changes: dict[str, Any] = {}
        if lc.messages is not sent.messages:
            changes["messages"] = [our_message(m) for m in lc.messages]
        if lc.system_message is not sent.system_message:
            changes["system_prompt"] = None if lc.system_message is None else lc.system_message.text
        if lc.tools is not sent.tools:
            changes["tools"] = self._our_tools(lc.tools, request.tools)
        if lc.model is not sent.model:
            changes["model"] = our_model(lc.model)
        if lc.model_settings is not sent.model_settings or lc.tool_choice != sent.tool_choice:
            settings = dict(lc.model_settings)
            if lc.tool_choice is not None:
                settings["tool_choice"] = lc.tool_choice
            changes["settings"] = settings
        if lc.response_format is not None:
            raise ConfigurationError(
                f"{self.name}.wrap_model_call set response_format on the request: give "
                "response_format= to create_deep_agent instead"
            )
        return request.replace(**changes) if changes else request

    def _answer(self, result: Any, answers: Mapping[int, AssistantMessage]) -> AssistantMessage:
        name = type(result).__name__
        if name == "ExtendedModelResponse":
            command = getattr(result, "command", None)
            if command is not None and (command.update or command.goto or command.resume):
                raise ConfigurationError(
                    f"{self.name}.wrap_model_call returned a Command with its answer: a model "
                    "call here cannot update state; return the update from after_model"
                )
            result = result.model_response
        if isinstance(result, ModelResponse):
            messages = [m for m in result.result if isinstance(m, AIMessage)]
            if len(messages) != 1 or len(result.result) != 1:
                raise ConfigurationError(
                    f"{self.name}.wrap_model_call answered with {len(result.result)} message(s); "
                    "a model call here answers with one AIMessage"
                )
            result = messages[0]
        if not isinstance(result, AIMessage):
            raise ConfigurationError(
                f"{self.name}.wrap_model_call returned {name}: a ModelResponse or an AIMessage"
            )
        ours = answers.get(id(result))
        if ours is not None:
            return ours  # the model's own answer, passed on: every field kept
        message = from_langchain(result)
        assert isinstance(message, AssistantMessage)
        return message

    def _lc_tool(self, tool: Tool) -> BaseTool | dict[str, object]:
        if isinstance(tool, LangChainTool) and tool.lc_tool is not None:
            return tool.lc_tool
        if isinstance(tool, ProviderTool):
            return dict(tool.spec)
        view = self._tool_views.get(tool.name)
        if view is None:
            view = self._tool_views[tool.name] = tool_view(tool)
        return view

    def _our_tools(self, lc_tools: Sequence[object], tools: Sequence[Tool]) -> list[Tool]:
        by_name = {t.name: t for t in tools}
        by_name.update((t.name, t) for t in self.tools)
        out: list[Tool] = []
        for item in lc_tools:
            if isinstance(item, Mapping):
                out.append(provider_tool(item))
                continue
            tool = by_name.get(getattr(item, "name", ""))
            if tool is None:
                raise ConfigurationError(
                    f"{self.name}.wrap_model_call offered the model a tool the agent does not "
                    f"have ({getattr(item, 'name', item)!r}): give it in tools= (or the "
                    "middleware's tools) instead"
                )
            out.append(tool)
        return out

    # -- tool calls ----------------------------------------------------------------

    async def _wrap_tool_call(
        self, request: ToolCallRequest, handler: ToolHandler
    ) -> ToolMessage | Command:
        call = request.call
        view = StateView(request.state)
        lc_tool = None if request.tool is None else self._lc_tool(request.tool)
        lc_request = LCToolCallRequest(
            tool_call={
                "name": call.name,
                "args": dict(call.args),
                "id": call.id,
                "type": "tool_call",
            },
            tool=lc_tool if isinstance(lc_tool, BaseTool) else None,
            state=view,
            runtime=lc_tool_runtime(request, view),
        )
        results: dict[int, ToolMessage | Command] = {}

        async def run_tool(lc: LCToolCallRequest) -> object:
            ours = request
            if lc.tool_call is not lc_request.tool_call:
                new = lc.tool_call
                edited = ToolCall(id=new["id"], name=new["name"], args=dict(new["args"]))
                ours = request.replace(call=edited)
            result = await handler(ours)
            lc_result = lc_tool_result(result)
            results[id(lc_result)] = result
            return lc_result

        out = await self._call("wrap_tool_call", lc_request, handler=run_tool)
        kept = results.get(id(out))
        if kept is not None:
            return kept
        return self._tool_result(out)

    def _tool_result(self, out: object) -> ToolMessage | Command:
        if isinstance(out, LCToolMessage):
            message = from_langchain(out)
            assert isinstance(message, ToolMessage)
            return message
        if isinstance(out, LGCommand):
            if out.goto or out.graph is not None:
                raise ConfigurationError(
                    f"{self.name}.wrap_tool_call returned Command(goto=/graph=): a tool call "
                    "here can only update state (Command(update=...))"
                )
            update = dict(out.update or {})
            if "messages" in update:
                update["messages"] = [our_message(m) for m in update["messages"]]
            return Command(update=update)
        raise ConfigurationError(
            f"{self.name}.wrap_tool_call returned {type(out).__name__}: a ToolMessage or a "
            "Command(update=...)"
        )


_METHODS: dict[str, Callable[..., Awaitable[object]]] = {
    "before_agent": LangChainMiddleware._before_agent,
    "before_model": LangChainMiddleware._before_model,
    "after_model": LangChainMiddleware._after_model,
    "after_agent": LangChainMiddleware._after_agent,
    "wrap_model_call": LangChainMiddleware._wrap_model_call,
    "wrap_tool_call": LangChainMiddleware._wrap_tool_call,
}


@functools.cache
def _class_for(hooks: frozenset[str]) -> type[LangChainMiddleware]:
    # before_agent always: it empties the UntrackedValue keys at a run's start.
    methods = {hook: _METHODS[hook] for hook in {*hooks, "before_agent"}}
    name = "LangChainMiddleware"
    return type(name, (LangChainMiddleware,), {**methods, "__module__": __name__})
