"""The site's structure: every public module has a reference page in the navigation,
and every relative link of README.md leads to a file.

``mkdocs build --strict`` (in .ci/run) checks the links inside the site and that
each reference page documents every name of its module's ``__all__``; these checks
cover what the build cannot see: a public module without a page, and the README,
which is not a page of the site.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from ._blocks import ROOT

PACKAGE = ROOT / "deepactors"
REFERENCE = ROOT / "docs" / "reference"


def _defines_all(path: Path) -> bool:
    tree = ast.parse(path.read_text())
    return any(
        isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
        for node in tree.body
    )


def public_modules() -> list[str]:
    """Modules whose dotted path has no private part and that define ``__all__``."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if parts[-1] == "__main__" or any(p.startswith("_") for p in parts):
            continue
        if _defines_all(path):
            found.append(".".join(parts))
    return found


def test_every_public_module_has_a_reference_page_in_the_navigation() -> None:
    nav = (ROOT / "mkdocs.yml").read_text()
    missing = []
    for module in public_modules():
        name = "index" if module == "deepactors" else module.removeprefix("deepactors.")
        page = REFERENCE / f"{name}.md"
        if not page.exists() or f"::: {module}\n" not in page.read_text():
            missing.append(f"{module}: no {page.relative_to(ROOT)} with '::: {module}'")
        elif f"reference/{name}.md" not in nav:
            missing.append(f"{module}: reference/{name}.md is not in mkdocs.yml's nav")
    assert missing == []


def test_every_page_is_in_the_navigation() -> None:
    nav = (ROOT / "mkdocs.yml").read_text()
    pages = [
        p.relative_to(ROOT / "docs").as_posix()
        for p in (ROOT / "docs").rglob("*.md")
        if "_ext" not in p.parts
    ]
    assert [p for p in pages if f" {p}\n" not in nav] == []


def test_the_readme_links_lead_to_files() -> None:
    text = (ROOT / "README.md").read_text()
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    relative = [t for t in targets if "://" not in t]
    assert relative, "README.md links into the docs"
    assert [t for t in relative if not (ROOT / t).exists()] == []


def test_the_readme_is_a_front_page() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 200
    headings = [line for line in lines if line.startswith("## ")]
    assert headings[0] == "## Set-up on a fresh machine"
