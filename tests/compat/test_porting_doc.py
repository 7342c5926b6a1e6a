"""docs/porting.md covers deepagents' imports, and what it tells you to import exists.

The fixture lists every name deepagents' examples and tests import from
``deepagents``, ``langchain.agents[.*]`` and ``langgraph`` (issue 42 item 6): the
import table must say, for each, what to write.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

ROOT = Path(__file__).parents[2]
DOC = (ROOT / "docs" / "porting.md").read_text()
NAMES = ROOT / "tests" / "compat" / "fixtures" / "deepagents_imports.txt"


def deepagents_imports() -> list[tuple[str, str]]:
    out = []
    for line in NAMES.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            module, name = line.split()
            out.append((module, name))
    return out


def test_the_import_table_names_every_import_of_deepagents_examples_and_tests() -> None:
    missing = []
    for module, name in deepagents_imports():
        as_module = f"{module}.{name}"  # a module it imports: deepagents.backends.sandbox
        named = f"`{name}`" in DOC or f"`{name}(" in DOC or as_module in DOC
        if not named:
            missing.append(as_module)
    assert missing == []


def test_every_deepactors_name_the_page_gives_exists() -> None:
    page = DOC.split("## Not there yet")[0]  # what is not there yet is named as such
    # "`deepactors.middleware.AsyncSubAgentMiddleware`" and "from deepactors.x import a, b"
    dotted = set(re.findall(r"`(deepactors(?:\.[a-z_]+)+\.[A-Za-z_]+)[`(]", page))
    for module, names in re.findall(
        r"from (deepactors[\w.]*) import ([\w, ]+?)(?: as \w+)?[`(\n]", DOC
    ):
        dotted.update(f"{module}.{n.strip()}" for n in names.split(","))
    assert len(dotted) > 20  # the pattern still finds the page's names
    absent = []
    for path in sorted(dotted):
        module, _, name = path.rpartition(".")
        try:
            found = hasattr(importlib.import_module(module), name)
        except ImportError:
            found = importlib.util.find_spec(path) is not None
        if not found:
            absent.append(path)
    assert absent == []
