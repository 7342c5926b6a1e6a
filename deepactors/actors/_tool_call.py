"""The innermost tool handler: what runs at the bottom of the ``wrap_tool_call`` chain."""

from __future__ import annotations

from ..context import ToolRuntime
from ..errors import ToolError
from ..hooks import ToolCallRequest
from ..interrupts import Interrupt, not_run
from ..messages import ToolCall, ToolMessage
from ..tools import Command, tool_result_message
from ._budget import tool_refused

__all__ = ["StopRequested", "error_result", "execute_tool", "stop_in"]


class StopRequested(Exception):
    """Carries a KeyboardInterrupt or SystemExit raised in a tool call's task.

    On asyncio, either of them raised in any task but the main one escapes the
    event loop at once, whoever awaits that task. So the tool call's task catches
    it where it is raised and it travels as an ordinary exception; the run's
    actor unwraps it (:func:`stop_in`) and hands the original to the caller,
    bare, on both loops.
    """

    def __init__(self, stop: KeyboardInterrupt | SystemExit) -> None:
        super().__init__(f"{type(stop).__name__} in a tool call")
        self.stop = stop


def stop_in(exc: BaseException) -> KeyboardInterrupt | SystemExit | None:
    """The KeyboardInterrupt or SystemExit carried by ``exc`` (at any group depth)."""
    if isinstance(exc, KeyboardInterrupt | SystemExit):
        return exc
    if isinstance(exc, StopRequested):
        return exc.stop
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = stop_in(inner)
            if found is not None:
                return found
    return None


async def execute_tool(request: ToolCallRequest) -> ToolMessage | Command:
    """The innermost tool handler: validate, run, and turn the outcome into a result."""
    decided = _as_decided(request)
    if isinstance(decided, ToolMessage):
        return decided
    request = decided
    call, tool = request.call, request.tool
    if call.error is not None:
        return error_result(call, f"the tool call could not be read: {call.error}")
    if tool is None:
        known = ", ".join(sorted(request.run.tool_names))
        return error_result(call, f"there is no tool named {call.name!r}; available: {known}")
    ledger = request.run.budget
    if ledger is not None:
        # Counted here, innermost: a call a human rejected or a middleware answered
        # itself never ran, so it costs nothing.
        refusal = ledger.take_tool_call()
        if refusal is not None:
            return error_result(call, tool_refused(request.run, refusal, call.name))
    runtime = None
    if tool.runtime_param is not None:
        runtime = ToolRuntime(state=request.state, tool_call_id=call.id, run=request.run)
    try:
        value = await tool.call(call.args, runtime)
    except (Interrupt, StopRequested):
        raise
    except ToolError as exc:
        return error_result(call, str(exc))
    except Exception as exc:
        return error_result(call, f"{type(exc).__name__}: {exc}")
    if isinstance(value, Command):
        return value
    return tool_result_message(call, value)


def _as_decided(request: ToolCallRequest) -> ToolCallRequest | ToolMessage:
    """The call as a human decided it, whatever middleware the running agent has.

    The approval middleware applies decisions before this point; this is the
    runtime's own last check, for a thread continued by an agent that does not
    ask about the call (another assistant on the server, another agent on the
    same thread): a call a human refused never runs, an edited one runs with the
    human's arguments, and one still waiting for a decision stops the run again.

    Raises:
        Interrupt: The thread waits for a decision on this call.
    """
    call = request.call
    tree = request.run.tree
    decision = tree.decisions.get(call.id)
    if decision is None:
        waiting = tree.awaiting.get(call.id)
        if waiting is not None:
            raise Interrupt([waiting])
        return request
    refused = not_run(call, decision)
    if refused is not None:
        return refused
    if decision.type == "edit" and decision.args is not None and call.args != decision.args:
        return request.replace(call=call.model_copy(update={"args": dict(decision.args)}))
    return request


def error_result(call: ToolCall, text: str) -> ToolMessage:
    """An error result for ``call`` that the model reads."""
    return ToolMessage(tool_call_id=call.id, name=call.name, content=text, status="error")
