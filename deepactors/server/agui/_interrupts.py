"""A run's pending approvals as AG-UI interrupts.

A tool call that waits for a human (``interrupt_on``) ends the run with
``RUN_FINISHED`` whose outcome is ``interrupt``: one ``Interrupt`` per pending
approval, its id the tool call's, its ``responseSchema`` the decisions it
allows. The client answers each in ``resume`` (read by ``_input.decisions_of``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = ["interrupt_of"]


def interrupt_of(request: Mapping[str, object], root: str) -> dict[str, object]:
    """A pending approval (an ``ActionRequest``'s dict) as an AG-UI ``Interrupt``.

    Its id is the tool call's; the answer (``payload`` of a resume entry) is a
    decision, as ``responseSchema`` says.
    """
    given, found = request.get("allowed_decisions"), request.get("args")
    allowed = [str(d) for d in given] if isinstance(given, list | tuple) else []
    tool = request["tool"]
    args = dict(found) if isinstance(found, Mapping) else {}
    out: dict[str, object] = {
        "id": request["id"],
        "reason": "tool_approval",
        "message": request.get("description") or f"approve {tool}({_short_args(args)})?",
        "toolCallId": request["id"],
        "responseSchema": _decision_schema(allowed),
        "metadata": {
            "deepactors": {"tool": tool, "args": args, "allowed_decisions": allowed},
        },
    }
    path = request.get("path")
    if isinstance(path, str) and path != root:
        out["subagentRunId"] = path
    return out


def _decision_schema(allowed: Sequence[str]) -> dict[str, object]:
    return {
        "type": "object",
        "properties": {
            "type": {"enum": list(allowed)},
            "args": {"type": "object", "description": "edit: the arguments to run it with"},
            "message": {"type": "string", "description": "reject, respond: what the model reads"},
        },
        "required": ["type"],
    }


def _short_args(args: Mapping[str, object]) -> str:
    text = ", ".join(f"{k}={v!r}" for k, v in args.items())
    return text if len(text) <= 80 else text[:77] + "..."
