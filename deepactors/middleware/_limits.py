"""Call limits: how many model or tool calls one run, or one thread, may make.

Counts per run live with the run; counts per thread live in private state
channels (``thread_model_calls``, ``thread_tool_calls``), so they travel with
the thread's checkpoints. A subagent starts with fresh state, so its "thread"
is its own run. For limits on a whole tree of agents, see
:class:`~deepactors.budget.Budget`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from ..context import RunContext, RunKey
from ..errors import CallLimitExceeded, ConfigurationError
from ..hooks import AgentMiddleware, HookResult
from ..messages import AssistantMessage, Message, ToolMessage
from ..state import Channel, State

__all__ = ["ModelCallLimitMiddleware", "ToolCallLimitMiddleware"]

ExitBehavior = Literal["end", "error"]


class _Count:
    __slots__ = ("n",)

    def __init__(self) -> None:
        self.n = 0


def _check(run_limit: int | None, thread_limit: int | None, exit_behavior: str) -> None:
    for name, limit in (("run_limit", run_limit), ("thread_limit", thread_limit)):
        if limit is not None and (isinstance(limit, bool) or limit < 0):
            raise ConfigurationError(f"{name} must be 0 or more, not {limit!r}")
    if run_limit is None and thread_limit is None:
        raise ConfigurationError("give run_limit=, thread_limit= or both")
    if exit_behavior not in ("end", "error"):
        raise ConfigurationError(f"exit_behavior must be 'end' or 'error', not {exit_behavior!r}")


def _merge_counts(current: dict[str, int], update: Mapping[str, int]) -> dict[str, int]:
    current.update(update)
    return current


class ModelCallLimitMiddleware(AgentMiddleware):
    """Stops a run before a model call past ``run_limit`` (this run) or ``thread_limit``.

    Args:
        run_limit: Model calls one run may make.
        thread_limit: Model calls the thread may make over all its runs.
        exit_behavior: ``"end"``: the run ends with a final assistant message
            saying which limit was reached; ``"error"``: raise
            :class:`~deepactors.errors.CallLimitExceeded`.
    """

    def __init__(
        self,
        *,
        run_limit: int | None = None,
        thread_limit: int | None = None,
        exit_behavior: ExitBehavior = "end",
    ) -> None:
        _check(run_limit, thread_limit, exit_behavior)
        self.run_limit = run_limit
        self.thread_limit = thread_limit
        self.exit_behavior = exit_behavior
        self._count = RunKey(f"{self.name}.count", _Count)
        self.channels = {"thread_model_calls": Channel(default=int, private=True)}

    async def before_model(self, state: State, run: RunContext) -> HookResult:
        in_run = run.local(self._count).n
        in_thread: int = state["thread_model_calls"]
        if self.run_limit is not None and in_run >= self.run_limit:
            why = f"this run has made its {self.run_limit} model call(s) allowed (run_limit)"
        elif self.thread_limit is not None and in_thread >= self.thread_limit:
            why = (
                f"this thread has made its {self.thread_limit} model call(s) allowed (thread_limit)"
            )
        else:
            return None
        if self.exit_behavior == "error":
            raise CallLimitExceeded(f"{run.path}: {why}")
        return {
            "messages": [AssistantMessage(content=f"Stopped: {why}.", stop_reason="call_limit")],
            "jump_to": "end",
        }

    async def after_model(self, state: State, run: RunContext) -> HookResult:
        run.local(self._count).n += 1
        return {"thread_model_calls": state["thread_model_calls"] + 1}


class ToolCallLimitMiddleware(AgentMiddleware):
    """Stops a run whose model asks for more tool calls than allowed.

    Counted when the model asks (a turn's calls all at once), before any of them
    runs: a turn that would go past a limit runs none of its calls. With
    ``"end"`` each gets a result saying it did not run and the run ends with a
    final assistant message; with ``"error"``
    :class:`~deepactors.errors.CallLimitExceeded` is raised.

    Args:
        tool_name: Count only calls of this tool (None: every tool).
        run_limit: Calls one run may make.
        thread_limit: Calls the thread may make over all its runs.
        exit_behavior: ``"end"`` or ``"error"``, as above.
    """

    def __init__(
        self,
        tool_name: str | None = None,
        *,
        run_limit: int | None = None,
        thread_limit: int | None = None,
        exit_behavior: ExitBehavior = "end",
    ) -> None:
        _check(run_limit, thread_limit, exit_behavior)
        self.tool_name = tool_name
        self.run_limit = run_limit
        self.thread_limit = thread_limit
        self.exit_behavior = exit_behavior
        self._key = tool_name or "*"
        self._count = RunKey(f"{self.name}.count", _Count)
        self.channels = {
            "thread_tool_calls": Channel(reducer=_merge_counts, default=dict, private=True)
        }

    @property
    def name(self) -> str:
        """One per tool: ``ToolCallLimitMiddleware[search]`` (``[*]`` for every tool)."""
        return f"{type(self).__name__}[{self._key}]"

    async def after_model(self, state: State, run: RunContext) -> HookResult:
        message = state.messages[-1]
        if not isinstance(message, AssistantMessage) or not message.tool_calls:
            return None
        wanted = sum(1 for c in message.tool_calls if self.tool_name in (None, c.name))
        if not wanted:
            return None
        count = run.local(self._count)
        in_thread: int = state["thread_tool_calls"].get(self._key, 0)
        what = f"{self.tool_name} call(s)" if self.tool_name else "tool call(s)"
        if self.run_limit is not None and count.n + wanted > self.run_limit:
            why = f"this run may make {self.run_limit} {what} (run_limit)"
        elif self.thread_limit is not None and in_thread + wanted > self.thread_limit:
            why = f"this thread may make {self.thread_limit} {what} (thread_limit)"
        else:
            count.n += wanted
            return {"thread_tool_calls": {self._key: in_thread + wanted}}
        if self.exit_behavior == "error":
            raise CallLimitExceeded(f"{run.path}: {why}")
        # Every call of the turn gets a result, so the history stays valid.
        results: list[Message] = [
            ToolMessage(
                tool_call_id=c.id,
                name=c.name,
                content=f"Not run: {why}.",
                status="error",
            )
            for c in message.tool_calls
        ]
        final = AssistantMessage(content=f"Stopped: {why}.", stop_reason="call_limit")
        return {"messages": [*results, final], "jump_to": "end"}
