"""write_file and edit_file: enforced read-before-write, and exact line endings."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from deepactors.backends import (
    Backend,
    CompositeBackend,
    FilesystemBackend,
    StateBackend,
    StoreBackend,
)
from deepactors.context import RunContext, ToolRuntime
from deepactors.errors import ToolError
from deepactors.middleware._fs_tools import FileToolLimits, make_file_tools
from deepactors.persistence import MemoryStore
from deepactors.tools import Tool

from .conftest import Env, call, make_env, run_turns

pytestmark = pytest.mark.anyio

NOT_READ = "already exists and you have not read it: call read_file on it first"
CHANGED = "has changed since you last read it"


async def test_new_file_needs_no_read(env: Env) -> None:
    out = await run_turns(
        env, [call("write_file", file_path="/notes/new.md", content="# Title\nbody\n")]
    )
    assert out.ok(0) == "Created /notes/new.md (2 lines)."
    assert env.raw(out.state, "/notes/new.md") == "# Title\nbody\n"


async def test_overwriting_an_unread_file_is_refused_then_allowed_after_a_read(env: Env) -> None:
    env.seed({"/a.txt": "old\n"})
    out = await run_turns(
        env,
        [
            call("write_file", file_path="/a.txt", content="new\n"),
            call("read_file", file_path="/a.txt"),
            call("write_file", file_path="/a.txt", content="new\n"),
        ],
    )
    assert out.error(0).startswith(f"/a.txt {NOT_READ}")
    assert out.ok(2) == "Replaced /a.txt (1 line)."
    assert env.raw(out.state, "/a.txt") == "new\n"


async def test_edit_of_an_unread_file_is_refused_and_leaves_it_alone(env: Env) -> None:
    env.seed({"/a.txt": "alpha\nbeta\n"})
    out = await run_turns(
        env, [call("edit_file", file_path="/a.txt", old_string="beta", new_string="BETA")]
    )
    assert NOT_READ in out.error(0)
    assert env.raw(out.state, "/a.txt") == "alpha\nbeta\n"


async def test_edit_after_a_read_succeeds(env: Env) -> None:
    env.seed({"/a.txt": "alpha\nbeta\n"})
    out = await run_turns(
        env,
        [
            call("read_file", file_path="/a.txt"),
            call("edit_file", file_path="/a.txt", old_string="beta", new_string="BETA"),
        ],
    )
    assert out.ok(1) == "Edited /a.txt: 1 replacement."
    assert env.raw(out.state, "/a.txt") == "alpha\nBETA\n"


async def test_a_partial_read_is_enough(env: Env) -> None:
    env.seed({"/a.txt": "".join(f"{n}\n" for n in range(300))})
    out = await run_turns(
        env,
        [
            call("read_file", file_path="/a.txt", offset=10, limit=1),
            call("edit_file", file_path="/a.txt", old_string="299\n", new_string="end\n"),
        ],
    )
    assert out.ok(0).startswith("    11\t10\n")  # only line 11 was read
    assert out.ok(1) == "Edited /a.txt: 1 replacement."
    assert env.raw(out.state, "/a.txt") == "".join(f"{n}\n" for n in range(299)) + "end\n"


async def test_consecutive_edits_and_writes_need_no_reread(env: Env) -> None:
    env.seed({"/a.txt": "one\ntwo\nthree\n"})
    out = await run_turns(
        env,
        [
            call("read_file", file_path="/a.txt"),
            call("edit_file", file_path="/a.txt", old_string="one", new_string="1"),
            call("edit_file", file_path="/a.txt", old_string="two", new_string="2"),
            call("write_file", file_path="/a.txt", content="replaced\n"),
            call("edit_file", file_path="/a.txt", old_string="replaced", new_string="final"),
        ],
    )
    for i in range(1, 5):
        out.ok(i)
    assert env.raw(out.state, "/a.txt") == "final\n"


async def test_a_file_this_agent_created_can_be_edited_without_a_read(env: Env) -> None:
    out = await run_turns(
        env,
        [
            call("write_file", file_path="/a.txt", content="draft\n"),
            call("edit_file", file_path="/a.txt", old_string="draft", new_string="final"),
        ],
    )
    out.ok(1)
    assert env.raw(out.state, "/a.txt") == "final\n"


async def test_a_file_changed_by_someone_else_after_the_read_needs_a_fresh_read(
    env: Env,
) -> None:
    env.seed({"/a.txt": "mine\n"})

    async def someone_else_writes(runtime: ToolRuntime) -> str:
        """Change /a.txt behind the agent's back."""
        await env.other_writer(runtime).write("/a.txt", "theirs, and longer\n")
        return "changed"

    out = await run_turns(
        env,
        [
            call("read_file", file_path="/a.txt"),
            call("someone_else_writes"),
            call("edit_file", file_path="/a.txt", old_string="theirs", new_string="ours"),
            call("write_file", file_path="/a.txt", content="clobber\n"),
            call("read_file", file_path="/a.txt"),
            call("edit_file", file_path="/a.txt", old_string="theirs", new_string="ours"),
        ],
        tools=[someone_else_writes],
    )
    assert out.error(2).startswith(f"/a.txt {CHANGED}")
    assert CHANGED in out.error(3)
    assert "theirs, and longer" in out.ok(4)
    out.ok(5)
    assert env.raw(out.state, "/a.txt") == "ours, and longer\n"


async def test_edit_of_a_missing_file_points_to_write_file(env: Env) -> None:
    out = await run_turns(
        env, [call("edit_file", file_path="/ghost.txt", old_string="a", new_string="b")]
    )
    assert out.error(0) == "no file at /ghost.txt; use write_file to create a new file"


async def test_edit_errors_are_results_the_model_can_act_on(env: Env) -> None:
    env.seed({"/a.txt": "x\nx\ny\n"})
    out = await run_turns(
        env,
        [
            call("read_file", file_path="/a.txt"),
            call("edit_file", file_path="/a.txt", old_string="zzz", new_string="w"),
            call("edit_file", file_path="/a.txt", old_string="x", new_string="w"),
            call("edit_file", file_path="/a.txt", old_string="x", new_string="w", replace_all=True),
        ],
    )
    assert "old string not found in /a.txt" in out.error(1)
    assert "old string occurs 2 times in /a.txt" in out.error(2)
    assert out.ok(3) == "Edited /a.txt: 2 replacements."
    assert env.raw(out.state, "/a.txt") == "w\nw\ny\n"


async def test_edit_keeps_crlf_endings_and_the_missing_final_newline(env: Env) -> None:
    env.seed({"/dos.txt": "first\r\nsecond\r\nthird"})
    out = await run_turns(
        env,
        [
            call("read_file", file_path="/dos.txt"),
            # The model writes \n, as it saw the lines in read_file.
            call(
                "edit_file",
                file_path="/dos.txt",
                old_string="first\nsecond",
                new_string="1st\n2nd\n2nd-bis",
            ),
            call("edit_file", file_path="/dos.txt", old_string="third", new_string="3rd"),
        ],
    )
    out.ok(1)
    out.ok(2)
    assert env.raw(out.state, "/dos.txt") == "1st\r\n2nd\r\n2nd-bis\r\n3rd"


async def test_edit_keeps_a_final_newline_and_its_absence(env: Env) -> None:
    env.seed({"/with.txt": "a\nb\n", "/without.txt": "a\nb"})
    out = await run_turns(
        env,
        [
            [call("read_file", file_path="/with.txt"), call("read_file", file_path="/without.txt")],
            [
                call("edit_file", file_path="/with.txt", old_string="b", new_string="B"),
                call("edit_file", file_path="/without.txt", old_string="b", new_string="B"),
            ],
        ],
    )
    assert env.raw(out.state, "/with.txt") == "a\nB\n"
    assert env.raw(out.state, "/without.txt") == "a\nB"


async def test_writing_over_a_folder_is_an_error(env: Env) -> None:
    env.seed({"/dir/a.txt": "a\n"})
    out = await run_turns(env, [call("write_file", file_path="/dir", content="x")])
    assert "/dir is a folder" in out.error(0)


async def test_reads_are_recorded_per_path_through_a_composite(tmp_path: Path) -> None:
    store = MemoryStore()
    backend = CompositeBackend(StateBackend(), {"/memories/": StoreBackend(store)})
    env = make_env("state", tmp_path)
    out = await run_turns(
        env,
        [
            call("write_file", file_path="/memories/m.md", content="remember\n"),
            call("edit_file", file_path="/memories/m.md", old_string="remember", new_string="kept"),
            call("write_file", file_path="/memories/m.md", content="again\n"),
        ],
        backend=backend,
    )
    assert out.ok(0) == "Created /memories/m.md (1 line)."
    assert out.ok(1) == "Edited /memories/m.md: 1 replacement."
    assert out.ok(2) == "Replaced /memories/m.md (1 line)."
    # The writes went through the route to the store, not to the default backend.
    item = await store.get(("files",), "/m.md")
    assert item is not None
    assert item.value["content"] == "again\n"
    assert "/memories/m.md" not in out.state["files"]


async def test_parallel_edits_of_one_file_in_one_turn_both_land(env: Env) -> None:
    env.seed({"/a.txt": "one\ntwo\nthree\n"})
    out = await run_turns(
        env,
        [
            call("read_file", file_path="/a.txt"),
            [
                call("edit_file", file_path="/a.txt", old_string="one", new_string="1"),
                call("edit_file", file_path="/a.txt", old_string="three", new_string="3"),
            ],
        ],
    )
    out.ok(1)
    out.ok(2)
    assert env.raw(out.state, "/a.txt") == "1\ntwo\n3\n"


# -- two agents on one shared backend ------------------------------------------


def _agent_tools(backend: Backend, name: str) -> tuple[dict[str, Tool], ToolRuntime]:
    """One agent's file tools over a shared backend, and its runtime (own reads)."""
    limits = FileToolLimits(
        read_limit_default=100,
        max_line_chars=2000,
        max_chars=80_000,
        grep_max_matches=500,
        max_entries=1000,
    )
    tools = make_file_tools(lambda _: backend, limits, with_execute=False)
    runtime = ToolRuntime(state=None, tool_call_id=name, run=RunContext(path=name, run_id=name))
    return {t.name: t for t in tools}, runtime


@pytest.mark.parametrize("kind", ["disk", "store"])
@pytest.mark.parametrize("new_file", [False, True], ids=["replace", "create"])
async def test_two_agents_writing_one_file_at_once_never_lose_a_write_silently(
    tmp_path: Path, kind: str, new_file: bool
) -> None:
    backend: Backend = (
        FilesystemBackend(tmp_path) if kind == "disk" else StoreBackend(MemoryStore())
    )
    agents = [_agent_tools(backend, "main"), _agent_tools(backend, "main/task-1")]
    if not new_file:
        await backend.write("/report.md", "v0\n")
        for tools, runtime in agents:
            await tools["read_file"].call({"file_path": "/report.md"}, runtime)
    outcomes: dict[str, str] = {}

    async def write(tools: dict[str, Tool], runtime: ToolRuntime) -> None:
        args = {"file_path": "/report.md", "content": f"{runtime.run.path}'s report\n"}
        try:
            await tools["write_file"].call(args, runtime)
            outcomes[runtime.run.path] = "written"
        except ToolError as exc:
            outcomes[runtime.run.path] = str(exc)

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            for tools, runtime in agents:
                tg.start_soon(write, tools, runtime)
    winners = [name for name, outcome in outcomes.items() if outcome == "written"]
    assert len(winners) == 1, outcomes
    loser = next(o for name, o in outcomes.items() if name not in winners)
    assert "read_file" in loser
    assert (await backend.read("/report.md")).text == f"{winners[0]}'s report"
