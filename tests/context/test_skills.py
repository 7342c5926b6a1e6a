"""SkillsMiddleware: progressive disclosure, overrides, broken files skipped, edits seen next."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from structlog.testing import capture_logs

from deepactors import AssistantMessage, ToolCall, create_deep_agent
from deepactors.backends import FilesystemBackend
from deepactors.errors import ConfigurationError
from deepactors.events import Event, SkillSkipped
from deepactors.middleware import SkillsMiddleware
from deepactors.middleware._skill_parse import MAX_DESCRIPTION, parse_skill
from deepactors.models import FunctionModel, ModelRequest

pytestmark = pytest.mark.anyio


def skill(name: str, description: str, body: str = "Step 1: do it.", extra: str = "") -> str:
    return f"---\nname: {name}\ndescription: {description}\n{extra}---\n# {name}\n{body}\n"


LIBRARY = {
    "/skills/base/web-research/SKILL.md": skill(
        "web-research", "Find and cite sources on the web.", body="SECRET-BODY-TEXT"
    ),
    "/skills/base/summarize/SKILL.md": skill("summarize", "Old house style."),
    "/skills/team/summarize/SKILL.md": skill(
        "summarize", "Team summary style.", extra="license: MIT\n"
    ),
}


class Steps:
    def __init__(self, *answers: AssistantMessage | str) -> None:
        self.answers = list(answers)
        self.requests: list[ModelRequest] = []

    def __call__(self, request: ModelRequest) -> AssistantMessage | str:
        self.requests.append(request)
        return self.answers[min(len(self.requests), len(self.answers)) - 1]


def call(name: str, **args: object) -> AssistantMessage:
    return AssistantMessage(tool_calls=[ToolCall(name=name, args=args)])


async def stream(agent: object, payload: object) -> tuple[dict[str, object], list[Event]]:
    seen: list[Event] = []
    with anyio.fail_after(30):
        async with agent.astream(payload) as events:  # type: ignore[attr-defined]
            async for event in events:
                seen.append(event)
    return events.result, seen


async def test_the_prompt_lists_name_description_and_path_only() -> None:
    model = Steps("done")
    agent = create_deep_agent(FunctionModel(model), skills=["/skills/base/", "/skills/team/"])
    await agent.ainvoke({"messages": "hi", "files": LIBRARY})
    prompt = model.requests[0].system_prompt or ""
    assert "## Skills" in prompt
    assert (
        "- **web-research**: Find and cite sources on the web. -> "
        "`/skills/base/web-research/SKILL.md`" in prompt
    )
    assert "SECRET-BODY-TEXT" not in prompt  # progressive disclosure: the body is read on demand
    # A later source overrides an earlier one by name.
    assert "Team summary style. (license: MIT) -> `/skills/team/summarize/SKILL.md`" in prompt
    assert "Old house style" not in prompt
    # The user's system prompt comes first; the skills list is appended.
    assert prompt.startswith("You are a capable assistant")


async def test_no_skills_no_section() -> None:
    model = Steps("done")
    agent = create_deep_agent(FunctionModel(model), skills=["/skills/"])
    await agent.ainvoke("hi")
    assert "## Skills" not in (model.requests[0].system_prompt or "")


async def test_broken_skill_files_are_skipped_with_a_warning_and_the_run_goes_on() -> None:
    files = {
        "/skills/good/SKILL.md": skill("good", "Works fine."),
        "/skills/bad-yaml/SKILL.md": "---\nname: bad-yaml\ndescription: [unclosed\n---\nbody\n",
        "/skills/no-description/SKILL.md": "---\nname: no-description\n---\nbody\n",
        "/skills/no-front-matter/SKILL.md": "# Just markdown\n",
        "/skills/huge/SKILL.md": skill("huge", "Far too big.", body="x" * (10 * 1024 * 1024)),
    }
    model = Steps(call("ls", path="/skills"), "done")
    agent = create_deep_agent(FunctionModel(model), skills=["/skills/"])
    with capture_logs() as logs:
        result, events = await stream(agent, {"messages": "hi", "files": files})
    assert result["messages"][-1].text == "done"  # type: ignore[index]
    skipped = {e.file_path: e.reason for e in events if isinstance(e, SkillSkipped)}
    assert set(skipped) == {
        "/skills/bad-yaml/SKILL.md",
        "/skills/no-description/SKILL.md",
        "/skills/no-front-matter/SKILL.md",
        "/skills/huge/SKILL.md",
    }
    assert "invalid YAML" in skipped["/skills/bad-yaml/SKILL.md"]
    assert "'description' is missing" in skipped["/skills/no-description/SKILL.md"]
    assert "must start with '---'" in skipped["/skills/no-front-matter/SKILL.md"]
    assert "over the limit" in skipped["/skills/huge/SKILL.md"]
    # Once per file version, not once per model call.
    assert len([e for e in events if isinstance(e, SkillSkipped)]) == 4
    logged = [entry for entry in logs if entry["event"] == "skill skipped"]
    assert {entry["file"] for entry in logged} == set(skipped)
    assert all(entry["log_level"] == "warning" and entry["reason"] for entry in logged)
    for request in model.requests:
        prompt = request.system_prompt or ""
        assert "**good**: Works fine." in prompt
        assert "bad-yaml" not in prompt


async def test_a_skill_the_agent_writes_or_edits_is_seen_by_the_next_call() -> None:
    path = "/skills/notes/SKILL.md"
    model = Steps(
        call("write_file", file_path=path, content=skill("notes", "Take notes.")),
        call("read_file", file_path=path),
        call("edit_file", file_path=path, old_string="Take notes.", new_string="Keep tidy notes."),
        "done",
    )
    agent = create_deep_agent(FunctionModel(model), skills=["/skills/"])
    await agent.ainvoke("learn a skill")
    prompts = [r.system_prompt or "" for r in model.requests]
    assert "## Skills" not in prompts[0]
    assert "**notes**: Take notes." in prompts[1]
    assert "**notes**: Keep tidy notes." in prompts[3]


async def test_skills_on_disk_changed_between_runs(tmp_path: Path) -> None:
    folder = anyio.Path(tmp_path / "skills" / "deploy")
    await folder.mkdir(parents=True)
    await (folder / "SKILL.md").write_text(skill("deploy", "Deploy v1."))
    model = Steps("one", "two")
    agent = create_deep_agent(
        FunctionModel(model), skills=["/skills"], backend=FilesystemBackend(tmp_path)
    )
    await agent.ainvoke("first")
    await (folder / "SKILL.md").write_text(skill("deploy", "Deploy v2, with a rollback plan."))
    await agent.ainvoke("second")
    assert "Deploy v1." in (model.requests[0].system_prompt or "")
    assert "Deploy v2, with a rollback plan." in (model.requests[1].system_prompt or "")


async def test_subagents_take_skills_from_their_spec() -> None:
    parent = Steps(
        AssistantMessage(
            tool_calls=[
                ToolCall(name="task", args={"description": "a", "subagent_type": "writer"}),
                ToolCall(
                    name="task", args={"description": "b", "subagent_type": "general-purpose"}
                ),
            ]
        ),
        "done",
    )
    writer = Steps("written")
    general = Steps("general done")
    agent = create_deep_agent(
        FunctionModel(parent),
        skills=["/skills/base/"],
        subagents=[
            {
                "name": "writer",
                "description": "writes",
                "system_prompt": "write",
                "model": FunctionModel(writer),
                "skills": ["/skills/team/"],
            },
            {
                "name": "general-purpose",
                "description": "anything",
                "system_prompt": "help",
                "model": FunctionModel(general),
            },
        ],
    )
    await agent.ainvoke({"messages": "go", "files": LIBRARY})
    writer_prompt = writer.requests[0].system_prompt or ""
    assert "Team summary style." in writer_prompt
    assert "web-research" not in writer_prompt
    # A general-purpose dict without skills gets none; the built-in one would get the main's.
    assert "## Skills" not in (general.requests[0].system_prompt or "")


async def test_the_built_in_general_purpose_subagent_gets_the_main_skills() -> None:
    answers: dict[str, list[str]] = {"main": [], "child": []}

    def model(request: ModelRequest) -> AssistantMessage | str:
        prompt = request.system_prompt or ""
        if "task" in [t.name for t in request.tools]:
            answers["main"].append(prompt)
            if len(answers["main"]) == 1:
                return call("task", description="x", subagent_type="general-purpose")
            return "done"
        answers["child"].append(prompt)
        return "child done"

    agent = create_deep_agent(FunctionModel(model), skills=["/skills/base/"])
    await agent.ainvoke({"messages": "go", "files": LIBRARY})
    assert "**web-research**" in answers["child"][0]


async def test_parse_rules() -> None:
    long = "d" * (MAX_DESCRIPTION + 50)
    text = (
        "---\nname: Other_Name\ndescription: "
        + long
        + "\ncompatibility: needs network\nmetadata:\n  owner: research\n  level: 3\n"
        + "allowed-tools: read_file grep\n---\nbody"
    )
    parsed = await parse_skill(text.splitlines(), path="/s/x/SKILL.md", folder="x", source="/s")
    assert parsed.skill is not None
    assert len(parsed.skill.description) == MAX_DESCRIPTION
    assert parsed.skill.metadata == {"owner": "research", "level": "3"}
    assert parsed.skill.allowed_tools == ("read_file", "grep")
    assert parsed.skill.compatibility == "needs network"
    assert any("does not match its folder" in w for w in parsed.warnings)
    assert any("lowercase" in w for w in parsed.warnings)
    assert any("cut to" in w for w in parsed.warnings)

    listed = await parse_skill(
        ["---", "name: x", "description: y", "allowed-tools: [a, b]", "---"],
        path="p",
        folder="x",
        source="s",
    )
    assert listed.skill is not None
    assert listed.skill.allowed_tools == ("a", "b")
    assert not listed.warnings

    unclosed = await parse_skill(["---", "name: x"], path="p", folder="x", source="s")
    assert unclosed.skill is None
    assert "not closed" in (unclosed.problem or "")
    not_mapping = await parse_skill(["---", "- a", "- b", "---"], path="p", folder="x", source="s")
    assert "mapping" in (not_mapping.problem or "")


async def test_a_big_front_matter_still_parses() -> None:
    lines = ["---", "name: big", "description: many fields"]
    lines += [f"field{i}: {'v' * 200}" for i in range(400)]
    lines.append("---")
    parsed = await parse_skill(lines, path="p", folder="big", source="s")
    assert parsed.skill is not None
    assert parsed.skill.name == "big"


def test_bad_sources_are_refused() -> None:
    with pytest.raises(ConfigurationError):
        SkillsMiddleware([])
    with pytest.raises(ConfigurationError):
        SkillsMiddleware("/skills/")
    with pytest.raises(ConfigurationError, match="invalid skills folder"):
        SkillsMiddleware(["~/skills"])
