"""Modules that moved keep their old import paths, as deprecated aliases that warn.

``deepactors.factory`` and ``deepactors.demo`` moved into the ``assembly`` package
(``deepactors.assembly``, ``deepactors.assembly.demo``), ``deepactors.lc_views``
into the one LangChain package (``deepactors.langchain.views``). Code written
against the old paths keeps working, gets the very same objects, and is told
where they went.
"""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

MOVED = [
    ("deepactors.factory", "deepactors.assembly", ["create_deep_agent", "DEFAULT_PROMPT"]),
    (
        "deepactors.demo",
        "deepactors.assembly.demo",
        ["run_demo", "build_demo_agent", "print_event", "MEMORY_PATH", "ResearchReport"],
    ),
    (
        "deepactors.lc_views",
        "deepactors.langchain.views",
        ["LangGraphStream", "StreamPart", "values_to_lc", "message_from_lc", "STREAM_MODES"],
    ),
]


@pytest.mark.parametrize(("old", "new", "names"), MOVED, ids=[m[0] for m in MOVED])
def test_an_old_path_warns_and_gives_the_same_objects(old: str, new: str, names: list[str]) -> None:
    sys.modules.pop(old, None)  # the warning is given when the module is first imported
    with pytest.warns(DeprecationWarning, match=new.replace(".", r"\.")):
        alias = importlib.import_module(old)
    moved = importlib.import_module(new)
    for name in names:
        assert getattr(alias, name) is getattr(moved, name), name


def test_the_package_itself_imports_no_deprecated_path() -> None:
    # A user who never names an old path is never told about it: the package, the
    # server and the command import the new paths. A fresh interpreter, so that
    # what this process imported already does not hide an import.
    olds = [old for old, _, _ in MOVED]
    code = (
        "import sys, deepactors, deepactors.assembly.demo, deepactors.server, deepactors.cli\n"
        f"print(sorted(set({olds!r}) & set(sys.modules)))"
    )
    done = subprocess.run(
        [sys.executable, "-W", "error::DeprecationWarning", "-c", code],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
