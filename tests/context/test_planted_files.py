"""Planted skill and memory files: over a bound they are skipped or cut, never fail the run."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from structlog.testing import capture_logs

from deepactors import AssistantMessage, ToolCall, create_deep_agent
from deepactors.backends import FilesystemBackend
from deepactors.events import Event, SkillSkipped
from deepactors.messages import SystemMessage
from deepactors.middleware._memory import MAX_MEMORY_CHARS
from deepactors.middleware._skill_parse import (
    MAX_FRONT_MATTER_CHARS,
    MAX_FRONT_MATTER_DEPTH,
    parse_skill,
)
from deepactors.models import FunctionModel, ModelRequest
from deepactors.persistence import MemoryCheckpointer

pytestmark = pytest.mark.anyio

GOOD = "---\nname: good\ndescription: Works fine.\n---\n# good\nStep 1.\n"
# 5,000 nested flow sequences: PyYAML's recursive composer used to blow the stack.
DEEP = "---\nname: deep\ndescription: Deep.\nmetadata: " + "[" * 5000 + "\n---\nbody\n"
# About 10 MB of front matter, under the 10 MiB file limit so the front matter bound decides.
HUGE = "---\nname: huge\ndescription: Huge.\nnotes: " + "x" * 10_000_000 + "\n---\nbody\n"


def laughs(levels: int = 9) -> str:
    """A "billion laughs" front matter: each anchor aliases the previous one nine times."""
    lines = ["---", "name: laughs", "description: Alias bomb.", "metadata:", "  l0: &l0 lol"]
    for i in range(1, levels + 1):
        lines.append(f"  l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]")
    return "\n".join([*lines, "---", "body", ""])


PLANTED = {
    "/skills/good/SKILL.md": GOOD,
    "/skills/deep/SKILL.md": DEEP,
    "/skills/huge/SKILL.md": HUGE,
    "/skills/laughs/SKILL.md": laughs(),
}
BAD = {path for path in PLANTED if path != "/skills/good/SKILL.md"}


class Steps:
    """A model that plays a list of answers (the last one again) and keeps every request."""

    def __init__(self, *answers: AssistantMessage | str) -> None:
        self.answers = list(answers)
        self.requests: list[ModelRequest] = []

    def __call__(self, request: ModelRequest) -> AssistantMessage | str:
        self.requests.append(request)
        return self.answers[min(len(self.requests), len(self.answers)) - 1]


def call(name: str, **args: object) -> AssistantMessage:
    return AssistantMessage(tool_calls=[ToolCall(name=name, args=args)])


async def stream(agent: object, payload: object, **kwargs: object) -> tuple[object, list[Event]]:
    seen: list[Event] = []
    with anyio.fail_after(60):
        async with agent.astream(payload, **kwargs) as events:  # type: ignore[attr-defined]
            async for event in events:
                seen.append(event)
    return events.result, seen


async def test_planted_skill_files_are_skipped_naming_them_and_the_run_completes() -> None:
    model = Steps(call("ls", path="/skills"), "done")
    agent = create_deep_agent(FunctionModel(model), skills=["/skills/"])
    with capture_logs() as logs:
        result, events = await stream(agent, {"messages": "hi", "files": PLANTED})
    assert result["messages"][-1].text == "done"  # type: ignore[index]
    skipped = {e.file_path: e.reason for e in events if isinstance(e, SkillSkipped)}
    assert set(skipped) == BAD
    assert f"deeper than {MAX_FRONT_MATTER_DEPTH} levels" in skipped["/skills/deep/SKILL.md"]
    assert f"limit of {MAX_FRONT_MATTER_CHARS} characters" in skipped["/skills/huge/SKILL.md"]
    assert "aliases counted" in skipped["/skills/laughs/SKILL.md"]
    warned = {e["file"] for e in logs if e["event"] == "skill skipped"}
    assert warned == BAD
    assert all(e["log_level"] == "warning" for e in logs if e["event"] == "skill skipped")
    assert len(model.requests) == 2
    for request in model.requests:
        prompt = request.system_prompt or ""
        assert "**good**: Works fine." in prompt
        assert "**deep**" not in prompt
        assert "**laughs**" not in prompt


async def test_a_bad_skill_the_agent_writes_does_not_break_its_thread() -> None:
    model = Steps(
        call("write_file", file_path="/skills/deep/SKILL.md", content=DEEP),
        call("write_file", file_path="/skills/laughs/SKILL.md", content=laughs()),
        "written",
        "second run fine",
    )
    agent = create_deep_agent(
        FunctionModel(model), skills=["/skills/"], checkpointer=MemoryCheckpointer()
    )
    files = {"/skills/good/SKILL.md": GOOD}
    with capture_logs() as logs:
        first, _ = await stream(agent, {"messages": "plant", "files": files}, thread_id="t")
        second, events = await stream(agent, "go on", thread_id="t")
    assert first["messages"][-1].text == "written"  # type: ignore[index]
    assert second["messages"][-1].text == "second run fine"  # type: ignore[index]
    # The next run of the thread finds both files in its state and skips them again.
    assert {e.file_path for e in events if isinstance(e, SkillSkipped)} == {
        "/skills/deep/SKILL.md",
        "/skills/laughs/SKILL.md",
    }
    assert {e["file"] for e in logs if e["event"] == "skill skipped"} == {
        "/skills/deep/SKILL.md",
        "/skills/laughs/SKILL.md",
    }
    for request in model.requests:
        assert "**good**: Works fine." in (request.system_prompt or "")


async def test_parse_bounds_directly() -> None:
    def lines(text: str) -> list[str]:
        return text.split("\n")

    for text in (DEEP, HUGE, laughs()):
        parsed = await parse_skill(lines(text), path="p", folder="x", source="s")
        assert parsed.skill is None
        assert parsed.problem
    # Just within the depth bound still parses (the extra keys are ignored).
    nested = "[" * (MAX_FRONT_MATTER_DEPTH - 1) + "]" * (MAX_FRONT_MATTER_DEPTH - 1)
    ok = await parse_skill(
        ["---", "name: x", "description: d", f"extra: {nested}", "---"],
        path="p",
        folder="x",
        source="s",
    )
    assert ok.skill is not None, ok.problem
    # A few anchors and aliases within the bound are fine, and a self-referencing one ends.
    small = await parse_skill(lines(laughs(levels=3)), path="p", folder="laughs", source="s")
    assert small.skill is not None, small.problem
    # (Were it to expand for ever, the parser's own time bound would cut it and skip the skill.)
    loop = await parse_skill(
        ["---", "name: x", "description: d", "extra: &a [*a, *a]", "---"],
        path="p",
        folder="x",
        source="s",
    )
    assert loop.skill is not None, loop.problem


def memory_of(request: ModelRequest) -> str:
    first = request.messages[0]
    assert isinstance(first, SystemMessage)
    return first.text


async def test_a_huge_memory_file_is_cut_and_the_run_completes() -> None:
    # Unclosed comment openers made the old lazy regex quadratic; a line per note.
    huge = "# Notes\nThe user likes tea.\n" + "note line\n" * 500_000 + "<!--" * 100_000
    model = Steps(call("ls", path="/"), "done")
    agent = create_deep_agent(FunctionModel(model), memory=["/AGENTS.md"])
    with capture_logs() as logs:
        result, _ = await stream(agent, {"messages": "hi", "files": {"/AGENTS.md": huge}})
    assert result["messages"][-1].text == "done"  # type: ignore[index]
    for request in model.requests:
        text = memory_of(request)
        assert "The user likes tea." in text
        assert "[cut: this file has" in text
        assert len(text) < MAX_MEMORY_CHARS + 4_000  # the guidelines and tags add a little
    cut = [e for e in logs if e["event"] == "memory file cut"]
    assert [e["file"] for e in cut] == ["/AGENTS.md"]  # once: the version did not change
    assert cut[0]["log_level"] == "warning"


async def test_a_memory_file_over_the_read_limit_is_left_out_with_a_note(tmp_path: Path) -> None:
    await anyio.Path(tmp_path / "AGENTS.md").write_text("x" * 5_000)
    await anyio.Path(tmp_path / "TEAM.md").write_text("Team rule: be brief.")
    model = Steps("done")
    agent = create_deep_agent(
        FunctionModel(model),
        memory=["/AGENTS.md", "/TEAM.md"],
        backend=FilesystemBackend(tmp_path, max_read_bytes=1_000),
    )
    with capture_logs() as logs:
        result = await agent.ainvoke("hi")
    assert result["messages"][-1].text == "done"
    text = memory_of(model.requests[0])
    assert "[not loaded: 5000 bytes, over the read limit" in text
    assert "Team rule: be brief." in text
    assert [e["file"] for e in logs if e["event"] == "memory file left out"] == ["/AGENTS.md"]
