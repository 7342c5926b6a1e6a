"""The offline demo: a small research run on a deterministic model.

The final report is a structured answer (``response_format=ResearchReport``):
the run ends with it in ``result["structured_response"]``.

The "models" here are plain functions of the conversation (a
:class:`~deepactors.models.FunctionModel` each): the main agent plans with
``write_todos``, fans out to three researcher subagents at once (each searches a
tiny embedded library and writes a notes file) and to an archivist that pages
through a long archive (its context is summarized as it goes, the pages offloaded
to a history file), reads their notes and the ``report-writing`` skill, writes a
report in the skill's format, and records what it learned in its memory file
(``/memories/AGENTS.md``), which the next model call sees. Memory, skills and
conversation history live in a store (a ``CompositeBackend`` route); the notes
and the report in agent state. Everything else (actors, the loop, middleware,
file tools, the diff merge, events) is the real runtime, so the demo shows what a
run on Claude looks like without a key or a network.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from typing import Any, TextIO

from pydantic import BaseModel

from ..agent import DeepAgent
from ..backends import CompositeBackend, StateBackend, StoreBackend
from ..events import (
    ContextSummarized,
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
from ..messages import AssistantMessage, SystemMessage, ToolCall, ToolMessage, UserMessage
from ..middleware import SummarizationMiddleware
from ..models import FunctionModel, ModelRequest
from ..persistence import MemoryStore
from ._factory import create_deep_agent

__all__ = [
    "DEMO_QUESTION",
    "ResearchReport",
    "build_demo_agent",
    "print_event",
    "run_demo",
    "seed_demo_files",
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

MEMORY_PATH = "/memories/AGENTS.md"
MEMORY_LAST_LINE = "- The user likes reports that open with a one-line answer."
MEMORY = f"# What I remember about this user\n{MEMORY_LAST_LINE}\n"

SKILL_PATH = "/skills/report-writing/SKILL.md"
SKILL = """\
---
name: report-writing
description: How to write a research report for this user - order, sources, length.
license: MIT
---
# Report writing
1. Open with one line that answers the question.
2. One paragraph per topic, from the researchers' notes.
3. End with a "Sources:" line naming the notes files.
"""

ARCHIVE_PARTS = 8
_PART = re.compile(r"[Aa]rchive part (\d+)|parts 1-(\d+)")


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
    topic = _question(request).removeprefix("Research: ").strip()
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
    question = _question(request)
    topics = topics_in(question)
    results = [m for m in request.messages if isinstance(m, ToolMessage)]
    last = results[-1].name if results else None
    if not results:
        return _plan_step(request, question, topics)
    if last == "write_todos" and not any(m.name == "task" for m in results):
        return _fan_out_step(topics)
    if last == "task":
        notes = [f"/notes/{_slug(t)}.md" for t in topics]
        return AssistantMessage(
            content="The researchers are done; reading their notes, my report skill and memory.",
            tool_calls=[
                ToolCall(name="read_file", args={"file_path": path})
                for path in [*notes, SKILL_PATH, MEMORY_PATH]
            ],
        )
    if last == "read_file":
        return _report_step(request, results, topics)
    return _answer_step(request, topics)


def _plan_step(request: ModelRequest, question: str, topics: tuple[str, ...]) -> AssistantMessage:
    """The first answer: what the library covers, what memory says, and the plan."""
    named = topics != TOPICS or all(t in question.lower() for t in TOPICS)
    intro = "" if named else f"My library covers {', '.join(TOPICS)}; I'll cover them all. "
    remembered = _remembered(request)
    if remembered:
        intro = f"My memory says: {remembered[0]} " + intro
    return AssistantMessage(
        content=intro + "I'll plan this, then hand each topic to a researcher, all at once.",
        tool_calls=[ToolCall(name="write_todos", args=_plan(0, topics))],
    )


def _fan_out_step(topics: tuple[str, ...]) -> AssistantMessage:
    """One researcher per topic and the archivist, all at once."""
    research = [
        ToolCall(name="task", args={"description": f"Research: {t}", "subagent_type": "researcher"})
        for t in topics
    ]
    archive = ToolCall(
        name="task",
        args={"description": "Skim the whole archive for dates.", "subagent_type": "archivist"},
    )
    return AssistantMessage(tool_calls=[*research, archive])


def _report_step(
    request: ModelRequest, results: list[ToolMessage], topics: tuple[str, ...]
) -> AssistantMessage:
    """The notes read: write the report, finish the plan and note the topics in memory."""
    read = _paths_read(request)
    sections = [
        _notes_body(m.text)
        for m in results
        if m.name == "read_file" and read.get(m.tool_call_id, "").startswith("/notes/")
    ]
    sources = ", ".join(f"/notes/{_slug(t)}.md" for t in topics)
    report = (
        "# How the pieces fit\n\n"
        + ONE_LINE_ANSWER
        + "\n\n"
        + "\n\n".join(sections)
        + "\n\n"
        + CONCLUSION
        + f"\n\nSources: {sources}\n"
    )
    learned = f"- Asked about: {', '.join(topics)}."
    return AssistantMessage(
        content="Writing the report as the report-writing skill says, and noting the topic.",
        tool_calls=[
            ToolCall(name="write_file", args={"file_path": "/report.md", "content": report}),
            ToolCall(name="write_todos", args=_plan(len(topics) + 1, topics)),
            ToolCall(
                name="edit_file",
                args={
                    "file_path": MEMORY_PATH,
                    "old_string": MEMORY_LAST_LINE,
                    "new_string": f"{MEMORY_LAST_LINE}\n{learned}",
                },
            ),
        ],
    )


def _answer_step(request: ModelRequest, topics: tuple[str, ...]) -> AssistantMessage:
    """The last answer: where the report is, and the structured ``ResearchReport``."""
    noted = [line for line in _remembered(request) if line.startswith("Asked about")]
    memory = f" (Memory updated: {noted[-1]})" if noted else ""
    answer = ResearchReport(
        title="How the pieces fit",
        summary="In short: " + CONCLUSION,
        report_path="/report.md",
        sources=[f"/notes/{_slug(t)}.md" for t in topics],
    )
    return AssistantMessage(
        content="The report is in /report.md. In short: " + CONCLUSION + memory,
        tool_calls=[ToolCall(name="ResearchReport", args=answer.model_dump())],
    )


def _question(request: ModelRequest) -> str:
    """The user's question: the first user message (memory comes before it)."""
    for message in request.messages:
        if isinstance(message, UserMessage):
            return message.text
    return ""


def _remembered(request: ModelRequest) -> list[str]:
    """The bullet points of the memory the model was shown."""
    for message in request.messages:
        if isinstance(message, SystemMessage) and "<agent_memory>" in message.text:
            return [
                line.strip().removeprefix("- ")
                for line in message.text.split("</agent_memory>")[0].splitlines()
                if line.strip().startswith("- ")
            ]
    return []


def _paths_read(request: ModelRequest) -> dict[str, str]:
    """Tool call id -> the file a read_file call asked for."""
    return {
        call.id: str(call.args.get("file_path", ""))
        for message in request.messages
        if isinstance(message, AssistantMessage)
        for call in message.tool_calls
        if call.name == "read_file"
    }


ONE_LINE_ANSWER = (
    "In one line: actors own their state, task groups own their tasks, and cancel scopes "
    "end whole subtrees."
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


async def read_archive(part: int) -> str:
    """Read one part of the offline archive of papers (long texts).

    Args:
        part: Which part, from 1 to 8.
    """
    if not 1 <= part <= ARCHIVE_PARTS:
        return f"There are parts 1 to {ARCHIVE_PARTS}."
    year = 1970 + 3 * part
    filler = "Notes on message passing, supervision trees and cancellation. " * 24
    return f"Archive part {part} of {ARCHIVE_PARTS} ({year}). {filler}"


def archivist_model(request: ModelRequest) -> AssistantMessage | str:
    """The archivist subagent: reads the archive part by part, and writes its summaries.

    It reads one part per turn; what it has read comes from the parts in view and
    from the summary of the ones summarized away, so it carries on after each
    summary exactly where it was.
    """
    seen = [int(a or b) for message in request.messages for a, b in _PART.findall(message.text)]
    highest = max(seen, default=0)
    if not request.tools:  # the summarization call: no tools
        return f"Read archive parts 1-{highest}, each a year of notes on concurrency."
    if highest < ARCHIVE_PARTS:
        return AssistantMessage(
            content=f"Reading part {highest + 1}.",
            tool_calls=[ToolCall(name="read_archive", args={"part": highest + 1})],
        )
    return f"Skimmed all {ARCHIVE_PARTS} archive parts, 1973 to 1994; actors come first."


def build_demo_agent(*, latency: float = 0.05) -> DeepAgent:
    """The demo agent and its subagents, on deterministic models.

    Memory, skills and conversation histories are routed to a store; call
    :func:`seed_demo_files` before running it.
    """
    store = MemoryStore()
    backend = CompositeBackend(
        StateBackend(),
        routes={
            prefix: StoreBackend(store, namespace=("demo", prefix.strip("/")))
            for prefix in ("/memories/", "/skills/", "/conversation_history/")
        },
    )
    return create_deep_agent(
        FunctionModel(research_model, latency=latency, name="demo-model"),
        tools=[search_library],
        system_prompt="You research questions with researcher subagents and write reports.",
        response_format=ResearchReport,
        backend=backend,
        memory=[MEMORY_PATH],
        skills=["/skills/"],
        subagents=[
            {
                "name": "researcher",
                "description": "Researches one topic in the offline library; writes notes.",
                "system_prompt": "Look the topic up, save notes under /notes/, report briefly.",
                "tools": [search_library],
                "model": FunctionModel(researcher_model, latency=latency, name="researcher"),
            },
            {
                "name": "archivist",
                "description": "Pages through the long archive of papers.",
                "system_prompt": "Read the archive part by part and report what it spans.",
                "tools": [read_archive],
                "model": FunctionModel(archivist_model, latency=latency / 5, name="archivist"),
                # A small window on purpose, so that the demo shows summaries.
                "middleware": [
                    SummarizationMiddleware(trigger=("tokens", 3_000), keep=("messages", 3))
                ],
            },
        ],
    )


async def seed_demo_files(agent: DeepAgent) -> None:
    """Put the demo's memory file and skill where the agent finds them."""
    backend = agent.spec.backend
    assert backend is not None
    await backend.write(MEMORY_PATH, MEMORY)
    await backend.write(SKILL_PATH, SKILL)


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
        ContextSummarized: "~",
    }
    mark = marks.get(type(event), "-")
    print(f"[{event.path}] {mark} {describe(event)}", file=out)


async def run_demo(
    question: str = DEMO_QUESTION, *, on_event: Callable[[Event], None] = print_event
) -> dict[str, Any]:
    """Run the demo agent on ``question``, passing each event to ``on_event``."""
    agent = build_demo_agent()
    await seed_demo_files(agent)
    stream = agent.astream({"messages": [{"role": "user", "content": question}]})
    async with stream:
        async for event in stream:
            on_event(event)
    assert stream.result is not None
    return stream.result
