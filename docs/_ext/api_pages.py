"""A mkdocs hook: each API reference page documents its module's ``__all__``.

A reference page is one line, ``::: deepactors.models``. Before mkdocstrings reads
it, this hook reads the module's ``__all__`` (from its source, so an optional
extra need not be installed to build) and writes the directive out: the names
that ``deepactors`` itself exports are documented on the ``deepactors`` page and
listed here as links, the others are documented here, in ``__all__``'s order. So
every public name is documented once, and a name added to an ``__all__`` appears
without editing the page.
"""

from __future__ import annotations

import ast
import contextlib
import re
from functools import cache
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError

ROOT = Path(__file__).resolve().parents[2]
DIRECTIVE = re.compile(r"^::: (deepactors(?:\.[a-z_.]+)?)[ \t]*$", re.MULTILINE)


def _source(module: str) -> Path:
    path = ROOT.joinpath(*module.split("."))
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


@cache
def bound(module: str) -> frozenset[str]:
    """The names ``module`` binds at its top level (a lazy ``__getattr__`` name is not)."""
    names: set[str] = set()
    body = list(ast.parse(_source(module).read_text()).body)
    while body:
        node = body.pop(0)
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            body.extend(node.body)  # griffe documents what the type checker sees
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    return frozenset(names)


def lazy_home(module: str, name: str) -> str | None:
    """For a name ``module`` loads on first use, the public submodule that defines it."""
    folder = ROOT.joinpath(*module.split("."))
    if not folder.is_dir():
        return None
    for child in sorted(folder.glob("*.py")):
        if child.stem.startswith("_"):
            continue
        sub = f"{module}.{child.stem}"
        with contextlib.suppress(ValueError):
            if name in exported(sub):
                return f"{sub}.{name}"
    return None


@cache
def exported(module: str) -> tuple[str, ...]:
    """The names in ``module.__all__``, read from its source without importing it."""
    source = _source(module)
    for node in ast.parse(source.read_text()).body:
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
                value = ast.literal_eval(node.value)  # type: ignore[arg-type]
                return tuple(value)
    raise ValueError(f"{source} has no __all__")


def is_module(dotted: str) -> bool:
    """Whether ``dotted`` names a module or package of this source tree."""
    path = ROOT.joinpath(*dotted.split("."))
    return path.is_dir() or path.with_suffix(".py").is_file()


def documented_here(module: str) -> list[str]:
    """The names of ``module.__all__`` whose full documentation is on its page."""
    top = set() if module == "deepactors" else set(exported("deepactors"))
    return [
        n
        for n in exported(module)
        if n not in top and not is_module(f"{module}.{n}") and n in bound(module)
    ]


def _directive(module: str) -> str:
    names = exported(module)
    own = documented_here(module)
    modules = [n for n in names if is_module(f"{module}.{n}")]
    lazy = {n: lazy_home(module, n) for n in names if n not in bound(module)}
    elsewhere = [n for n in names if n not in own and n not in modules and n not in lazy]
    members = "[" + ", ".join(own) + "]" if own else "false"
    text = f"::: {module}\n    options:\n      members: {members}\n"
    if modules:
        links = ", ".join(f"[`{module}.{n}`][{module}.{n}]" for n in modules)
        text += f"\nSubmodules exported by `{module}`, each on a page of its own: {links}.\n"
    if lazy:
        missing = [n for n, home in lazy.items() if home is None]
        if missing:
            raise PluginError(f"{module}: lazy names with no public home: {missing}")
        links = ", ".join(f"[`{n}`][{home}]" for n, home in lazy.items())
        text += f"\nLoaded by `{module}` on first use (an optional SDK behind them): {links}.\n"
    if elsewhere:
        links = ", ".join(f"[`{n}`][deepactors.{n}]" for n in elsewhere)
        text += (
            f"\nAlso exported by `{module}`, and documented with the package's "
            f"everyday names: {links}.\n"
        )
    return text


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    if not page.file.src_uri.startswith("reference/"):
        return markdown
    return DIRECTIVE.sub(lambda m: _directive(m.group(1)), markdown)


def on_page_content(html: str, page: Any, **kwargs: Any) -> str:
    """Fail the build when a name a page should document has no heading on it."""
    if not page.file.src_uri.startswith("reference/"):
        return html
    for module in DIRECTIVE.findall(page.markdown or ""):
        missing = [n for n in documented_here(module) if f'id="{module}.{n}"' not in html]
        if missing:
            raise PluginError(f"{page.file.src_uri}: {module}.__all__ names left out: {missing}")
    return html
