"""The offline demo: a small research run on a deterministic model.

The final report is a structured answer (``response_format=ResearchReport``):
the run ends with it in ``result["structured_response"]``.

The "models" here are plain functions of the conversation (a
:class:`~deepactors.models.FunctionModel` each): the main agent plans with
``write_todos``, fans out to three researcher subagents at once (each searches a
tiny embedded library and writes a notes file), reads their notes and writes a
report that merges them. Everything else (actors, the loop, middleware, file
tools, the diff merge, events) is the real runtime, so the demo shows what a run
on Claude looks like without a key or a network.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TextIO

from pydantic import BaseModel

from .agent import DeepAgent
from .events import (
    Event,
    ModelCallFinished,
    ModelCallStarted,
    ModelDelta,
    RunFinished,
    RunStarted,
    StateUpdated,
    TodosUpdated,
    ToolCallFinished,
    ToolCallStarted,
    describe,
)
from .factory import create_deep_agent
from .messages import AssistantMessage, ToolCall, ToolMessage
from .models import FunctionModel, ModelRequest

__all__ = [
    "DEMO_QUESTION",
    "ResearchReport",
    "build_demo_agent",
    "print_event",
    "run_demo",
    "topics_in",
]

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


class ResearchReport(BaseModel):
    """The demo's final answer: where the report is, and what it says in short."""

    title: str
    summary: str
    report_path: str
    sources: list[str]


async def search_library(topic: str) -> str:
    """Look a topic up in the offline library.

    Args:
        topic: One of: actors, structured concurrency, cancellation.
    """
    key = topic.strip().lower()
    if key not in LIBRARY:
        return f"No entry for {topic!r}. Topics: {', '.join(TOPICS)}."
    return LIBRARY[key]


def topics_in(question: str) -> tuple[str, ...]:
    """The library topics a question names; all of them when it names none.

    The demo's model is scripted, but it answers the question it is given: it
    researches the topics the question asks about (``deepactors demo "what is
    cancellation?"`` researches cancellation alone).
    """
    text = question.lower()
    named = tuple(t for t in TOPICS if t in text or t.rstrip("s") in text)
    return named or TOPICS


def _plan(done: int, topics: tuple[str, ...]) -> dict[str, Any]:
    steps = [f"Research {t}" for t in topics] + ["Write the report"]
    todos = []
    for i, step in enumerate(steps):
        status = "completed" if i < done else "in_progress" if i == done else "pending"
        todos.append({"content": step, "status": status})
    return {"todos": todos}


def _slug(topic: str) -> str:
    return topic.replace(" ", "-")


def researcher_model(request: ModelRequest) -> AssistantMessage:
    """A researcher subagent: look the topic up, write a notes file, report."""
    topic = request.messages[0].text.removeprefix("Research: ").strip()
    results = [m for m in request.messages if isinstance(m, ToolMessage)]
    if not results:
        return AssistantMessage(
            content=f"Looking up {topic}.",
            tool_calls=[ToolCall(name="search_library", args={"topic": topic})],
        )
    if len(results) == 1:
        notes = f"# {topic}\n\n{results[0].text}\n"
        return AssistantMessage(
            tool_calls=[
                ToolCall(
                    name="write_file",
                    args={"file_path": f"/notes/{_slug(topic)}.md", "content": notes},
                )
            ]
        )
    return AssistantMessage(content=f"Notes on {topic} are in /notes/{_slug(topic)}.md.")


def research_model(request: ModelRequest) -> AssistantMessage:
    """The main agent's deterministic "model": plan, fan out, read, write, answer."""
    topics = topics_in(request.messages[0].text)
    results = [m for m in request.messages if isinstance(m, ToolMessage)]
    last = results[-1].name if results else None
    if not results:
        named = topics != TOPICS or all(t in request.messages[0].text.lower() for t in TOPICS)
        intro = "" if named else f"My library covers {', '.join(TOPICS)}; I'll cover them all. "
        return AssistantMessage(
            content=intro + "I'll plan this, then hand each topic to a researcher, all at once.",
            tool_calls=[ToolCall(name="write_todos", args=_plan(0, topics))],
        )
    if last == "write_todos" and not any(m.name == "task" for m in results):
        return AssistantMessage(
            tool_calls=[
                ToolCall(
                    name="task",
                    args={"description": f"Research: {t}", "subagent_type": "researcher"},
                )
                for t in topics
            ]
        )
    if last == "task":
        return AssistantMessage(
            content="The researchers are done; reading their notes.",
            tool_calls=[
                ToolCall(name="read_file", args={"file_path": f"/notes/{_slug(t)}.md"})
                for t in topics
            ],
        )
    if last == "read_file":
        sections = [_notes_body(m.text) for m in results if m.name == "read_file"]
        report = "# How the pieces fit\n\n" + "\n\n".join(sections) + "\n\n" + CONCLUSION + "\n"
        return AssistantMessage(
            tool_calls=[
                ToolCall(name="write_file", args={"file_path": "/report.md", "content": report}),
                ToolCall(name="write_todos", args=_plan(len(topics) + 1, topics)),
            ]
        )
    answer = ResearchReport(
        title="How the pieces fit",
        summary="In short: " + CONCLUSION,
        report_path="/report.md",
        sources=[f"/notes/{_slug(t)}.md" for t in topics],
    )
    return AssistantMessage(
        content="The report is in /report.md.",
        tool_calls=[ToolCall(name="ResearchReport", args=answer.model_dump())],
    )


CONCLUSION = (
    "in deepactors every agent and subagent is an actor living in a task group, so "
    "cancelling a run, or letting its deadline pass, takes down exactly its subtree."
)


def _notes_body(numbered: str) -> str:
    """The text of a read_file result without its line numbers and footer."""
    lines = []
    for row in numbered.splitlines():
        number, tab, text = row.partition("\t")
        if tab and number.strip().isdigit() and not text.startswith("#"):
            lines.append(text)
    return " ".join(line for line in lines if line.strip())


def build_demo_agent(*, latency: float = 0.05) -> DeepAgent:
    """The demo agent and its researcher subagent, on deterministic models."""
    return create_deep_agent(
        FunctionModel(research_model, latency=latency, name="demo-model"),
        tools=[search_library],
        system_prompt="You research questions with researcher subagents and write reports.",
        response_format=ResearchReport,
        subagents=[
            {
                "name": "researcher",
                "description": "Researches one topic in the offline library; writes notes.",
                "system_prompt": "Look the topic up, save notes under /notes/, report briefly.",
                "tools": [search_library],
                "model": FunctionModel(researcher_model, latency=latency, name="researcher"),
            }
        ],
    )


def print_event(event: Event, out: TextIO = sys.stdout) -> None:
    """Print one event as a line of the live view (text deltas are shown whole)."""
    if isinstance(event, ModelDelta | ModelCallStarted | StateUpdated):
        return
    if isinstance(event, ModelCallFinished) and not event.message.tool_calls:
        print(f"[{event.path}] answer: {event.message.text}", file=out)
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
