"""Human in the loop: the requests a run stops for, and the decisions that resume it.

A run that reaches a tool call configured in ``interrupt_on`` stops before
running it (the other calls of that turn still run) and returns its pending
:class:`ActionRequest`s under ``result["__interrupt__"]``. Continue with::

    await agent.ainvoke(Command(resume=[{"type": "approve"}, ...]), thread_id=...)

one decision per request, in order (or a dict keyed by request id, or
deepagents' ``{"decisions": [...]}``):

* ``{"type": "approve"}``: run the call as the model made it;
* ``{"type": "edit", "args": {...}}``: run it with these arguments instead
  (deepagents' ``{"type": "edit", "edited_action": {"name": ..., "args": {...}}}``
  works too);
* ``{"type": "reject", "message": "..."}``: do not run it; the model reads the
  message as an error result;
* ``{"type": "respond", "message": "..."}``: do not run it; the message is the
  call's (successful) result.

Or end the thread's pending work instead (LangGraph's ``Command(goto=END)``,
Agent Chat UI's "Mark as resolved"): ``Command(resume=END_PENDING)`` answers
every pending call as not run (an error result naming why) and ends the run
there, with no model call, whatever decisions the requests allow.

Each entry of ``result["__interrupt__"]`` is one request as a dict (``id``,
``tool``, ``args``, ``path``, ``allowed_decisions``, ``description``) that also
reads as LangGraph's ``Interrupt``: ``.id``, and ``.value`` with deepagents'
``{"action_requests": [...], "review_configs": [...]}`` for every request of that
stop, so ``result["__interrupt__"][0].value`` is what a deepagents script reads.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, final

from .errors import InputError
from .messages import ToolCall, ToolMessage

__all__ = [
    "DECISIONS",
    "END_PENDING",
    "ActionRequest",
    "Decision",
    "Interrupt",
    "PendingRequest",
    "ended_call",
    "interrupt_view",
    "not_run",
    "parse_decisions",
]

DECISIONS = ("approve", "edit", "reject", "respond")

END_PENDING: Mapping[str, str] = {"type": "end"}
"""The resume that ends a thread's pending work: every pending call is answered as
not run, and the run ends with no model call (see the module docstring)."""


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class ActionRequest:
    """A tool call waiting for a human.

    Attributes:
        id: The tool call's id (also the request's id).
        tool: The tool's name.
        args: The arguments the model gave.
        path: The actor that made the call (``main/task-2:researcher`` inside a subagent).
        allowed_decisions: What the human may answer.
        description: Why a human is asked, if configured.
    """

    id: str
    tool: str
    args: Mapping[str, Any]
    path: str
    allowed_decisions: tuple[str, ...] = DECISIONS
    description: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON form (as returned under ``__interrupt__`` and checkpointed)."""
        return {
            "id": self.id,
            "tool": self.tool,
            "args": dict(self.args),
            "path": self.path,
            "allowed_decisions": list(self.allowed_decisions),
            "description": self.description,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ActionRequest:
        """Inverse of :meth:`to_dict`."""
        return cls(
            id=data["id"],
            tool=data["tool"],
            args=data["args"],
            path=data["path"],
            allowed_decisions=tuple(data["allowed_decisions"]),
            description=data.get("description"),
        )


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class Decision:
    """A human's answer to one :class:`ActionRequest`."""

    type: Literal["approve", "edit", "reject", "respond", "end"]
    args: Mapping[str, Any] | None = None
    message: str | None = None


def ended_call(call: ToolCall, message: str | None) -> ToolMessage:
    """The result of a pending call whose work was ended: it did not run."""
    why = message or "the thread's pending work was ended (goto __end__)"
    return ToolMessage(
        tool_call_id=call.id, name=call.name, content=f"Not run: {why}.", status="error"
    )


def not_run(call: ToolCall, decision: Decision) -> ToolMessage | None:
    """The result of ``call`` when ``decision`` says it must not run; None when it may.

    One answer for every part that applies a decision (the approval middleware,
    and the runtime's last check before a tool runs), so a refusal reads the same
    whoever carried it out.
    """
    if decision.type == "end":
        return ended_call(call, decision.message)
    if decision.type == "respond":
        return ToolMessage(
            tool_call_id=call.id, name=call.name, content=decision.message or "", status="success"
        )
    if decision.type == "reject":
        reason = decision.message or "no reason given"
        return ToolMessage(
            tool_call_id=call.id,
            name=call.name,
            content=f"A human rejected this call ({reason}). It did not run.",
            status="error",
        )
    return None


@final
class PendingRequest(dict[str, Any]):
    """One request of ``result["__interrupt__"]``: a dict that also reads as LangGraph's
    ``Interrupt`` (``.id``, ``.value``) for scripts ported from deepagents.

    Attributes:
        id: The stop's interrupt id (the same for every request of one stop).
        value: ``{"action_requests": [...], "review_configs": [...]}`` for every
            request of the stop, in order.
    """

    __slots__ = ("id", "value")

    def __init__(self, request: Mapping[str, Any], *, id: str, value: Mapping[str, Any]) -> None:
        super().__init__(request)
        self.id = id
        self.value = value


def interrupt_view(requests: Sequence[Mapping[str, Any]]) -> list[PendingRequest]:
    """The ``__interrupt__`` entries for one stop's requests (their ``to_dict`` form)."""
    if not requests:
        return []
    value = {
        "action_requests": [
            {"name": r["tool"], "args": dict(r["args"]), "description": r.get("description")}
            for r in requests
        ],
        "review_configs": [
            {"action_name": r["tool"], "allowed_decisions": list(r["allowed_decisions"])}
            for r in requests
        ],
    }
    stop_id = f"interrupt-{requests[0]['id']}"
    return [PendingRequest(r, id=stop_id, value=value) for r in requests]


class Interrupt(Exception):
    """Raised inside a run to stop it for human decisions (never reaches the caller)."""

    def __init__(self, requests: Sequence[ActionRequest]) -> None:
        super().__init__(f"{len(requests)} tool call(s) wait for a human decision")
        self.requests = list(requests)


def parse_decisions(resume: object, pending: Sequence[ActionRequest]) -> dict[str, Decision]:
    """Match the caller's decisions to the pending requests, checking each.

    Raises:
        InputError: Wrong count, unknown ids, a decision the request does not
            allow, or an ``edit`` without arguments.
    """
    if not pending:
        raise InputError("this thread is not waiting for any decision")
    stop_id = f"interrupt-{pending[0].id}"
    if isinstance(resume, Mapping) and set(resume) == {stop_id}:
        resume = resume[stop_id]  # LangGraph's {interrupt_id: value}
    if isinstance(resume, Mapping) and set(resume) == {"decisions"}:
        resume = resume["decisions"]  # deepagents' shape
    if isinstance(resume, Mapping) and resume.get("type") == "end":
        # Not a decision about one call: the whole stop is ended, whatever its
        # requests allow (LangGraph's goto END).
        ended = Decision(type="end", message=resume.get("message"))
        return {r.id: ended for r in pending}
    if isinstance(resume, str | bytes) or not isinstance(resume, Mapping | Sequence):
        raise InputError(
            "resume with a list of decisions like [{'type': 'approve'}], "
            f"not {type(resume).__name__}"
        )
    by_request: dict[str, object]
    if isinstance(resume, Mapping) and not ({"type"} & set(resume)):
        unknown = set(resume) - {r.id for r in pending}
        if unknown:
            raise InputError(f"no pending request has id {sorted(unknown)[0]!r}")
        by_request = dict(resume)
    else:
        items = [resume] if isinstance(resume, Mapping) else list(resume)
        if len(items) != len(pending):
            raise InputError(
                f"{len(pending)} request(s) wait for a decision, but {len(items)} were given"
            )
        by_request = {r.id: d for r, d in zip(pending, items, strict=True)}
    out: dict[str, Decision] = {}
    for request in pending:
        raw = by_request.get(request.id)
        if raw is None:
            raise InputError(f"no decision for request {request.id!r} ({request.tool})")
        if isinstance(raw, Decision):
            decision = raw
        elif isinstance(raw, Mapping):
            kind = raw.get("type")
            if kind not in DECISIONS:
                raise InputError(f"a decision's type must be one of {DECISIONS}, not {kind!r}")
            args = raw.get("args")
            edited = raw.get("edited_action")
            if args is None and isinstance(edited, Mapping):
                args = edited.get("args")
            message = raw.get("message")
            if message is not None and not isinstance(message, str):
                raise InputError(f"a decision's message must be text, not {message!r}")
            decision = Decision(type=kind, args=args, message=message)
        else:
            raise InputError(f"a decision must be a dict like {{'type': 'approve'}}, not {raw!r}")
        if decision.type not in request.allowed_decisions:
            raise InputError(
                f"{decision.type!r} is not allowed for {request.tool} "
                f"(allowed: {', '.join(request.allowed_decisions)})"
            )
        if decision.type == "edit" and not isinstance(decision.args, Mapping):
            raise InputError(f"an 'edit' decision for {request.tool} needs 'args': {{...}}")
        if decision.type == "respond" and decision.message is None:
            raise InputError(f"a 'respond' decision for {request.tool} needs a 'message'")
        out[request.id] = decision
    return out
