"""One turn's tool calls: run concurrently, each through the ``wrap_tool_call`` chain.

Results are appended in the order the model made the calls, not the order they
finished, so a history does not depend on timing (and a resumed run reproduces
it). A call that finished before its run stopped (a crash, an interrupt) is not
run again: its checkpointed result is used.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Coroutine, Sequence

import anyio
import anyio.to_thread

from .._core.loops import open_task_group
from .._core.pacing import Pacer
from ..context import RunContext, ToolResult
from ..errors import InputError
from ..events import ToolCallFinished, ToolCallStarted
from ..history import MessageList
from ..hooks import ToolCallRequest
from ..interrupts import ActionRequest, Interrupt
from ..messages import ToolCall, ToolMessage
from ..state import State
from ..tools import Command
from ..tracing import kept_context
from ._spec import AgentSpec
from ._tool_call import StopRequested, error_result

__all__ = ["run_tools"]


_AT_ONCE = 64
"""Results of one step taken into the state in one go; a wider step's, in paced slices."""


def _take_in(state: State, results: list[ToolResult | None], start: int, stop: int) -> None:
    """Fold ``results[start:stop]`` into the state in call order, releasing each as it lands."""
    for i in range(start, stop):
        item = results[i]
        if item is None:
            continue  # interrupted: answered when the run resumes
        results[i] = None  # merged: the step holds on to it no longer
        message, update = item
        if update:
            applied = state.apply(update)
            note = applied.note()
            if note:
                # The merge outcome (conflicts above all) is for the model to read.
                message = message.model_copy(update={"content": f"{message.text}\n\n{note}"})
        state.add_message(message)


async def _take_in_paced(state: State, results: list[ToolResult | None], pacer: Pacer) -> None:
    """:func:`_take_in` of every result, a slice per turn of the loop while others wait.

    Each slice also brings the history's running sums up to date (see
    :meth:`~deepactors.history.MessageList.catch_up`), so the next model call
    measures the request without a pass over the step's results.
    """
    messages = state.messages
    start, total = 0, len(results)
    while start < total:
        stop = min(start + _SLICE, total)
        _take_in(state, results, start, stop)
        start = stop
        if pacer.due():
            messages.catch_up()
            await pacer.wait()
    messages.catch_up()


_SLICE = 32
"""Results folded between two looks at the pacer's clock."""


async def _run_all(
    spec: AgentSpec,
    calls: Sequence[ToolCall],
    one: Callable[[int, ToolCall], Coroutine[object, object, None]],
    pacer: Pacer | None,
    messages: MessageList,
) -> None:
    """Run ``one(i, call)`` for every call, concurrently, each tool within its cap."""
    # Calls of a tool with a cap (``task``: the run's subagents) past that
    # cap wait here as indexes, not as tasks: 100,000 queued subagents cost
    # a deque of ints until they start, and start in the model's order.
    queues: dict[str, deque[int]] = {}
    working: dict[str, int] = {}

    async def worker(name: str, i: int) -> None:
        queue = queues[name]
        while True:
            await one(i, calls[i])
            if not queue:
                # No await between this check and the count: the spawner
                # below sees the worker gone before it queues another call.
                working[name] -= 1
                return
            i = queue.popleft()

    async with open_task_group() as tg:
        if len(calls) > _AT_ONCE:
            # The turn that made these calls is measured (for the next model
            # call's size) off the loop, while they run: a turn of 100,000
            # calls is a long measure (see MessageList.catch_up). Nothing
            # else changes the history until the step ends.
            tg.start_soon(anyio.to_thread.run_sync, messages.catch_up)
        tools = spec.tools
        for i, call in enumerate(calls):
            found = tools.get(call.name)
            cap = None if found is None else found.max_concurrency
            if cap is None:
                tg.start_soon(one, i, call)
            elif working.get(call.name, 0) < cap:
                queues.setdefault(call.name, deque())
                working[call.name] = working.get(call.name, 0) + 1
                tg.start_soon(worker, call.name, i)
            else:
                queues[call.name].append(i)
            if pacer is not None and pacer.due():
                await pacer.wait()  # 10,000 spawns are a long step too


async def _call(spec: AgentSpec, state: State, run: RunContext, call: ToolCall) -> ToolResult:
    """Run one call through the ``wrap_tool_call`` chain; its result and checked update.

    Raises:
        Interrupt: The call waits for a human.
        StopRequested: The process is stopping (Ctrl-C, ``SystemExit``).
    """
    request = ToolCallRequest(call=call, tool=spec.tools.get(call.name), state=state, run=run)
    try:
        out = await spec.call_tool(request)
    except Interrupt:
        raise
    except (KeyboardInterrupt, SystemExit) as exc:
        raise StopRequested(exc) from exc
    except StopRequested:
        raise  # from a subagent's own tool call
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
    return done


def _command_message(call: ToolCall, command: Command) -> ToolResult:
    """Split a tool's Command into the result message and the rest of its update."""
    update = dict(command.update or {})
    found: ToolMessage | None = None
    rest: list[object] = []
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


async def run_tools(
    spec: AgentSpec, state: State, run: RunContext, calls: Sequence[ToolCall]
) -> None:
    """Run one turn's tool calls concurrently; append their results in call order.

    Raises:
        Interrupt: Some calls wait for a human; the others' results are appended.
    """
    results: list[ToolResult | None] = [None] * len(calls)
    # By call, so the requests come out in the order of the calls (a human
    # answers them in that order), not in the order the calls reached them.
    # A dict filled on demand: no list per call of a wide fan-out.
    interrupts: dict[int, list[ActionRequest]] = {}
    resumed = run.resumed
    lone = len(calls) == 1
    pacer = run.tree.pacer

    async def one(i: int, call: ToolCall) -> None:
        if pacer is not None and pacer.due():
            await pacer.wait()
        emit = run.emit
        if emit is not None:
            emit(ToolCallStarted(path=run.path, run_id=run.run_id, call=call))
        done = resumed.pop(call.id, None) if resumed else None
        if done is None:
            try:
                done = await _call(spec, state, run, call)
            except Interrupt as exc:
                # Waits for a human: no result; the siblings still run.
                interrupts[i] = exc.requests
                return
            journal = run.journal
            if journal is not None and not lone:
                # Recorded as it finishes, so a resumed step does not run it
                # again. A lone call's result is appended (and recorded) with no
                # await in between: the same batch, so no record of its own.
                journal.record_tool_result(run.path, run.step, *done, state)
        # else: finished before a crash or an interrupt; its result was checkpointed.
        results[i] = done
        if emit is not None:
            emit(ToolCallFinished(path=run.path, run_id=run.run_id, call=call, result=done[0]))

    if len(calls) == 1:
        restore = kept_context() if run.emit is not None else None
        try:
            await one(0, calls[0])
        finally:
            # A tracer makes the call's span current in the task running it,
            # here this actor's own (see deepactors.tracing.kept_context).
            if restore is not None:
                restore()
    else:
        await _run_all(spec, calls, one, pacer, state.messages)
    if len(results) <= _AT_ONCE or pacer is None:
        _take_in(state, results, 0, len(results))
    else:
        # A wide step's results, in slices of the loop's turns: 100,000 of
        # them are a second of work. Shielded: a step's results land whole
        # (a run cancelled meanwhile keeps them, as it would have before).
        with anyio.CancelScope(shield=True):
            await _take_in_paced(state, results, pacer)
    pending = [r for i in sorted(interrupts) for r in interrupts[i]]
    if pending:
        raise Interrupt(pending)
