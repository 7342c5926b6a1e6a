"""The agent loop of one run, and the compiled form of an agent it runs on.

One run: ``before_agent`` hooks, then turns of (``before_model`` hooks -> the
model call through the ``wrap_model_call`` chain -> ``after_model`` hooks -> every
tool call of that answer, concurrently, each through the ``wrap_tool_call`` chain)
until the model answers without tool calls, then ``after_agent`` hooks.

This is the hot path of the whole library: everything that can be decided once
per agent (hook lists, wrapper chains, the system prompt, tool schemas) is
decided in :class:`CompiledAgent`, and nothing is built per turn for listeners
or logs that are not there.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

import anyio
import structlog

from ..context import RunContext, ToolRuntime
from ..errors import ConfigurationError, InputError, StepLimitExceeded, ToolError
from ..events import (
    ModelCallFinished,
    ModelCallStarted,
    ModelDelta,
    ToolCallFinished,
    ToolCallStarted,
)
from ..filediff import FileDiff
from ..interrupts import ActionRequest, Interrupt
from ..messages import AssistantMessage, Message, ToolCall, ToolMessage, Usage
from ..middleware._base import (
    AgentMiddleware,
    HookResult,
    ModelHandler,
    ToolCallRequest,
    ToolHandler,
    overrides,
)
from ..models import ChatModel, ModelRequest
from ..state import Channel, State
from ..tools import Command, Tool, tool_result_message

__all__ = ["CompiledAgent", "run_loop"]

_log = structlog.get_logger("deepactors")

Hook = Callable[[State, RunContext], Awaitable[HookResult]]
_JUMPS = ("model", "tools", "end")


@dataclass(slots=True, kw_only=True, eq=False)
class CompiledAgent:
    """An agent's parts, resolved once: what every run of it shares.

    Attributes:
        name: The agent's name; the root actor path of its runs.
        model: The model it calls.
        tools: Tools by name (the user's and the middleware's).
        system_prompt: The full system prompt (user text + middleware sections).
        middleware: The stack, outermost first.
        channels: Every state channel (built-in + middleware-declared).
        max_steps: Model calls allowed per run.
        debug: Log every hook and model call.
        extras: Other configuration the middleware read (backend, store, ...).
    """

    name: str
    model: ChatModel
    tools: dict[str, Tool]
    system_prompt: str | None
    middleware: Sequence[AgentMiddleware]
    channels: Mapping[str, Channel]
    max_steps: int = 1000
    debug: bool = False
    extras: dict[str, Any] = field(default_factory=dict)
    # Resolved in __post_init__:
    tool_list: tuple[Tool, ...] = ()
    before_agent: tuple[Hook, ...] = ()
    before_model: tuple[Hook, ...] = ()
    after_model: tuple[Hook, ...] = ()
    after_agent: tuple[Hook, ...] = ()
    call_model: ModelHandler = field(init=False)
    call_tool: ToolHandler = field(init=False)

    def __post_init__(self) -> None:
        if self.max_steps < 1:
            raise ConfigurationError("max_steps must be at least 1")
        self.tool_list = tuple(self.tools.values())
        stack = list(self.middleware)
        # before_* in list order, after_* in reverse: the stack nests like wrappers.
        self.before_agent = tuple(mw.before_agent for mw in stack if overrides(mw, "before_agent"))
        self.before_model = tuple(mw.before_model for mw in stack if overrides(mw, "before_model"))
        rev = list(reversed(stack))
        self.after_model = tuple(mw.after_model for mw in rev if overrides(mw, "after_model"))
        self.after_agent = tuple(mw.after_agent for mw in rev if overrides(mw, "after_agent"))
        model_handler: ModelHandler = self._model_call
        tool_handler: ToolHandler = _execute_tool
        for mw in rev:  # first in the list = outermost
            if overrides(mw, "wrap_model_call"):
                model_handler = functools.partial(mw.wrap_model_call, handler=model_handler)
            if overrides(mw, "wrap_tool_call"):
                tool_handler = functools.partial(mw.wrap_tool_call, handler=tool_handler)
        self.call_model = model_handler
        self.call_tool = tool_handler

    async def _model_call(self, request: ModelRequest) -> AssistantMessage:
        run = request.run
        emit = run.emit if run is not None else None
        if emit is None:
            return await self.model.generate(request)
        assert run is not None
        # Someone listens: stream, so token deltas reach them as they arrive.
        final: AssistantMessage | None = None
        async with aclosing(self.model.stream(request)) as parts:  # type: ignore[type-var]
            async for part in parts:
                if isinstance(part, AssistantMessage):
                    final = part
                else:
                    emit(
                        ModelDelta(
                            path=run.path,
                            run_id=run.run_id,
                            kind=part.kind,
                            text=part.text,
                            index=part.index,
                        )
                    )
        if final is None:
            raise RuntimeError(
                f"model {self.model.model_name!r} ended its stream without a message"
            )
        return final


async def _execute_tool(request: ToolCallRequest) -> ToolMessage | Command:
    """The innermost tool handler: validate, run, and turn the outcome into a result."""
    call, tool = request.call, request.tool
    if call.error is not None:
        return error_result(call, f"the tool call could not be read: {call.error}")
    if tool is None:
        known = ", ".join(sorted(t for t in request.run.services.get("tool_names", ())))
        return error_result(call, f"there is no tool named {call.name!r}; available: {known}")
    runtime = None
    if tool.runtime_param is not None:
        runtime = ToolRuntime(state=request.state, tool_call_id=call.id, run=request.run)
    try:
        value = await tool.call(call.args, runtime)
    except Interrupt:
        raise
    except ToolError as exc:
        return error_result(call, str(exc))
    except Exception as exc:
        return error_result(call, f"{type(exc).__name__}: {exc}")
    if isinstance(value, Command):
        return value
    return tool_result_message(call, value)


def error_result(call: ToolCall, text: str) -> ToolMessage:
    """An error result for ``call`` that the model reads."""
    return ToolMessage(tool_call_id=call.id, name=call.name, content=text, status="error")


def _command_message(call: ToolCall, command: Command) -> tuple[ToolMessage, dict[str, Any]]:
    """Split a tool's Command into the result message and the rest of its update."""
    update = dict(command.update or {})
    found: ToolMessage | None = None
    rest: list[Any] = []
    for m in update.pop("messages", ()):
        if found is None and isinstance(m, ToolMessage) and m.tool_call_id == call.id:
            found = m
        else:
            rest.append(m)
    if rest:
        update["messages"] = rest
    if found is None:
        found = ToolMessage(tool_call_id=call.id, name=call.name, content=command.result)
    return found, update


async def _apply_hooks(
    hooks: Sequence[Hook], state: State, run: RunContext, debug: bool
) -> str | None:
    """Run hooks in order; return the first jump any of them asked for."""
    jump: str | None = None
    for hook in hooks:
        if debug:
            _log.debug("hook", hook=getattr(hook, "__qualname__", repr(hook)), path=run.path)
        result = await hook(state, run)
        if result:
            update = dict(result)
            target = update.pop("jump_to", None)
            if update:
                state.apply(update)
            if target is not None:
                if target not in _JUMPS:
                    raise ConfigurationError(f"jump_to must be one of {_JUMPS}, not {target!r}")
                jump = jump or target
    return jump


def _unanswered(messages: Sequence[Message]) -> tuple[AssistantMessage | None, list[ToolCall]]:
    """The newest assistant message and those of its tool calls that have no result yet."""
    answered: set[str] = set()
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if isinstance(m, ToolMessage):
            answered.add(m.tool_call_id)
        elif isinstance(m, AssistantMessage):
            return m, [c for c in m.tool_calls if c.id not in answered]
        else:
            break
    return None, []


async def run_loop(agent: CompiledAgent, state: State, run: RunContext) -> Usage | None:
    """Run the agent loop on ``state`` until the model is done.

    Returns:
        The tokens spent by this run and its subagents, if the model reports usage.

    Raises:
        StepLimitExceeded: More than ``agent.max_steps`` model calls.
    """
    debug = agent.debug
    run.services["tool_names"] = agent.tools.keys()
    jump = await _apply_hooks(agent.before_agent, state, run, debug)
    if jump is None and _unanswered(state.messages)[1]:
        # The history ends with tool calls that have no results (an interrupted
        # run): run them before asking the model anything.
        jump = "tools"
    step = 0
    while jump != "end":
        await _check_deadline()
        if jump != "tools":
            jump = await _apply_hooks(agent.before_model, state, run, debug)
            if jump == "end":
                break
            if jump != "tools":
                if step >= agent.max_steps:
                    raise StepLimitExceeded(
                        f"agent {run.path!r} made {step} model calls without finishing "
                        f"(max_steps={agent.max_steps})"
                    )
                step += 1
                run.step = step
                if run.journal is not None:
                    # Durable before the model is asked anything new.
                    await run.journal.sync()
                emit = run.emit
                if emit is not None:
                    emit(ModelCallStarted(path=run.path, run_id=run.run_id, step=step))
                if debug:
                    _log.debug("model call", path=run.path, step=step)
                request = ModelRequest(
                    messages=list(state.messages),
                    system_prompt=agent.system_prompt,
                    tools=agent.tool_list,
                    state=state,
                    run=run,
                )
                message = await agent.call_model(request)
                run.add_usage(message.usage)
                state.add_message(message)
                if emit is not None:
                    emit(
                        ModelCallFinished(
                            path=run.path, run_id=run.run_id, step=step, message=message
                        )
                    )
                jump = await _apply_hooks(agent.after_model, state, run, debug)
                if jump == "end":
                    break
                if jump == "model":
                    continue
        jump = None
        _, pending = _unanswered(state.messages)
        if not pending:
            break
        await run_tools(agent, state, run, pending)
    await _apply_hooks(agent.after_agent, state, run, debug)
    await _check_deadline()
    return run.usage


async def _check_deadline() -> None:
    """Raise the cancellation of a deadline that has passed, even one no await saw.

    A deadline is delivered only when the task yields to the event loop; a turn
    with a zero-latency model and quick tools may never yield, and without this
    check a run could finish after its deadline (``timeout=0`` would return).
    """
    await anyio.lowlevel.checkpoint_if_cancelled()
    if anyio.current_time() >= anyio.current_effective_deadline():
        # Passed but not delivered yet (asyncio delivers it from a timer callback
        # that runs after this task's next step): yield until it is.
        for _ in range(100):
            await anyio.lowlevel.checkpoint()


async def run_tools(
    agent: CompiledAgent, state: State, run: RunContext, calls: Sequence[ToolCall]
) -> None:
    """Run one turn's tool calls concurrently; append their results in call order.

    Results are appended in the order the model made the calls, not the order
    they finished, so a history does not depend on timing (and a resumed run
    reproduces it).
    """
    results: list[tuple[ToolMessage, dict[str, Any] | None] | None] = [None] * len(calls)
    interrupts: list[ActionRequest] = []
    resumed: dict[str, tuple[ToolMessage, dict[str, Any] | None]] | None = run.services.get(
        "resumed_results"
    )

    async def one(i: int, call: ToolCall) -> None:
        emit = run.emit
        if emit is not None:
            emit(ToolCallStarted(path=run.path, run_id=run.run_id, call=call))
        done = resumed.pop(call.id, None) if resumed else None
        if done is None:
            request = ToolCallRequest(
                call=call, tool=agent.tools.get(call.name), state=state, run=run
            )
            try:
                out = await agent.call_tool(request)
            except Interrupt as exc:
                # Waits for a human: no result; the siblings still run.
                interrupts.extend(exc.requests)
                return
            except Exception as exc:  # a wrap_tool_call middleware raised
                out = error_result(call, f"{type(exc).__name__}: {exc}")
            done = _command_message(call, out) if isinstance(out, Command) else (out, None)
            if done[1]:
                try:
                    done = (done[0], state.check_update(done[1]))
                except (ValueError, InputError) as exc:
                    # A tool asked for an update the state cannot take: the model
                    # learns, the state stays as it was.
                    done = (error_result(call, f"the tool's state update was refused: {exc}"), None)
            if run.journal is not None:
                run.journal.record_tool_result(run.path, run.step, *done)
        # else: finished before a crash or an interrupt; its result was checkpointed.
        results[i] = done
        message = done[0]
        if emit is not None:
            emit(ToolCallFinished(path=run.path, run_id=run.run_id, call=call, result=message))

    if len(calls) == 1:
        await one(0, calls[0])
    else:
        async with anyio.create_task_group() as tg:
            for i, call in enumerate(calls):
                tg.start_soon(one, i, call)
    for item in results:
        if item is None:
            continue  # interrupted: answered when the run resumes
        message, update = item
        if update:
            state.apply(update)
            files = update.get("files")
            if isinstance(files, FileDiff) and files.outcomes:
                # The merge outcome (conflicts above all) is for the model to read.
                note = files.report()
                message = message.model_copy(update={"content": f"{message.text}\n\n{note}"})
        state.add_message(message)
    if interrupts:
        raise Interrupt(interrupts)
