"""Planning: the ``write_todos`` tool and its system prompt section."""

from __future__ import annotations

from ..context import RunContext, ToolRuntime
from ..hooks import AgentMiddleware, HookResult
from ..messages import AssistantMessage, ToolMessage
from ..state import State, Todo
from ..tools import Command, tool

__all__ = ["TodoListMiddleware"]

TODO_PROMPT = """\
## Planning with `write_todos`
For work of three or more steps, keep a plan with `write_todos`. Each call replaces
the whole list, so send every item each time. Mark an item `in_progress` before you
start on it and `completed` as soon as it is done; add items you discover, and drop
ones that turn out unnecessary. Skip the plan for a quick one-step request. Call
`write_todos` at most once per turn."""

_PARALLEL_ERROR = (
    "write_todos was called {n} times in one turn; none of them was applied. The list is "
    "replaced whole on every call, so send one call with the complete list."
)


@tool
async def write_todos(todos: list[Todo], runtime: ToolRuntime) -> Command:
    """Replace the plan (the todo list) with this list.

    Args:
        todos: The whole plan, in order; each item has `content` and a `status`
            of pending, in_progress or completed.
    """
    done = sum(t.status == "completed" for t in todos)
    summary = "; ".join(f"[{t.status}] {t.content}" for t in todos)
    return Command(
        update={"todos": list(todos)},
        result=f"Plan updated ({done}/{len(todos)} done): {summary}",
    )


class TodoListMiddleware(AgentMiddleware):
    """Gives the agent a plan it maintains with ``write_todos`` (in the default stack).

    Two ``write_todos`` calls in one model turn are both refused with an error the
    model reads: with a replace-whole-list tool, the survivor would be arbitrary.
    """

    tools = (write_todos,)

    def __init__(self, *, system_prompt: str | None = TODO_PROMPT) -> None:
        self.system_prompt = system_prompt

    async def after_model(self, state: State, run: RunContext) -> HookResult:
        last = state.messages[-1] if state.messages else None
        if not isinstance(last, AssistantMessage) or len(last.tool_calls) < 2:
            return None
        calls = [c for c in last.tool_calls if c.name == "write_todos"]
        if len(calls) < 2:
            return None
        error = _PARALLEL_ERROR.format(n=len(calls))
        return {
            "messages": [
                ToolMessage(tool_call_id=c.id, name=c.name, content=error, status="error")
                for c in calls
            ]
        }
