"""Large tool results go to a file; the history keeps a short, readable reference."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from deepactors import AssistantMessage, ToolCall, ToolMessage, create_deep_agent
from deepactors.backends import FilesystemBackend
from deepactors.context import ToolRuntime
from deepactors.middleware._filesystem import FilesystemMiddleware
from deepactors.middleware._fs_format import result_path
from deepactors.models import FunctionModel, ModelRequest
from deepactors.tools import Command

from .conftest import Env, call, make_env, run_turns

pytestmark = pytest.mark.anyio

# 200,000 characters in 2,500 lines of 79 characters and a newline each.
BIG = "".join(f"row {n:05d} " + "abcdefghij" * 6 + "-" * 9 + "\n" for n in range(2500))
assert len(BIG) == 200_000


async def big_report() -> str:
    """A tool whose answer is far too long for the context window."""
    return BIG


async def one_long_line() -> str:
    """A 200,000-character JSON-like answer on a single line."""
    return "[" + ",".join(f'"{n:07d}"' for n in range(20_000)) + "]"


def read_back(texts: list[str]) -> str:
    """The file content behind a series of read_file pages (number columns removed)."""
    lines = []
    for text in texts:
        for row in text.split("\n"):
            m = re.fullmatch(r" *\d+\t(.*)", row)
            if m:
                lines.append(m.group(1))
    return "".join(line + "\n" for line in lines)


def page_follower(tool_name: str) -> FunctionModel:
    """A model that calls ``tool_name``, then reads the saved result as a model would.

    It takes the path from the notice, reads with ``limit=1000`` and follows each
    page's "offset=N to continue" footer until the end of the file.
    """

    def answer(request: ModelRequest) -> AssistantMessage | str:
        last = request.messages[-1]
        if not isinstance(last, ToolMessage):
            return AssistantMessage(tool_calls=[ToolCall(name=tool_name)])
        if last.name == tool_name:
            m = re.search(r"saved to (/large_tool_results/\S+) ", last.text)
            if m is None:
                return "no notice"
            return _read(m.group(1), 0)
        m = re.search(r"offset=(\d+) to continue", last.text)
        if last.name == "read_file" and m is not None:
            path = re.search(r'file_path="([^"]+)"', request.messages[2].text)
            assert path is not None
            return _read(path.group(1), int(m.group(1)))
        return "done"

    return FunctionModel(answer)


def _read(path: str, offset: int) -> AssistantMessage:
    args = {"file_path": path, "offset": offset, "limit": 1000}
    return AssistantMessage(tool_calls=[ToolCall(name="read_file", args=args)])


async def follow(env: Env, tool: Callable[..., Any]) -> tuple[str, list[str], dict[str, Any]]:
    """Run :func:`page_follower`; the notice, the pages read, and the final state."""
    agent = create_deep_agent(
        page_follower(tool.__name__),
        tools=[tool],
        middleware=[FilesystemMiddleware()],
        backend=env.backend,
    )
    state = await agent.ainvoke("go")
    assert state["messages"][-1].text == "done"
    results = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert all(m.status == "success" for m in results)
    return results[0].text, [m.text for m in results[1:]], state


async def test_a_huge_result_is_replaced_by_a_reference_and_reads_back_page_by_page(
    env: Env,
) -> None:
    notice, pages, state = await follow(env, big_report)
    path = "/large_tool_results/" + state["messages"][2].tool_call_id
    assert len(notice) < 2500
    assert f"saved to {path} (2,500 lines)" in notice
    assert "200,000 characters" in notice
    assert f'read_file(file_path="{path}", offset=0, limit=100)' in notice
    assert "row 00000" in notice  # head preview
    assert "row 02499" in notice  # tail preview
    assert env.raw(state, path) == BIG
    # Each page stays under the page cap (1,000 lines of 87 characters would not).
    assert len(pages) == 3
    assert all(len(p) <= 80_000 for p in pages)
    assert "Lines 1829-2500 of 2500: end of file." in pages[-1]
    assert read_back(pages) == BIG


async def test_the_reference_is_listed_in_the_results_folder(env: Env) -> None:
    out = await run_turns(
        env,
        [call("big_report"), call("ls", path="/large_tool_results")],
        tools=[big_report],
    )
    listing = out.ok(1)
    assert listing == f"/large_tool_results/{out.results[0].tool_call_id} (200,000 bytes)"


async def test_a_single_huge_line_is_split_so_it_can_be_read_whole(env: Env) -> None:
    notice, pages, state = await follow(env, one_long_line)
    path = "/large_tool_results/" + state["messages"][2].tool_call_id
    assert "Lines longer than 2,000 characters were split in the file." in notice
    stored = env.raw(state, path)
    assert stored is not None
    original = await one_long_line()
    assert stored.replace("\n", "") == original
    assert max(len(line) for line in stored.split("\n")) == 2000
    # Pages of 2,000-character lines stop under the page cap; nothing is clipped.
    assert not any("clipped" in p for p in pages)
    assert all(len(p) <= 80_000 for p in pages)
    assert "Call read_file with offset=39 to continue." in pages[0]
    assert read_back(pages).replace("\n", "") == original


async def test_results_under_the_threshold_are_untouched(env: Env) -> None:
    async def medium() -> str:
        """Just under the limit."""
        return "m" * 1000

    out = await run_turns(env, [call("medium")], tools=[medium], middleware=FilesystemMiddleware())
    assert out.ok(0) == "m" * 1000
    assert env.raw(out.state, "/large_tool_results/" + out.results[0].tool_call_id) is None


async def test_file_tools_page_themselves_and_are_never_evicted(env: Env) -> None:
    env.seed({"/wide.txt": ("w" * 150 + "\n") * 100})
    mw = FilesystemMiddleware(large_result_chars=2000)
    out = await run_turns(
        env,
        [
            call("read_file", file_path="/wide.txt"),
            call("grep", pattern="w", output_mode="content"),
        ],
        middleware=mw,
    )
    page = out.ok(0)
    assert len(page) <= 2000  # footer included
    assert "Call read_file with offset=10 to continue." in page
    grep = out.ok(1)
    assert "Output cut after" in grep
    assert "large_tool_results" not in page + grep


async def test_error_results_are_evicted_too_and_keep_their_status(env: Env) -> None:
    async def noisy_failure() -> str:
        """Fails with a huge message."""
        from deepactors.errors import ToolError

        raise ToolError("trace line\n" * 20_000)

    out = await run_turns(env, [call("noisy_failure")], tools=[noisy_failure])
    notice = out.error(0)
    assert "saved to /large_tool_results/" in notice
    assert len(notice) < 3000


async def test_a_command_result_is_evicted(env: Env) -> None:
    async def big_command(runtime: ToolRuntime) -> Command:
        """Returns a Command whose result is huge."""
        return Command(update={}, result=BIG)

    out = await run_turns(env, [call("big_command")], tools=[big_command])
    path = "/large_tool_results/" + out.results[0].tool_call_id
    assert f"saved to {path}" in out.ok(0)
    assert env.raw(out.state, path) == BIG


async def test_when_saving_fails_the_result_is_kept_whole(tmp_path: Path) -> None:
    env = make_env("disk", tmp_path)
    assert env.root is not None
    tiny_writes = FilesystemBackend(env.root, max_write_bytes=1000)
    out = await run_turns(env, [call("big_report")], tools=[big_report], backend=tiny_writes)
    assert out.ok(0) == BIG
    assert not (env.root / "large_tool_results").exists()


async def test_eviction_can_be_turned_off(env: Env) -> None:
    out = await run_turns(
        env,
        [call("big_report")],
        tools=[big_report],
        middleware=FilesystemMiddleware(large_result_chars=None),
    )
    assert out.ok(0) == BIG


@pytest.mark.parametrize(
    ("call_id", "path"),
    [
        ("toolu_01ABC-def_9", r"/large_tool_results/toolu_01ABC-def_9"),
        ("../../etc/passwd", r"/large_tool_results/_\.\._etc_passwd-[0-9a-f]{8}"),
        ("a/b\\c d", r"/large_tool_results/a_b_c_d-[0-9a-f]{8}"),
        ("...", r"/large_tool_results/result-[0-9a-f]{8}"),
    ],
)
def test_result_paths_are_sanitised(call_id: str, path: str) -> None:
    assert re.fullmatch(path, result_path(call_id))


def test_ids_that_clean_up_alike_get_different_paths() -> None:
    assert result_path("a/b") != result_path("a b")
    assert result_path("a/b") == result_path("a/b")
