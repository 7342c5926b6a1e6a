"""execute only where commands run; refused paths and oversized reads never end a run."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from deepactors import create_deep_agent
from deepactors.backends import FilesystemBackend, LocalShellBackend, StateBackend
from deepactors.errors import ConfigurationError
from deepactors.middleware._filesystem import FILESYSTEM_PROMPT, FilesystemMiddleware
from deepactors.models import ScriptedModel

from .conftest import Env, call, make_env, run_turns

pytestmark = pytest.mark.anyio

FILE_TOOLS = ["ls", "read_file", "write_file", "edit_file", "delete", "glob", "grep"]


def tool_names(mw: FilesystemMiddleware) -> list[str]:
    return [t.name for t in mw.tools]


def test_execute_is_offered_only_when_commands_can_run(tmp_path: Path) -> None:
    assert tool_names(FilesystemMiddleware()) == FILE_TOOLS
    assert tool_names(FilesystemMiddleware(backend=StateBackend())) == FILE_TOOLS
    assert tool_names(FilesystemMiddleware(backend=FilesystemBackend(tmp_path))) == FILE_TOOLS
    shell = LocalShellBackend(tmp_path)
    assert tool_names(FilesystemMiddleware(backend=shell)) == [*FILE_TOOLS, "execute"]
    assert tool_names(FilesystemMiddleware(execute=True)) == [*FILE_TOOLS, "execute"]
    assert tool_names(FilesystemMiddleware(backend=shell, execute=False)) == FILE_TOOLS


def test_the_agent_sees_the_tools_and_the_prompt_section() -> None:
    agent = create_deep_agent(
        ScriptedModel(["done"]), middleware=[FilesystemMiddleware()], backend=StateBackend()
    )
    assert set(FILE_TOOLS) <= set(agent.tools)
    assert "execute" not in agent.tools
    assert agent.system_prompt is not None
    assert FILESYSTEM_PROMPT in agent.system_prompt
    quiet = create_deep_agent(
        ScriptedModel(["done"]), middleware=[FilesystemMiddleware(system_prompt=None)]
    )
    assert "## Files" not in (quiet.system_prompt or "")


@pytest.mark.parametrize("name", ["read_limit_default", "max_line_chars", "large_result_chars"])
def test_limits_below_one_are_refused(name: str) -> None:
    with pytest.raises(ConfigurationError, match=name):
        FilesystemMiddleware(**{name: 0})  # type: ignore[arg-type]


async def test_execute_runs_in_the_root_and_reports_the_exit_code(tmp_path: Path) -> None:
    env = make_env("disk", tmp_path)
    shell = LocalShellBackend(env.root or tmp_path)
    out = await run_turns(
        env,
        [
            call("write_file", file_path="/data.txt", content="from the file tools\n"),
            call("execute", command="cat data.txt; echo oops >&2; exit 3"),
            call("execute", command="true"),
        ],
        middleware=FilesystemMiddleware(execute=True),
        backend=shell,
    )
    assert out.ok(1) == "from the file tools\noops\n[exit code 3]"
    assert out.ok(2) == "(no output)\n[exit code 0]"


async def test_execute_timeout_is_reported(tmp_path: Path) -> None:
    env = make_env("disk", tmp_path)
    shell = LocalShellBackend(env.root or tmp_path)
    out = await run_turns(
        env,
        [
            call("execute", command="echo started; sleep 30", timeout=0.5),
            call("execute", command="echo x", timeout=0),
        ],
        middleware=FilesystemMiddleware(backend=shell),
        backend=shell,
    )
    assert out.ok(0) == (
        "started\n\n[command timed out after 0.5 seconds and was killed]\n"
        "[no exit code: the command timed out]"
    )
    assert out.error(1) == "timeout must be more than 0 seconds"


async def test_execute_on_a_backend_that_cannot_run_commands_is_an_error(env: Env) -> None:
    # Offered by mistake (execute=True over a file-only backend): an error, not a crash.
    out = await run_turns(
        env, [call("execute", command="echo hi")], middleware=FilesystemMiddleware(execute=True)
    )
    assert out.error(0)


async def test_dotdot_and_home_paths_are_errors_and_the_run_goes_on(env: Env) -> None:
    env.seed({"/a.txt": "a\n"})
    out = await run_turns(
        env,
        [
            call("read_file", file_path="/../etc/passwd"),
            call("write_file", file_path="../escape.txt", content="x"),
            call("ls", path="~"),
            call("grep", pattern="x", path="/a/../.."),
            call("glob", pattern="../*"),
            call("read_file", file_path="/a.txt"),
        ],
    )
    assert "contains '..'" in out.error(0)
    assert "contains '..'" in out.error(1)
    assert "starts with '~'" in out.error(2)
    assert "contains '..'" in out.error(3)
    assert "'..'" in out.error(4)
    assert out.ok(5) == "     1\ta"


async def test_symlink_escape_is_an_error_and_the_run_goes_on(tmp_path: Path) -> None:
    env = make_env("disk", tmp_path)
    assert env.root is not None
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret\n")
    os.symlink(outside, env.root / "link")
    os.symlink(outside / "secret.txt", env.root / "secret-link.txt")
    env.seed({"/ok.txt": "fine\n"})
    out = await run_turns(
        env,
        [
            call("read_file", file_path="/link/secret.txt"),
            call("read_file", file_path="/secret-link.txt"),
            call("write_file", file_path="/link/new.txt", content="x"),
            call("edit_file", file_path="/secret-link.txt", old_string="secret", new_string="x"),
            call("ls", path="/link"),
            call("read_file", file_path="/ok.txt"),
        ],
    )
    for i in range(5):
        assert "resolves outside the backend's root folder" in out.error(i)
    assert out.ok(5) == "     1\tfine"
    assert (outside / "secret.txt").read_text() == "secret\n"
    assert not (outside / "new.txt").exists()


async def test_oversized_read_is_an_error_and_the_run_goes_on(tmp_path: Path) -> None:
    env = make_env("disk", tmp_path)
    assert env.root is not None
    env.seed({"/huge.txt": "x" * 5000, "/small.txt": "ok\n"})
    out = await run_turns(
        env,
        [call("read_file", file_path="/huge.txt"), call("read_file", file_path="/small.txt")],
        backend=FilesystemBackend(env.root, max_read_bytes=1000),
    )
    assert out.error(0) == (
        "/huge.txt is 5000 bytes, over the read limit of 1000; search it with grep instead"
    )
    assert out.ok(1) == "     1\tok"


async def test_binary_file_is_an_error(tmp_path: Path) -> None:
    env = make_env("disk", tmp_path)
    assert env.root is not None
    (env.root / "img.bin").write_bytes(b"\x89PNG\x00\x01")
    out = await run_turns(env, [call("read_file", file_path="/img.bin")])
    assert out.error(0) == "/img.bin is a binary file, not text"


async def test_the_middlewares_own_backend_wins_over_the_agents(tmp_path: Path) -> None:
    env = make_env("state", tmp_path)
    disk = tmp_path / "disk"
    out = await run_turns(
        env,
        [call("write_file", file_path="/here.txt", content="on disk\n")],
        middleware=FilesystemMiddleware(backend=FilesystemBackend(disk)),
    )
    out.ok(0)
    assert (disk / "here.txt").read_text() == "on disk\n"
    assert out.state["files"] == {}


async def test_detector_canary_a_blocking_tool_is_caught(env: Env) -> None:
    """Proves the blocking-call detector is live here, on both event loops."""

    async def blocks() -> str:
        """Sleeps on the event loop, which is forbidden."""
        time.sleep(0.001)  # noqa: ASYNC251
        return "slept"

    out = await run_turns(env, [call("blocks")], tools=[blocks])
    assert "BlockingError" in out.error(0)
