"""Human in the loop: stop before configured tool calls; resume with decisions."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from ..context import RunContext
from ..errors import ConfigurationError
from ..hooks import AgentMiddleware, HookResult, ToolCallRequest, ToolHandler
from ..interrupts import DECISIONS, ActionRequest, Interrupt, not_run
from ..messages import AssistantMessage, ToolCall, ToolMessage
from ..state import State
from ..tools import Command

__all__ = ["HumanInTheLoopMiddleware", "require_checkpointer"]

_NO_CHECKPOINTER = (
    "this agent may stop for a human's decision ({why}), and an interrupted run is "
    "continued from its saved thread, so it runs only with a checkpointer: pass "
    "checkpointer=MemoryCheckpointer() (or SqliteCheckpointer, PostgresCheckpointer) to "
    "create_deep_agent, or serve it with `deepactors serve` (the server's checkpointer; "
    "--db to keep threads across restarts)"
)


def require_checkpointer(run: RunContext, why: str) -> None:
    """Refuse a run that could stop for a decision with nowhere to continue from.

    An agent with ``interrupt_on`` (or an ``interrupt`` permission) builds
    without a checkpointer, so that a server can give it its own; a run of it
    without one is refused here, before its first model call (a subagent's,
    when it starts).

    Raises:
        ConfigurationError: The run's tree saves nothing; names ``why`` and the fixes.
    """
    if run.journal is None and not run.tree.stateless:
        # A stateless run keeps nothing anyway: only an actual stop is refused
        # (InterruptNeedsThread), when it happens.
        raise ConfigurationError(_NO_CHECKPOINTER.format(why=why))


class HumanInTheLoopMiddleware(AgentMiddleware):
    """Stops a run before the tool calls named in ``interrupt_on``.

    See :mod:`deepactors.interrupts` for the requests and the decisions.

    Args:
        interrupt_on: Tool name -> ``True`` (every decision allowed), ``False``
            (no interrupt), or ``{"allowed_decisions": [...], "description": "..."}``.
    """

    def __init__(self, interrupt_on: Mapping[str, bool | Mapping[str, object]]) -> None:
        self.config: dict[str, tuple[tuple[str, ...], str | None]] = {}
        for name, setting in interrupt_on.items():
            if setting is False:
                continue
            if setting is True:
                self.config[name] = (DECISIONS, None)
                continue
            if not isinstance(setting, Mapping):
                raise ConfigurationError(f"interrupt_on[{name!r}] must be True, False or a dict")
            unknown = set(setting) - {"allowed_decisions", "description"}
            if unknown:
                raise ConfigurationError(
                    f"interrupt_on[{name!r}]: unknown key(s) {sorted(unknown)}; "
                    "known: allowed_decisions, description"
                )
            description = setting.get("description")
            if description is not None and not isinstance(description, str):
                raise ConfigurationError(f"interrupt_on[{name!r}]: description must be text")
            given = setting.get("allowed_decisions", DECISIONS)
            allowed = tuple(given) if isinstance(given, Iterable) else ()
            bad = set(allowed) - set(DECISIONS)
            if bad or not allowed:
                raise ConfigurationError(
                    f"interrupt_on[{name!r}]: allowed_decisions must be among {DECISIONS}"
                )
            self.config[name] = (allowed, description)

    async def before_agent(self, state: State, run: RunContext) -> HookResult:
        require_checkpointer(run, "interrupt_on")
        return None

    def asks_before(self, calls: Sequence[ToolCall], run: RunContext) -> list[ActionRequest]:
        """The guarded calls among ``calls`` that no decision answers yet."""
        decisions = run.tree.decisions
        return [
            self._request(call, run.path)
            for call in calls
            if call.name in self.config and call.id not in decisions
        ]

    def _request(self, call: ToolCall, path: str) -> ActionRequest:
        allowed, description = self.config[call.name]
        return ActionRequest(
            id=call.id,
            tool=call.name,
            args=call.args,
            path=path,
            allowed_decisions=allowed,
            description=description,
        )

    @property
    def tool_names(self) -> frozenset[str]:
        """The tools this middleware stops before."""
        return frozenset(self.config)

    async def wrap_tool_call(
        self, request: ToolCallRequest, handler: ToolHandler
    ) -> ToolMessage | Command:
        call = request.call
        config = self.config.get(call.name)
        if config is None:
            return await handler(request)
        decision = request.run.tree.decisions.get(call.id)
        if decision is None:
            raise Interrupt([self._request(call, request.run.path)])
        refused = not_run(call, decision)
        if refused is not None:
            return refused
        if decision.type == "edit":
            assert decision.args is not None
            edited = call.model_copy(update={"args": dict(decision.args)})
            # Show the model the arguments that actually ran.
            _replace_call(request, edited)
            return await handler(request.replace(call=edited))
        return await handler(request)


def _replace_call(request: ToolCallRequest, edited: ToolCall) -> None:
    for message in reversed(request.state.messages):
        if isinstance(message, AssistantMessage) and any(
            c.id == edited.id for c in message.tool_calls
        ):
            calls = [edited if c.id == edited.id else c for c in message.tool_calls]
            request.state.apply({"messages": [message.model_copy(update={"tool_calls": calls})]})
            return
