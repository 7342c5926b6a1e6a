"""ls, glob, grep and delete."""

from __future__ import annotations

import pytest

from deepactors.middleware._filesystem import FilesystemMiddleware

from .conftest import Env, call, run_turns

pytestmark = pytest.mark.anyio

TREE = {
    "/README.md": "# Project\nTODO: write docs\n",
    "/src/app.py": "import os\n# TODO: fix\nprint('hi')\n# TODO: test\n",
    "/src/util.py": "def f():\n    return 1\n",
    "/src/.hidden.py": "# TODO: hidden\n",
    "/.env": "SECRET=1\n",
    "/.git/config": "[core]\n",
}


async def test_ls_lists_folders_and_file_sizes(env: Env) -> None:
    env.seed(TREE)
    out = await run_turns(env, [call("ls"), call("ls", path="/src")])
    assert out.ok(0).split("\n") == [
        "/.env (9 bytes)",
        "/.git/",
        "/README.md (27 bytes)",
        "/src/",
    ]
    assert out.ok(1).split("\n") == [
        "/src/.hidden.py (15 bytes)",
        "/src/app.py (47 bytes)",
        "/src/util.py (22 bytes)",
    ]


async def test_ls_of_an_empty_root_and_of_a_missing_folder(env: Env) -> None:
    out = await run_turns(env, [call("ls"), call("ls", path="/missing")])
    assert out.ok(0) == "/ is empty."
    assert "/missing" in out.error(1)


async def test_ls_stops_at_max_entries(env: Env) -> None:
    env.seed({f"/f{n:02d}.txt": "x" for n in range(12)})
    out = await run_turns(env, [call("ls")], middleware=FilesystemMiddleware(max_entries=10))
    lines = out.ok(0).split("\n")
    assert len(lines) == 11
    assert lines[-1] == "(... and 2 more; narrow the path or pattern)"


async def test_glob_recursive_and_dotfile_rules(env: Env) -> None:
    env.seed(TREE)
    out = await run_turns(
        env,
        [
            call("glob", pattern="**/*.py"),
            call("glob", pattern="*.py", path="/src"),
            call("glob", pattern="**/.*"),
            call("glob", pattern="*.rs"),
        ],
    )
    assert out.ok(0).split("\n") == ["/src/app.py (47 bytes)", "/src/util.py (22 bytes)"]
    assert out.ok(1).split("\n") == ["/src/app.py (47 bytes)", "/src/util.py (22 bytes)"]
    assert out.ok(2).split("\n") == ["/.env (9 bytes)", "/src/.hidden.py (15 bytes)"]
    assert out.ok(3) == "No files match '*.rs' under /."


def test_glob_description_documents_dotfiles() -> None:
    glob = next(t for t in FilesystemMiddleware().tools if t.name == "glob")
    assert "`*` skips `.env`" in glob.description
    assert "`**` does not enter\n`.git/`" in glob.description
    assert set(glob.parameters["properties"]) == {"pattern", "path"}


async def test_grep_output_modes(env: Env) -> None:
    env.seed(TREE)
    out = await run_turns(
        env,
        [
            call("grep", pattern="TODO"),
            call("grep", pattern="TODO", output_mode="content"),
            call("grep", pattern="TODO", output_mode="count"),
            call("grep", pattern="core"),
        ],
    )
    # Unlike glob's wildcards, grep searches dotfiles and dot-folders too.
    assert out.ok(0).split("\n") == ["/README.md", "/src/.hidden.py", "/src/app.py"]
    assert out.ok(1).split("\n") == [
        "/README.md:2:TODO: write docs",
        "/src/.hidden.py:1:# TODO: hidden",
        "/src/app.py:2:# TODO: fix",
        "/src/app.py:4:# TODO: test",
    ]
    assert out.ok(2).split("\n") == ["/README.md: 1", "/src/.hidden.py: 1", "/src/app.py: 2"]
    assert out.ok(3) == "/.git/config"


async def test_grep_glob_filter_path_and_no_match(env: Env) -> None:
    env.seed(TREE)
    out = await run_turns(
        env,
        [
            call("grep", pattern=r"TODO|return", glob="*.py", output_mode="content"),
            call("grep", pattern="print", path="/src/app.py", output_mode="content"),
            call("grep", pattern="nothing-here", glob="*.md"),
        ],
    )
    assert out.ok(0).split("\n") == [
        "/src/app.py:2:# TODO: fix",
        "/src/app.py:4:# TODO: test",
        "/src/util.py:2:    return 1",
    ]
    assert out.ok(1) == "/src/app.py:3:print('hi')"
    assert out.ok(2) == "No matches for 'nothing-here' under / in files matching '*.md'."


async def test_grep_cap_says_the_list_is_incomplete(env: Env) -> None:
    env.seed({"/many.txt": "hit\n" * 50, "/more.txt": "hit\n"})
    mw = FilesystemMiddleware(grep_max_matches=5)
    out = await run_turns(
        env,
        [call("grep", pattern="hit", output_mode="content"), call("grep", pattern="hit")],
        middleware=mw,
    )
    lines = out.ok(0).split("\n")
    assert lines[:5] == [f"/many.txt:{n}:hit" for n in range(1, 6)]
    assert len(lines) == 6
    assert lines[5].startswith("(Stopped after 5 matching lines; there are more.")
    assert "narrow the pattern" in out.ok(1)


async def test_grep_clips_long_matching_lines(env: Env) -> None:
    env.seed({"/long.txt": "needle " + "z" * 3000 + "\n"})
    out = await run_turns(
        env, [call("grep", pattern="needle", output_mode="content")], middleware=None
    )
    text = out.ok(0)
    assert text.startswith("/long.txt:1:needle zzz")
    assert text.endswith("[... clipped, the line has 3,007 characters]")


async def test_grep_invalid_regex_is_an_error(env: Env) -> None:
    env.seed(TREE)
    out = await run_turns(env, [call("grep", pattern="(unclosed")])
    assert out.error(0).startswith("invalid regular expression '(unclosed'")


async def test_grep_rejects_an_unknown_output_mode(env: Env) -> None:
    out = await run_turns(env, [call("grep", pattern="x", output_mode="lines")])
    assert "output_mode" in out.error(0)


async def test_delete_file_and_folder(env: Env) -> None:
    env.seed(TREE)
    out = await run_turns(
        env,
        [
            call("read_file", file_path="/src/util.py"),
            call("delete", file_path="/src"),
            call("delete", file_path="/README.md"),
            call("delete", file_path="/README.md"),
            call("ls"),
            # Recreating a deleted path is a new file: no read needed.
            call("write_file", file_path="/src/util.py", content="new\n"),
        ],
    )
    assert out.ok(1) == "Deleted /src."
    assert out.ok(2) == "Deleted /README.md."
    assert "/README.md" in out.error(3)
    assert out.ok(4).split("\n") == ["/.env (9 bytes)", "/.git/"]
    assert out.ok(5) == "Created /src/util.py (1 line)."
    assert env.raw(out.state, "/src/app.py") is None


async def test_the_root_cannot_be_deleted(env: Env) -> None:
    env.seed(TREE)
    out = await run_turns(env, [call("delete", file_path="/")])
    assert "cannot be deleted" in out.error(0)


async def test_glob_expands_braces_as_a_shell_does(env: Env) -> None:
    env.seed(TREE)
    out = await run_turns(
        env,
        [
            call("glob", pattern="**/*.{py,md}"),
            call("glob", pattern="{src,docs}/{app,missing}.py"),
            call("glob", pattern="{.env,README.md}"),
            call("grep", pattern="TODO", glob="*.{md,txt}", output_mode="files_with_matches"),
            call("glob", pattern="{a,b}" * 9),
        ],
    )
    assert out.ok(0).split("\n") == [
        "/README.md (27 bytes)",
        "/src/app.py (47 bytes)",
        "/src/util.py (22 bytes)",
    ]
    assert out.ok(1).split("\n") == ["/src/app.py (47 bytes)"]
    assert out.ok(2).split("\n") == ["/.env (9 bytes)", "/README.md (27 bytes)"]
    assert "/README.md" in out.ok(3)
    assert "/src/app.py" not in out.ok(3)
    assert "more than 256 alternatives" in out.error(4)
