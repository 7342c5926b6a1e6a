"""Harness for the file-tool tests: real agents driven by scripted tool calls.

Each test runs a real agent (``create_deep_agent`` with ``FilesystemMiddleware``)
whose model is a :class:`ScriptedModel` replaying turns of tool calls, over a real
backend: files in agent state, or on disk under ``tmp_path``. A blocking-call
detector (blockbuster) watches every test on both event loops.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from deepactors import AssistantMessage, ScriptedModel, ToolCall, ToolMessage, create_deep_agent
from deepactors.backends import Backend, FilesystemBackend, StateBackend
from deepactors.context import ToolRuntime
from deepactors.middleware._filesystem import FilesystemMiddleware

Call = tuple[str, dict[str, Any]]


@pytest.fixture(autouse=True)
def _no_blocking(blocking_detector: None) -> None:
    """Every test here runs under the blocking-call detector of tests/conftest.py."""


KINDS = ["state", "disk"]


def call(name: str, **args: Any) -> Call:
    """One tool call of a scripted turn."""
    return (name, args)


@dataclass
class Env:
    """A backend under test, how to seed it, and how to see its raw bytes."""

    kind: str
    backend: Backend
    root: Path | None = None
    seeded: dict[str, str] = field(default_factory=dict)

    def seed(self, files: Mapping[str, str]) -> None:
        """Put files in place before the run, without going through the tools."""
        if self.root is None:
            self.seeded.update(files)
            return
        for path, content in files.items():
            host = self.root / path.lstrip("/")
            host.parent.mkdir(parents=True, exist_ok=True)
            host.write_bytes(content.encode())

    def raw(self, result: Mapping[str, Any], path: str) -> str | None:
        """The exact stored text of ``path`` after a run (None when absent)."""
        if self.root is None:
            record = result["files"].get(path)
            return None if record is None else str(record.content)
        host = self.root / path.lstrip("/")
        return host.read_bytes().decode() if host.is_file() else None

    def other_writer(self, runtime: ToolRuntime) -> Backend:
        """A second writer to the same files: "someone else" changing a file."""
        if self.root is None:
            return StateBackend().bind(runtime.state)
        return FilesystemBackend(self.root)


def make_env(kind: str, tmp_path: Path) -> Env:
    if kind == "state":
        return Env(kind=kind, backend=StateBackend())
    root = tmp_path / "root"
    root.mkdir()
    return Env(kind=kind, backend=FilesystemBackend(root), root=root)


@pytest.fixture(params=KINDS)
def env(request: pytest.FixtureRequest, tmp_path: Path) -> Env:
    return make_env(request.param, tmp_path)


@dataclass
class Outcome:
    """A finished run: its tool results in order, and its final state."""

    results: list[ToolMessage]
    state: dict[str, Any]

    def text(self, i: int) -> str:
        return self.results[i].text

    def ok(self, i: int) -> str:
        """The text of result ``i``, which must be a success."""
        message = self.results[i]
        assert message.status == "success", message.text
        return message.text

    def error(self, i: int) -> str:
        """The text of result ``i``, which must be an error."""
        message = self.results[i]
        assert message.status == "error", message.text
        return message.text


async def run_turns(
    env: Env,
    turns: Sequence[Sequence[Call] | Call],
    *,
    middleware: FilesystemMiddleware | None = None,
    tools: Sequence[Callable[..., Any]] = (),
    backend: Backend | None = None,
) -> Outcome:
    """Run an agent whose model makes these tool calls, one turn each, then stops.

    A turn is one call or a list of calls made in the same model answer.
    """
    answers: list[AssistantMessage | str] = []
    for turn in turns:
        calls = [turn] if isinstance(turn, tuple) else list(turn)
        answers.append(
            AssistantMessage(tool_calls=[ToolCall(name=name, args=args) for name, args in calls])
        )
    answers.append("done")
    agent = create_deep_agent(
        ScriptedModel(answers),
        tools=list(tools),
        middleware=[middleware or FilesystemMiddleware()],
        backend=backend or env.backend,
    )
    state = await agent.ainvoke(
        {"messages": [{"role": "user", "content": "go"}], "files": dict(env.seeded)}
    )
    assert state["messages"][-1].text == "done"  # the run went to its end
    results = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    return Outcome(results=results, state=state)
