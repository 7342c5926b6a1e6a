"""File permissions: deny in every file tool, denied paths never listed, interrupt asks a human."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from deepactors import (
    AssistantMessage,
    Command,
    CompositeBackend,
    FilesystemBackend,
    FilesystemPermission,
    LocalShellBackend,
    ScriptedModel,
    StateBackend,
    ToolCall,
    ToolMessage,
    create_deep_agent,
)
from deepactors.backends import Backend, PermissionedBackend, PermissionRules
from deepactors.errors import ConfigurationError, PermissionDenied
from deepactors.middleware import FilesystemMiddleware
from deepactors.persistence import MemoryCheckpointer
from tests.output.conftest import subagent

pytestmark = pytest.mark.anyio

FILES = {
    "/public/a.md": "token alpha\n",
    "/public/locked.md": "token locked\n",
    "/secrets/key.md": "token beta\n",
    "/secrets/.env": "token gamma\n",
    "/secrets/deep/more.md": "token delta\n",
    "/notes.md": "token epsilon\n",
}
# What would show a secret file: its name, its folder's contents, its text.
SECRET_WORDS = ("key.md", ".env", "deep", "more.md", "beta", "gamma", "delta")

NO_SECRET_READS = [FilesystemPermission(operations=["read"], paths=["/secrets/**"], mode="deny")]

Turn = Sequence[tuple[str, dict[str, Any]]]


@pytest.fixture(autouse=True)
def _no_blocking(blocking_detector: None) -> None:
    """Every test here runs under the blocking-call detector of tests/conftest.py."""


@pytest.fixture(params=["state", "disk"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    if request.param == "state":
        return StateBackend()
    root = tmp_path / "root"
    for path, content in FILES.items():
        host = root / path.lstrip("/")
        host.parent.mkdir(parents=True, exist_ok=True)
        host.write_text(content)
    return FilesystemBackend(root)


def turns(*calls: Turn) -> list[AssistantMessage | str]:
    return [
        AssistantMessage(tool_calls=[ToolCall(name=n, args=a) for n, a in turn]) for turn in calls
    ] + ["done"]


async def run(
    backend: Backend, *calls: Turn, permissions: Sequence[FilesystemPermission], **kwargs: Any
) -> dict[str, Any]:
    agent = create_deep_agent(
        ScriptedModel(turns(*calls)), backend=backend, permissions=permissions, **kwargs
    )
    files = FILES if isinstance(backend, StateBackend) else {}
    return await agent.ainvoke(
        {"messages": "go", "files": files}, thread_id=(kwargs and "t") or None
    )


def results(state: dict[str, Any]) -> list[ToolMessage]:
    return [m for m in state["messages"] if isinstance(m, ToolMessage)]


async def test_a_denied_path_never_appears_in_grep_glob_or_ls(backend: Backend) -> None:
    searches: Turn = [
        ("grep", {"pattern": "token"}),
        ("grep", {"pattern": "token", "output_mode": "content"}),
        ("grep", {"pattern": "token", "output_mode": "count"}),
        ("grep", {"pattern": "token", "glob": "*.md"}),
        ("glob", {"pattern": "**/*"}),
        ("glob", {"pattern": "**/.env"}),
        ("glob", {"pattern": "/secrets/*"}),
        ("ls", {"path": "/"}),
    ]
    state = await run(backend, searches, permissions=NO_SECRET_READS)
    found = results(state)
    assert [m.status for m in found] == ["success"] * len(searches)
    # The two globs that could only find secrets find nothing (the pattern is echoed).
    assert found[5].text.startswith("No files match")
    assert found[6].text.startswith("No files match")
    for message in found[:5] + found[7:]:
        for word in SECRET_WORDS:
            assert word not in message.text, (message.name, message.text)
    assert "alpha" in found[1].text
    assert "epsilon" in found[1].text
    assert "/public/a.md" in found[4].text
    assert "secrets" not in found[-1].text  # the denied folder is not even listed


async def test_denied_reads_are_refused_in_every_read_tool(backend: Backend) -> None:
    calls: Turn = [
        ("read_file", {"file_path": "/secrets/key.md"}),
        ("read_file", {"file_path": "secrets/./.env"}),
        ("ls", {"path": "/secrets"}),
        ("grep", {"pattern": "token", "path": "/secrets/deep"}),
        ("glob", {"pattern": "*", "path": "/secrets"}),
        ("read_file", {"file_path": "/public/a.md"}),
    ]
    found = results(await run(backend, calls, permissions=NO_SECRET_READS))
    for message in found[:-1]:
        assert message.status == "error"
        assert "permission denied" in message.text
        assert "beta" not in message.text
    assert "alpha" in found[-1].text


async def test_a_grep_that_stops_on_denied_matches_looks_further_for_allowed_ones() -> None:
    denied = "".join(f"needle {i}\n" for i in range(40))
    files = {"/a/hidden.md": denied, "/b/open.md": "needle x\nneedle y\n"}
    agent = create_deep_agent(
        ScriptedModel(turns([("grep", {"pattern": "needle", "output_mode": "content"})])),
        middleware=[FilesystemMiddleware(grep_max_matches=5)],
        permissions=[FilesystemPermission(operations=["read"], paths=["/a/**"], mode="deny")],
    )
    state = await agent.ainvoke({"messages": "go", "files": files})
    (found,) = results(state)
    assert "/b/open.md:1:needle x" in found.text
    assert "/b/open.md:2:needle y" in found.text
    assert "hidden" not in found.text


async def test_denied_writes_are_refused_and_deleting_a_folder_checks_what_is_inside(
    backend: Backend,
) -> None:
    rules = [
        FilesystemPermission(operations=["write"], paths=["/secrets/**"], mode="deny"),
        FilesystemPermission(operations=["write"], paths=["/public/locked.md"], mode="deny"),
    ]
    calls: Turn = [
        ("write_file", {"file_path": "/secrets/new.md", "content": "x"}),
        ("read_file", {"file_path": "/secrets/key.md"}),
    ]
    changes: Turn = [
        ("edit_file", {"file_path": "/secrets/key.md", "old_string": "beta", "new_string": "b"}),
        ("delete", {"file_path": "/secrets/deep"}),
        ("delete", {"file_path": "/public"}),
        ("write_file", {"file_path": "/public/new.md", "content": "fine"}),
    ]
    found = results(await run(backend, calls, changes, permissions=rules))
    assert "permission denied: writing /secrets/new.md" in found[0].text
    assert "beta" in found[1].text  # reading is not covered by these rules
    assert "permission denied: editing /secrets/key.md" in found[2].text
    assert "permission denied: deleting /secrets/deep" in found[3].text
    assert "would delete files this agent may not change" in found[4].text
    assert found[5].status == "success"


async def test_the_first_matching_rule_wins_and_no_match_allows(backend: Backend) -> None:
    rules = [
        FilesystemPermission(operations=["read"], paths=["/secrets/key.md"], mode="allow"),
        FilesystemPermission(operations=["read", "write"], paths=["/secrets/**"], mode="deny"),
    ]
    calls: Turn = [
        ("read_file", {"file_path": "/secrets/key.md"}),
        ("read_file", {"file_path": "/secrets/.env"}),
        ("read_file", {"file_path": "/notes.md"}),
    ]
    found = results(await run(backend, calls, permissions=rules))
    assert "beta" in found[0].text
    assert found[1].status == "error"
    assert "epsilon" in found[2].text


async def test_interrupt_rules_ask_a_human_through_the_hitl_machinery() -> None:
    saver = MemoryCheckpointer()
    rules = [FilesystemPermission(operations=["read"], paths=["/secrets/**"], mode="interrupt")]
    script = turns(
        [("read_file", {"file_path": "/secrets/key.md"}), ("ls", {"path": "/public"})],
        [("grep", {"pattern": "token"})],
    )
    agent = create_deep_agent(ScriptedModel(script), permissions=rules, checkpointer=saver)
    first = await agent.ainvoke({"messages": "go", "files": FILES}, thread_id="t")
    (request,) = first["__interrupt__"]
    assert request["tool"] == "read_file"
    assert request["allowed_decisions"] == ["approve", "reject"]
    assert "/secrets/key.md" in request["description"]
    # ls of a folder no interrupt rule reaches ran without asking.
    assert [m.name for m in results(first)] == ["ls"]
    second = await agent.ainvoke(Command(resume=[{"type": "approve"}]), thread_id="t")
    assert "beta" in results(second)[-1].text
    # A search whose folder holds a guarded path asks too.
    (request,) = second["__interrupt__"]
    assert request["tool"] == "grep"
    done = await agent.ainvoke(
        Command(resume=[{"type": "reject", "message": "not the secrets"}]), thread_id="t"
    )
    refused = results(done)[-1]
    assert refused.status == "error"
    assert "not the secrets" in refused.text
    assert done["messages"][-1].text == "done"


async def test_a_permission_that_asks_comes_before_a_breakpoint_on_the_same_step() -> None:
    saver = MemoryCheckpointer()
    rules = [FilesystemPermission(operations=["read"], paths=["/secrets/**"], mode="interrupt")]
    script = turns([("read_file", {"file_path": "/secrets/key.md"}), ("ls", {"path": "/public"})])
    agent = create_deep_agent(ScriptedModel(script), permissions=rules, checkpointer=saver)
    first = await agent.ainvoke(
        {"messages": "go", "files": FILES}, thread_id="t", interrupt_before=["tools"]
    )
    # The approval first (as LangGraph's approval step comes before its tools node),
    # not a bare breakpoint stop with nothing to answer.
    (request,) = first["__interrupt__"]
    assert request["tool"] == "read_file"
    assert results(first) == []
    done = await agent.ainvoke(
        Command(resume=[{"type": "approve"}]), thread_id="t", interrupt_before=["tools"]
    )
    assert sorted(m.name for m in results(done)) == ["ls", "read_file"]


async def test_interrupt_rules_build_without_a_checkpointer_but_do_not_run() -> None:
    rules = [FilesystemPermission(operations=["read"], paths=["/x/**"], mode="interrupt")]
    agent = create_deep_agent(ScriptedModel(["x"]), permissions=rules)
    with pytest.raises(ConfigurationError, match=r"mode='interrupt'.*checkpointer"):
        await agent.ainvoke({"messages": [{"role": "user", "content": "hi"}]})


async def test_execute_is_refused_unless_every_rule_lies_under_a_composite_route(
    tmp_path: Path,
) -> None:
    shell = LocalShellBackend(tmp_path)
    with pytest.raises(ConfigurationError, match="CompositeBackend"):
        create_deep_agent(ScriptedModel(["x"]), backend=shell, permissions=NO_SECRET_READS)
    mem_rules = [FilesystemPermission(operations=["read"], paths=["/mem/secret*"], mode="deny")]
    routed = CompositeBackend(shell, routes={"/mem/": StateBackend()})
    calls: Turn = [
        ("execute", {"command": "echo hi"}),
        ("read_file", {"file_path": "/mem/secret.md"}),
    ]
    agent = create_deep_agent(ScriptedModel(turns(calls)), backend=routed, permissions=mem_rules)
    assert "execute" in agent.tools
    state = await agent.ainvoke({"messages": "go", "files": {"/mem/secret.md": "s"}})
    found = results(state)
    assert "hi" in found[0].text
    assert "permission denied" in found[1].text
    # The backend itself refuses commands when a rule reaches the shell's files.
    guarded = PermissionedBackend(routed, PermissionRules(NO_SECRET_READS))
    assert not guarded.can_execute
    with pytest.raises(PermissionDenied, match="commands"):
        await guarded.execute("echo hi")


async def test_subagents_inherit_the_rules_unless_they_set_their_own() -> None:
    def child(*calls: Turn) -> ScriptedModel:
        return ScriptedModel([*turns(*calls)[:-1], "child done"])

    read_key: Turn = [("read_file", {"file_path": "/secrets/key.md"})]
    main = ScriptedModel(
        turns(
            [
                ("task", {"description": "a", "subagent_type": "inherits"}),
                ("task", {"description": "b", "subagent_type": "trusted"}),
            ]
        )
    )
    agent = create_deep_agent(
        main,
        permissions=NO_SECRET_READS,
        subagents=[
            subagent("inherits", child(read_key)),
            subagent("trusted", child(read_key), permissions=[]),
        ],
    )
    seen: list[ToolMessage] = []
    async with agent.astream({"messages": "go", "files": FILES}) as stream:
        async for event in stream:
            if type(event).__name__ == "ToolCallFinished" and event.path != "main":
                seen.append(event.result)  # type: ignore[attr-defined]
    by_text = sorted(m.text for m in seen)
    assert any("permission denied" in t for t in by_text)
    assert any("beta" in t for t in by_text)


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        ("/secrets/**", "/secrets", True),
        ("/secrets/**", "/secrets/a/b/.env", True),
        ("/secrets/**", "/secretsx", False),
        ("/*.md", "/.hidden.md", True),
        ("/*.md", "/a/b.md", False),
        ("/**/*.md", "/b.md", True),
        ("/a/?.txt", "/a/x.txt", True),
        ("/a/?.txt", "/a/xy.txt", False),
        ("/a/[bc].txt", "/a/c.txt", True),
        ("/a/[!bc].txt", "/a/c.txt", False),
        ("/{logs,tmp}/**", "/tmp/x", True),
        ("/{logs,tmp}/**", "/var/x", False),
        ("/", "/", True),
        ("/**", "/anything/at/all", True),
    ],
)
def test_permission_patterns(pattern: str, path: str, matches: bool) -> None:
    rules = PermissionRules(
        [FilesystemPermission(operations=["read"], paths=[pattern], mode="deny")]
    )
    assert (rules.mode("read", path) == "deny") is matches
    assert rules.mode("write", path) == "allow"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"operations": ["read"], "paths": ["secrets/**"]}, "must start with '/'"),
        ({"operations": ["read"], "paths": ["/a/../b"]}, "must not contain"),
        ({"operations": ["read"], "paths": ["/~/b"]}, "must not contain"),
        ({"operations": ["delete"], "paths": ["/a"]}, "operations must be"),
        ({"operations": "read", "paths": ["/a"]}, "must be lists"),
        ({"operations": ["read"], "paths": ["/a"], "mode": "ask"}, "mode must be"),
        ({"operations": ["read"], "paths": []}, "at least one path"),
        ({"operations": ["read"], "paths": ["/{a,b"]}, "unbalanced"),
    ],
)
def test_bad_rules_are_refused(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        FilesystemPermission(**kwargs)


def test_permissions_must_be_a_list_of_rules() -> None:
    rule = NO_SECRET_READS[0]
    with pytest.raises(ConfigurationError, match="must be a list"):
        create_deep_agent(ScriptedModel(["x"]), permissions=rule)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="not a FilesystemPermission"):
        create_deep_agent(ScriptedModel(["x"]), permissions=[{"paths": ["/a"]}])  # type: ignore[list-item]
    with pytest.raises(ConfigurationError, match="permissions"):
        create_deep_agent(
            ScriptedModel(["x"]), subagents=[subagent("s", ScriptedModel([]), permissions=[1])]
        )
