"""The offline demo: a small research run on a deterministic model.

The "model" here is a plain function of the conversation (a
:class:`~deepactors.models.FunctionModel`): it plans with ``write_todos``, searches
a tiny embedded library with three parallel tool calls, and writes its answer from
what the searches returned. Everything else (the loop, middleware, concurrency,
events) is the real runtime, so the demo shows what a run on Claude looks like
without a key or a network.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from typing import Any, TextIO

from .agent import DeepAgent, create_deep_agent
from .events import (
    Event,
    ModelCallFinished,
    ModelCallStarted,
    ModelDelta,
    RunFinished,
    RunStarted,
    TodosUpdated,
    ToolCallFinished,
    ToolCallStarted,
    describe,
)
from .messages import AssistantMessage, ToolCall, ToolMessage
from .models import FunctionModel, ModelRequest

__all__ = ["DEMO_QUESTION", "build_demo_agent", "print_event"]

DEMO_QUESTION = "How do actors, structured concurrency and cancellation fit together?"

LIBRARY = {
    "actors": (
        "The actor model (Hewitt, 1973): an actor owns its state and changes it only in "
        "response to messages from its mailbox, one at a time, so no lock guards that state."
    ),
    "structured concurrency": (
        "Structured concurrency (trio's nurseries, anyio's task groups): every task has a "
        "parent that waits for it, so no task outlives the block that started it."
    ),
    "cancellation": (
        "Cancel scopes: cancelling a scope cancels every task inside it, and a deadline is "
        "just a scope that cancels itself at a given time."
    ),
}

TOPICS = tuple(LIBRARY)


async def search_library(topic: str) -> str:
    """Look a topic up in the offline library.

    Args:
        topic: One of: actors, structured concurrency, cancellation.
    """
    key = topic.strip().lower()
    if key not in LIBRARY:
        return f"No entry for {topic!r}. Topics: {', '.join(TOPICS)}."
    return LIBRARY[key]


def _plan(done: int) -> dict[str, Any]:
    steps = [f"Research {t}" for t in TOPICS] + ["Write the answer"]
    todos = []
    for i, step in enumerate(steps):
        status = "completed" if i < done else "in_progress" if i == done else "pending"
        todos.append({"content": step, "status": status})
    return {"todos": todos}


def research_model(request: ModelRequest) -> AssistantMessage:
    """The demo's deterministic "model": decides from the conversation so far."""
    results = [m for m in request.messages if isinstance(m, ToolMessage)]
    searched = [m for m in results if m.name == "search_library"]
    if not results:
        return AssistantMessage(
            content="I'll plan this, then look up the three ideas in parallel.",
            tool_calls=[ToolCall(name="write_todos", args=_plan(0))],
        )
    if not searched:
        return AssistantMessage(
            content="Searching all three topics at once.",
            tool_calls=[ToolCall(name="search_library", args={"topic": t}) for t in TOPICS],
        )
    if results[-1].name == "search_library":
        # The answer is written in the next message, so the plan can close now.
        return AssistantMessage(
            tool_calls=[ToolCall(name="write_todos", args=_plan(len(TOPICS) + 1))]
        )
    facts = [re.sub(r"\s+", " ", m.text) for m in searched]
    answer = (
        "They fit like this:\n"
        + "\n".join(f"- {fact}" for fact in facts)
        + "\nIn deepactors every agent and subagent is an actor living in a task group, so "
        "cancelling a run, or letting its deadline pass, takes down exactly its subtree."
    )
    return AssistantMessage(content=answer)


def build_demo_agent(*, latency: float = 0.05) -> DeepAgent:
    """The demo agent on the deterministic research model."""
    return create_deep_agent(
        FunctionModel(research_model, latency=latency, name="demo-model"),
        tools=[search_library],
        system_prompt="You research questions in the offline library and answer briefly.",
    )


def print_event(event: Event, out: TextIO = sys.stdout) -> None:
    """Print one event as a line of the live view (text deltas are shown whole)."""
    if isinstance(event, ModelDelta | ModelCallStarted):
        return
    if isinstance(event, ModelCallFinished) and not event.message.tool_calls:
        print(f"[{event.path}] answer:\n{event.message.text}", file=out)
        return
    marks: dict[type, str] = {
        RunStarted: "*",
        RunFinished: "*",
        ToolCallStarted: ">",
        ToolCallFinished: "<",
        TodosUpdated: "#",
    }
    mark = marks.get(type(event), "-")
    print(f"[{event.path}] {mark} {describe(event)}", file=out)


async def run_demo(
    question: str = DEMO_QUESTION, *, on_event: Callable[[Event], None] = print_event
) -> dict[str, Any]:
    """Run the demo agent on ``question``, passing each event to ``on_event``."""
    stream = build_demo_agent().astream({"messages": [{"role": "user", "content": question}]})
    async with stream:
        async for event in stream:
            on_event(event)
    assert stream.result is not None
    return stream.result
