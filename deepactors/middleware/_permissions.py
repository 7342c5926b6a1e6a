"""File permissions in ``interrupt`` mode: ask a human before a file tool touches such a path.

``deny`` is kept by the agent's backend (:class:`~deepactors.backends.PermissionedBackend`);
this middleware handles ``interrupt`` rules through the human-in-the-loop
machinery: the run stops with an :class:`~deepactors.interrupts.ActionRequest`
(decisions ``approve`` or ``reject``) and continues with ``Command(resume=...)``.

Which calls ask (as deepagents does):

* ``read_file``, ``write_file``, ``edit_file``: the path's first matching rule
  says ``interrupt``;
* ``ls``, ``glob``, ``grep`` (searches): the folder searched holds, or lies
  inside, a path an ``interrupt`` rule is about, since its results could show it;
* ``delete``: the path says ``interrupt``, or the folder holds such a path.

Rules are judged on the path as given and on where it leads: a write to
``/public/link/x`` where ``link`` is a symlink to ``../docs`` asks as a write to
``/docs/x`` would. The real paths a human approved are handed to the backend
for the call (:data:`~deepactors.backends.APPROVED`), which refuses a
link into an ``interrupt`` area that was not approved, such as one swapped in
after the question.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from ..backends import APPROVED, PermissionRules, normalize_path, resolve_links
from ..context import RunContext
from ..errors import BackendError
from ..hooks import AgentMiddleware, HookResult, ToolCallRequest, ToolHandler
from ..interrupts import ActionRequest, Interrupt, ended_call
from ..messages import ToolCall, ToolMessage
from ..state import State
from ..tools import Command
from ._hitl import require_checkpointer

__all__ = ["FilesystemPermissionMiddleware"]

Operation = Literal["read", "write"]
Scope = Literal["exact", "search", "delete"]

# The file tools: the operation, the argument naming the path (and its default), the scope.
FILE_TOOLS: dict[str, tuple[Operation, str, str | None, Scope]] = {
    "ls": ("read", "path", "/", "search"),
    "read_file": ("read", "file_path", None, "exact"),
    "glob": ("read", "path", "/", "search"),
    "grep": ("read", "path", "/", "search"),
    "write_file": ("write", "file_path", None, "exact"),
    "edit_file": ("write", "file_path", None, "exact"),
    "delete": ("write", "file_path", None, "delete"),
}

DECISIONS = ("approve", "reject")


class FilesystemPermissionMiddleware(AgentMiddleware):
    """Stops a run before a file tool call that an ``interrupt`` permission covers.

    ``create_deep_agent(permissions=...)`` adds it when a rule says
    ``interrupt`` (it needs a checkpointer, as ``interrupt_on`` does).

    Args:
        rules: The agent's rules.
    """

    def __init__(self, rules: PermissionRules) -> None:
        self.rules = rules

    async def before_agent(self, state: State, run: RunContext) -> HookResult:
        require_checkpointer(run, "a permission with mode='interrupt'")
        return None

    def asks(self, tool: str, args: dict[str, object]) -> str | None:
        """The path a call of ``tool`` needs a human for, or None."""
        entry = FILE_TOOLS.get(tool)
        if entry is None or not self.rules.has_interrupt:
            return None
        operation, arg, default, scope = entry
        raw = args.get(arg, default)
        if not isinstance(raw, str):
            return None
        try:
            path = normalize_path(raw)
        except BackendError:
            return None  # the tool itself says what is wrong with the path
        mode = self.rules.mode(operation, path)
        if mode == "interrupt":
            return path
        if mode == "deny" or scope == "exact":
            return None  # denied calls are refused by the backend, without asking
        reaches = self.rules.reaches(operation, path, "interrupt", inside=scope == "delete")
        return path if reaches else None

    def asks_before(self, calls: Sequence[ToolCall], run: RunContext) -> list[ActionRequest]:
        """The calls that ask before a tool step's breakpoint stops (the approval first).

        Judged on the paths as written: a call whose path asks only through a
        symbolic link asks when it runs (finding where a link leads reads the backend).
        """
        decisions = run.tree.decisions
        out: list[ActionRequest] = []
        for call in calls:
            if call.id not in decisions and (path := self.asks(call.name, call.args)) is not None:
                out.append(_request(call, path, run.path))
        return out

    async def _real(self, request: ToolCallRequest) -> str | None:
        """Where an exact (or delete) call's path leads, when that asks and the path does not."""
        entry = FILE_TOOLS.get(request.call.name)
        raw = request.call.args.get(entry[1]) if entry else None
        if entry is None or entry[3] == "search" or not isinstance(raw, str):
            return None
        try:
            path = normalize_path(raw)
            head, name = (path, "") if entry[3] == "exact" else path.rsplit("/", 1)
            found = (await resolve_links(request.run.backend, [head or "/"]))[0].real
        except BackendError:
            return None  # the tool itself says what is wrong with the path
        real = found if not name else (found.rstrip("/") + "/" + name)
        return real if real != path and self.rules.mode(entry[0], real) == "interrupt" else None

    async def wrap_tool_call(
        self, request: ToolCallRequest, handler: ToolHandler
    ) -> ToolMessage | Command:
        call = request.call
        path = self.asks(call.name, call.args)
        if self.rules.has_interrupt:
            path = await self._real(request) or path  # where a link leads decides too
        if path is None:
            return await handler(request)
        decision = request.run.tree.decisions.get(call.id)
        if decision is None:
            raise Interrupt([_request(call, path, request.run.path)])
        if decision.type == "end":
            return ended_call(call, decision.message)
        if decision.type == "approve":
            token = APPROVED.set(APPROVED.get() | {path})
            try:
                return await handler(request)
            finally:
                APPROVED.reset(token)
        reason = decision.message or "no reason given"
        return ToolMessage(
            tool_call_id=call.id,
            name=call.name,
            content=f"A human refused this access to {path} ({reason}). It did not run.",
            status="error",
        )


def _request(call: ToolCall, path: str, actor: str) -> ActionRequest:
    return ActionRequest(
        id=call.id,
        tool=call.name,
        args=call.args,
        path=actor,
        allowed_decisions=DECISIONS,
        description=f"{call.name} on {path}: a file permission asks a human first",
    )
