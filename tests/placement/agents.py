"""The agents the Ray placement tests run: module-level functions, so a worker
imports them by name (cloudpickle sends importable functions by reference).

A child's brief is a small command language (one command per brief):

- ``write <path> <text>``: writes the file, then answers ``wrote <path>``;
- ``edit <path> <old> <new>``: reads and edits the file, then answers;
- ``echo <text>``: answers ``echo: <text>``;
- ``wait``: calls a tool that waits until cancelled;
- ``fail``: its model raises;
- ``ask``: calls ``send_email``, which a human must approve;
- ``steps <n>``: makes ``n`` model calls (one tool call each), then answers;
- ``gate <path>``: waits in a tool until the file ``path`` exists, then answers;
- ``trace``: answers with the trace id current in its tool (on its worker);
- ``heed <path>``: waits until the file ``path`` exists and a message was sent
  to it (a background task's update), then answers with the message.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

import anyio

from deepactors import (
    AssistantMessage,
    DeepAgent,
    ToolCall,
    ToolMessage,
    UserMessage,
    create_deep_agent,
)
from deepactors.messages import Usage
from deepactors.models import FunctionModel, ModelRequest
from deepactors.placement import RayPlacement
from tests.waiting import wait_until_sync

ONE_CALL = Usage(input_tokens=10, output_tokens=5, requests=1)


def _brief(request: ModelRequest) -> str:
    first = next(m for m in request.messages if isinstance(m, UserMessage))
    return first.text


def child_model(request: ModelRequest) -> AssistantMessage:
    """The children's model (see the module docstring)."""
    words = _brief(request).split()
    results = [m for m in request.messages if isinstance(m, ToolMessage)]
    match words:
        case ["write", path, *text]:
            if not results:
                call = ToolCall(
                    id="w", name="write_file", args={"file_path": path, "content": " ".join(text)}
                )
                return AssistantMessage(tool_calls=[call], usage=ONE_CALL)
            return AssistantMessage(content=f"wrote {path}", usage=ONE_CALL)
        case ["edit", path, old, new]:
            if not results:
                call = ToolCall(id="r", name="read_file", args={"file_path": path})
                return AssistantMessage(tool_calls=[call], usage=ONE_CALL)
            if len(results) == 1:
                args = {"file_path": path, "old_string": old, "new_string": new}
                call = ToolCall(id="e", name="edit_file", args=args)
                return AssistantMessage(tool_calls=[call], usage=ONE_CALL)
            return AssistantMessage(content=f"edited {path}: {results[-1].text}", usage=ONE_CALL)
        case ["echo", *text]:
            return AssistantMessage(content="echo: " + " ".join(text), usage=ONE_CALL)
        case ["wait"]:
            if not results:
                call = ToolCall(id="wait", name="wait_here", args={})
                return AssistantMessage(tool_calls=[call], usage=ONE_CALL)
            return AssistantMessage(content="waited", usage=ONE_CALL)
        case ["fail"]:
            raise RuntimeError("the model broke")
        case ["ask"]:
            if not results:
                call = ToolCall(id="mail", name="send_email", args={"to": "ops"})
                return AssistantMessage(tool_calls=[call], usage=ONE_CALL)
            return AssistantMessage(content=f"mail: {results[-1].text}", usage=ONE_CALL)
        case ["gate", path]:
            if not results:
                call = ToolCall(id="gate", name="wait_for_file", args={"path": path})
                return AssistantMessage(tool_calls=[call], usage=ONE_CALL)
            return AssistantMessage(content=f"passed {path}", usage=ONE_CALL)
        case ["heed", path]:
            told = [m.text for m in request.messages[1:] if isinstance(m, UserMessage)]
            if told:
                return AssistantMessage(content=f"heeded {' '.join(told)}", usage=ONE_CALL)
            # Not told yet: wait (again) at the gate; the message comes meanwhile.
            call = ToolCall(id=f"heed{len(results)}", name="wait_for_file", args={"path": path})
            return AssistantMessage(tool_calls=[call], usage=ONE_CALL)
        case ["trace"]:
            if not results:
                call = ToolCall(id="trace", name="trace_here", args={})
                return AssistantMessage(tool_calls=[call], usage=ONE_CALL)
            return AssistantMessage(content=results[-1].text, usage=ONE_CALL)
        case ["steps", n]:
            if len(results) < int(n) - 1:
                call = ToolCall(id=f"s{len(results)}", name="lookup", args={"q": "x"})
                return AssistantMessage(tool_calls=[call], usage=ONE_CALL)
            return AssistantMessage(content=f"{n} steps", usage=ONE_CALL)
        case _:
            return AssistantMessage(content=f"unknown brief {words!r}", usage=ONE_CALL)


async def wait_here() -> str:
    """Wait until cancelled."""
    await anyio.sleep_forever()
    return "never"


def wait_for_file(path: str) -> str:
    """Wait until a file exists (a sync tool: it runs in a worker thread)."""
    wait_until_sync(lambda: os.path.exists(path), what=f"{path} made", timeout=120, interval=0.02)
    return "there"


async def trace_here() -> str:
    """The OpenTelemetry trace id current here (in the tool's task)."""
    from opentelemetry import trace

    return f"{trace.get_current_span().get_span_context().trace_id:032x}"


def lookup(q: str) -> str:
    """Look something up."""
    return f"found {q}"


def send_email(to: str) -> str:
    """Send an email."""
    return f"sent to {to}"


def parent_model(request: ModelRequest) -> AssistantMessage:
    """The parent: its user message is a JSON list of ``[subagent_type, brief]``; it
    makes one ``task`` call per item in one turn, then answers with every result
    as JSON ``[[status, text], ...]`` in the order of the calls."""
    last = request.messages[-1]
    if isinstance(last, UserMessage):
        orders = json.loads(last.text)
        calls = [
            ToolCall(id=f"call-{i}", name="task", args={"subagent_type": k, "description": d})
            for i, (k, d) in enumerate(orders)
        ]
        return AssistantMessage(tool_calls=calls, usage=ONE_CALL)
    results = [m for m in request.messages if isinstance(m, ToolMessage)]
    return AssistantMessage(
        content=json.dumps([[m.status, m.text] for m in results]), usage=ONE_CALL
    )


def worker_subagent(name: str = "w", **extra: Any) -> dict[str, Any]:
    """A subagent dict whose model is :func:`child_model`, with the test tools."""
    return {
        "name": name,
        "description": "does one small thing",
        "system_prompt": "Do the brief.",
        "model": FunctionModel(child_model),
        "tools": [wait_here, wait_for_file, trace_here, lookup, send_email],
        **extra,
    }


def parent(
    placement: RayPlacement | None,
    subagents: Sequence[dict[str, Any]] = (),
    **options: Any,
) -> DeepAgent:
    """A parent whose subagents are placed by ``placement`` (None: in process)."""
    return create_deep_agent(
        FunctionModel(parent_model),
        subagents=list(subagents) or [worker_subagent()],
        placement=placement,
        **options,
    )


def say(orders: Sequence[tuple[str, str]], **values: Any) -> dict[str, Any]:
    """The parent's input: its orders, and other input values (files)."""
    return {"messages": [{"role": "user", "content": json.dumps(orders)}], **values}


def answers(result: dict[str, Any]) -> list[tuple[str, str]]:
    """The parent's final answer: each task's status and text, in call order."""
    return [(s, t) for s, t in json.loads(result["messages"][-1].text)]


def imported_model(request: ModelRequest) -> AssistantMessage:
    """The model of the agent a worker imports: it says so."""
    return AssistantMessage(content=f"imported: {_brief(request)}", usage=ONE_CALL)


def imported_agent() -> DeepAgent:
    """An agent a worker builds itself, from this import path."""
    return create_deep_agent(FunctionModel(imported_model), name="w")


def waiting_child() -> DeepAgent:
    """A child that waits in a tool until cancelled, whatever its brief says
    (by import path, for tests that drive a worker themselves)."""
    return create_deep_agent(FunctionModel(child_model), tools=[wait_here], name="w")
