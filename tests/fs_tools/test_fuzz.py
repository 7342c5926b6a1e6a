"""Fuzz: random tool-call arguments to every file tool, on every backend.

A model can send anything: wrong types, missing or extra arguments, huge
strings, ``..``, NUL bytes, odd Unicode, Windows paths, globs and regexes that
are malformed or catastrophic. Whatever it sends, through a real agent (a
scripted model issuing the calls), every call must come back as a result the
model reads (an error result for what is refused, never a crash of the run or
a stray Python exception), and nothing outside the backend's root may change:
no file beside the root folder on disk, no other store namespace.
"""

from __future__ import annotations

import itertools
import os
import re
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deepactors import AssistantMessage, ToolCall, ToolMessage, create_deep_agent
from deepactors.backends import (
    Backend,
    CompositeBackend,
    FilesystemBackend,
    StateBackend,
    StoreBackend,
)
from deepactors.middleware._filesystem import FilesystemMiddleware
from deepactors.models import FunctionModel
from deepactors.persistence import MemoryStore

pytestmark = pytest.mark.anyio

# The arguments of each tool; execute is offered on every backend (none of these
# can run commands, so it must answer with an error). LocalShellBackend is left
# out: its shell is by design not confined to the root.
TOOLS: dict[str, tuple[str, ...]] = {
    "ls": ("path",),
    "read_file": ("file_path", "offset", "limit"),
    "write_file": ("file_path", "content"),
    "edit_file": ("file_path", "old_string", "new_string", "replace_all"),
    "delete": ("file_path",),
    "glob": ("pattern", "path"),
    "grep": ("pattern", "path", "glob", "output_mode"),
    "execute": ("command", "timeout"),
}

WEIRD_PATHS = [
    "", "/", ".", "..", "../x", "/..", "/../outside/secret.txt", "a/../../b", "/a/./b//c/",
    "~", "~/x", "C:\\x", "c:/x", "\\\\srv\\share", "a\0b", "/link", "/link/secret.txt",
    "/link/../x", "/dev/null", "/proc/self/environ", "/tmp", "\u202eevil", "é/ñ.txt",
    " ", "/ /", "*", "**", "/**/..", "[", "a\nb", "\ud800", "/" * 300, "x" * 300,
]  # fmt: skip
WEIRD_PATTERNS = [
    "(a+)+$", "(a|a)*b", r"(\w+) \1", "(?=x)", "(?<!x)y", "[", "(", "*", "**/*", "**/..",
    "../*", "[z-a]", "[!/]", "\\", "\0", "a{1001}", r"\w{1000}", "(?x) a", r"\p{Greek}",
    ".*", "^$", "[[:alpha:]]", "*a" * 20 + "*b", "{a,b}", "\ud800",
]  # fmt: skip

paths = st.one_of(
    st.sampled_from(WEIRD_PATHS),
    st.text(max_size=20),
    st.lists(st.sampled_from(["a", "b", "..", ".", "", "*", "é", ".git", "link"]), max_size=5).map(
        "/".join
    ),
    st.lists(st.sampled_from(["a", "b", ".git", "d"]), min_size=1, max_size=3).map(
        lambda parts: "/" + "/".join(parts)
    ),
)
texts = st.one_of(
    st.text(max_size=30),
    st.sampled_from(WEIRD_PATTERNS),
    st.integers(50_000, 100_000).map(lambda n: "x" * n),  # a huge string
    st.sampled_from(["a", "b\n", "\r\n", "line\n" * 50]),
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([-1, 0, 1, 10**30, "5", "content", "files_with_matches", "count"]),
)
any_value = st.recursive(
    st.one_of(scalars, texts),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=5,
)


def _value(param: str) -> st.SearchStrategy[Any]:
    if param in ("path", "file_path", "glob"):
        typed: st.SearchStrategy[Any] = paths
    elif param in ("pattern", "content", "old_string", "new_string", "command"):
        typed = st.one_of(texts, paths)
    else:
        typed = scalars
    return st.one_of(typed, typed, typed, any_value)  # mostly the right type


@st.composite
def tool_call(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    name = draw(st.sampled_from(sorted(TOOLS)))
    args: dict[str, Any] = {}
    for param in TOOLS[name]:
        if draw(st.integers(0, 5)):  # sometimes missing
            args[param] = draw(_value(param))
    if not draw(st.integers(0, 9)):
        args[draw(st.text(min_size=1, max_size=8))] = draw(any_value)  # an unknown argument
    return name, args


turns = st.lists(st.lists(tool_call(), min_size=1, max_size=4), min_size=1, max_size=3)

# What a crash inside a tool looks like in its result ("TypeError: ..."): every
# refusal must be a deliberate error message instead.
CRASH = re.compile(r"^[A-Z]\w*(Error|Exception|Exit|Interrupt)\b")


@dataclass
class World:
    """A backend, and what lies outside its root."""

    backend: Backend
    outside: Path
    store: MemoryStore | None = None


KINDS = ["state", "filesystem", "store", "composite"]
_counter = itertools.count()


def make_world(kind: str, tmp_path: Path) -> World:
    base = tmp_path / f"w{next(_counter)}"
    root, outside = base / "root", base / "outside"
    root.mkdir(parents=True)
    outside.mkdir()
    (outside / "secret.txt").write_text("secret\n")
    (outside / "sub").mkdir()
    (outside / "sub" / "deep.txt").write_text("deep\n")
    # In the root: ordinary files, and a symlink that leads out of it.
    (root / "a").mkdir()
    (root / "a" / "b.txt").write_text("alpha\nbeta\n")
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("[core]\n")
    os.symlink(outside, root / "link")
    store = MemoryStore()
    if kind == "state":
        backend: Backend = StateBackend()
    elif kind == "filesystem":
        backend = FilesystemBackend(root, use_ripgrep=None)
    elif kind == "store":
        backend = StoreBackend(store, namespace=("files",))
    else:
        backend = CompositeBackend(
            FilesystemBackend(root), {"/memories/": StoreBackend(store, namespace=("mem",))}
        )
    return World(backend=backend, outside=outside, store=store)


def snapshot(folder: Path) -> dict[str, tuple[int, bytes | str]]:
    """Every entry under ``folder``: its mode and content (or symlink target)."""
    out: dict[str, tuple[int, bytes | str]] = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in dirnames + filenames:
            full = Path(dirpath) / name
            st_ = full.lstat()
            if full.is_symlink():
                out[str(full)] = (st_.st_mode, os.readlink(full))
            elif full.is_file():
                out[str(full)] = (st_.st_mode, full.read_bytes())
            else:
                out[str(full)] = (st_.st_mode, b"")
    return out


@dataclass
class Fixture:
    """A world and one agent over it, shared by the examples of one test."""

    world: World
    outside: dict[str, tuple[int, bytes | str]]
    agent: Any
    script: deque[AssistantMessage | str]


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


_fixtures: dict[tuple[str, Path], Fixture] = {}


async def fixture_for(kind: str, tmp_path: Path) -> Fixture:
    """Build the agent once per test: building its tool schemas is the slow part."""
    key = (kind, tmp_path)
    if key not in _fixtures:
        world = make_world(kind, tmp_path)
        assert world.store is not None
        await world.store.put(("elsewhere",), "/keep.txt", {"content": "keep\n"})
        script: deque[AssistantMessage | str] = deque()
        agent = create_deep_agent(
            FunctionModel(lambda request: script.popleft()),
            middleware=[FilesystemMiddleware(execute=True)],
            backend=world.backend,
        )
        outside = await anyio.to_thread.run_sync(snapshot, world.outside)
        _fixtures[key] = Fixture(world=world, outside=outside, agent=agent, script=script)
    return _fixtures[key]


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(turns=turns)
async def test_any_arguments_give_results_and_touch_nothing_outside_the_root(
    kind: str, tmp_path: Path, turns: list[list[tuple[str, dict[str, Any]]]]
) -> None:
    fx = await fixture_for(kind, tmp_path)
    answers = [
        AssistantMessage(tool_calls=[ToolCall(name=n, args=a) for n, a in turn]) for turn in turns
    ]
    fx.script.clear()
    fx.script.extend([*answers, "done"])
    with anyio.fail_after(30):
        state = await fx.agent.ainvoke({"messages": [{"role": "user", "content": "go"}]})
    results = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    calls = [c for answer in answers for c in answer.tool_calls]
    assert [r.tool_call_id for r in results] == [c.id for c in calls]
    for call, result in zip(calls, results, strict=True):
        assert isinstance(result.content, str)
        if result.status == "error":
            assert not CRASH.match(result.text), (call.name, call.args, result.text[:300])
    assert state["messages"][-1].text == "done"
    # Nothing outside the root ever changed: the sibling folder, the other namespace.
    outside = fx.world.outside
    assert await anyio.to_thread.run_sync(snapshot, outside) == fx.outside
    assert sorted(p.name for p in outside.parent.iterdir()) == ["outside", "root"]
    assert fx.world.store is not None
    kept = await fx.world.store.get(("elsewhere",), "/keep.txt")
    assert kept is not None
    assert kept.value == {"content": "keep\n"}
