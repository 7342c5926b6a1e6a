"""docs/architecture.md draws the layers that tests/core/test_layers.py enforces.

The document's layer drawing is a code block whose first line reads
``layers, top first`` and whose left column lists module prefixes, comma
separated (``pkg.{_a, _b}`` names several modules of one package); a layer's
names continue on the next line while they end in a comma or an open brace. The
description column starts where the header line's second heading starts. These
tests read that block, so the drawing cannot drift from the layer list the
import test checks: a module moved, added or given another layer fails here
until the document says so too. The prose is read as well (see "the prose"
below): a module it names that is gone, a layer its paragraphs leave out, or a
package its source tree does not show fails here too.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
from pathlib import Path
from types import ModuleType

DOC = Path(__file__).parents[2] / "docs" / "architecture.md"
HEADER = "layers, top first"
NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


def _layers_module() -> ModuleType:
    # Test files are not a package (pytest imports them with importlib), so the
    # one source of the layer list is loaded by path rather than copied.
    path = Path(__file__).with_name("test_layers.py")
    spec = importlib.util.spec_from_file_location("_layers_for_architecture_doc", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_LAYERS_MODULE = _layers_module()
LAYERS: list[tuple[str, ...]] = _LAYERS_MODULE.LAYERS


def _block() -> list[str]:
    """The lines of the layer drawing, header first."""
    lines = DOC.read_text().splitlines()
    starts = [i for i, line in enumerate(lines) if line.strip().startswith(HEADER)]
    assert len(starts) == 1, f"{DOC} needs one code block whose first line starts {HEADER!r}"
    start = starts[0]
    assert lines[start - 1].strip() == "```", f"the {HEADER!r} line must open a code block"
    end = next(i for i in range(start, len(lines)) if lines[i].strip() == "```")
    return lines[start:end]


def _expand(names: str) -> list[str]:
    """``a, pkg.{_x, _y}`` -> ``["a", "pkg._x", "pkg._y"]``."""

    def braces(match: re.Match[str]) -> str:
        package, inner = match.group(1), match.group(2)
        return ", ".join(f"{package}.{n.strip()}" for n in inner.split(",") if n.strip())

    flat = re.sub(r"([\w.]+)\.\{([^{}]*)\}", braces, names)
    return [n.strip() for n in flat.split(",") if n.strip()]


def doc_layers() -> list[list[str]]:
    """The document's layers, top first, each a list of module prefixes."""
    header, *rows = _block()
    column = re.search(r"\S\s{2,}(\S)", header)
    assert column is not None, f"the header needs two headings: {header!r}"
    col = column.start(1)
    layers: list[list[str]] = []
    pending = ""  # names of a layer still continuing on the next line
    for number, line in enumerate(rows, start=2):
        assert len(line) <= col or line[col - 2 : col] == "  ", (
            f"line {number} of the drawing: its names must end two spaces before "
            f"column {col + 1}, where the descriptions start: {line!r}"
        )
        names = line[:col].strip()
        if not names:
            continue  # a description wrapped onto its own line
        text = f"{pending} {names}" if pending else names
        if text.endswith(",") or text.count("{") > text.count("}"):
            pending = text
            continue
        pending = ""
        layers.append(_expand(text))
    assert not pending, f"the drawing ends inside a layer: {pending!r}"
    return layers


def _placed(module: str, prefix: str) -> bool:
    # The package's own __init__ is module "" in the walk; the drawing names it.
    if prefix == "__init__":
        return module == ""
    return module == prefix or module.startswith(f"{prefix}.")


def test_the_drawing_names_modules_only() -> None:
    bad = [n for layer in doc_layers() for n in layer if not NAME.match(n)]
    assert not bad, f"not module names: {bad}"


def test_every_module_is_placed_by_the_drawing() -> None:
    prefixes = [p for layer in doc_layers() for p in layer]
    unplaced = [m for m in _LAYERS_MODULE._modules() if not any(_placed(m, p) for p in prefixes)]
    assert not unplaced, f"modules the drawing in {DOC.name} does not place: {sorted(unplaced)}"


def test_every_name_in_the_drawing_is_a_module() -> None:
    modules = set(_LAYERS_MODULE._modules())
    stale = [p for layer in doc_layers() for p in layer if not any(_placed(m, p) for m in modules)]
    assert not stale, f"the drawing names modules that do not exist: {stale}"


def test_the_drawing_is_the_layer_list() -> None:
    drawn = [sorted(layer) for layer in reversed(doc_layers())]
    enforced = [sorted(layer) for layer in LAYERS]
    assert len(drawn) == len(enforced), (
        f"the drawing has {len(drawn)} layers, test_layers.LAYERS {len(enforced)}"
    )
    differences = [
        f"layer {i} (lowest is 0): drawn {d}, enforced {e}"
        for i, (d, e) in enumerate(zip(drawn, enforced, strict=True))
        if d != e
    ]
    assert not differences, "\n".join(differences)


# -- the prose --------------------------------------------------------------------
#
# Outside its code blocks the document names modules in backticks: ``state._files``,
# ``server.auth``, ``_core.loops``, or a private module on its own (``_session``)
# in the paragraph of its package. A dotted name whose first part is a top-level
# module or package of deepactors must lead to a module or to a name in one
# (``filediff.merge``); a lone private name must be a module somewhere in the
# package. Each layer's paragraph opens with its title in bold and the modules it
# covers in parentheses: every prefix of the drawing is named there, by itself or
# by a package that holds it. The tree under "Layout of the source tree" lists
# every package (subpackages indented under theirs) and every top-level module.

ROOT = Path(_LAYERS_MODULE.ROOT)
TICKED = re.compile(r"`([^`]+)`")
HEADING = re.compile(r"^\*\*[^*]+\*\* \(([^)]*)\)")
LAYOUT = "## Layout of the source tree"


def _prose() -> list[str]:
    """The document's paragraphs outside code blocks, each joined into one line."""
    paragraphs: list[str] = []
    current: list[str] = []
    fenced = False
    for line in [*DOC.read_text().splitlines(), ""]:
        if line.strip().startswith("```"):
            fenced = not fenced
        elif not fenced and line.strip():
            current.append(line.strip())
            continue
        if current:
            paragraphs.append(" ".join(current))
            current = []
    return paragraphs


def _modules() -> set[str]:
    return set(_LAYERS_MODULE._modules()) - {""}


def _packages() -> set[str]:
    return {".".join(p.parent.relative_to(ROOT).parts) for p in ROOT.rglob("__init__.py")} - {""}


def _resolves(name: str, modules: set[str]) -> bool:
    """Whether a dotted ``name`` leads to a module of the package, or to a name in one."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        module = ".".join(parts[:cut])
        if module in modules:
            target: object = importlib.import_module(f"deepactors.{module}")
            for attribute in parts[cut:]:
                if not hasattr(target, attribute):
                    return False
                target = getattr(target, attribute)
            return True
    return False


def _named_in_prose() -> list[str]:
    """The module-like names of the prose: dotted from a top-level module, or ``_private``."""
    top = {m.split(".")[0] for m in _modules()}
    names = []
    for paragraph in _prose():
        for ticked in TICKED.findall(paragraph):
            name = ticked.removeprefix("deepactors.")
            if not NAME.match(name):
                continue  # code, a call, a path, a value
            first = name.split(".")[0]
            if ("." in name and first in top) or (name.startswith("_") and "." not in name):
                names.append(name)
    return names


def test_the_prose_names_only_modules_that_exist() -> None:
    modules = _modules()
    last_parts = {m.rsplit(".", 1)[-1] for m in modules}
    stale = [
        n
        for n in _named_in_prose()
        if not (_resolves(n, modules) if "." in n else n in last_parts or n in modules)
    ]
    assert not stale, f"{DOC.name} names modules that do not exist: {stale}"


def _headings() -> list[list[str]]:
    """The names in the parentheses after each layer paragraph's bold title."""
    return [
        [n.removeprefix("deepactors.") for n in TICKED.findall(match.group(1)) if NAME.match(n)]
        for paragraph in _prose()
        if (match := HEADING.match(paragraph))
    ]


def test_every_layer_has_its_paragraph() -> None:
    named = {n for heading in _headings() for n in heading}
    missing = [
        p
        for layer in doc_layers()
        for p in layer
        if p not in ("__init__", "__main__")
        and not any(p == n or p.startswith(f"{n}.") for n in named)
    ]
    assert not missing, (
        f"modules of the drawing that no layer paragraph of {DOC.name} names "
        f"(in the parentheses after its bold title): {missing}"
    )


def _layout() -> list[str]:
    """The tree under the layout heading, as paths: ``server/``, ``server/relay/``, ``tools.py``."""
    lines = DOC.read_text().splitlines()
    start = lines.index(LAYOUT)
    opening = next(i for i in range(start, len(lines)) if lines[i].strip().startswith("```"))
    rows = lines[opening + 1 : lines.index("```", opening + 1)]
    assert rows[0] == "deepactors/", f"the layout's tree starts at deepactors/: {rows[0]!r}"
    paths: list[str] = []
    parents: dict[int, str] = {}
    for row in rows[1:]:
        if row and not row.startswith(" "):
            break  # tests/, bench/, docs/: beside the package
        names = re.split(r"\s{2,}", row.strip())[0] if row.strip() else ""
        indent = len(row) - len(row.lstrip())
        if not names or indent > 2 * (len(parents) + 1) or indent % 2:
            continue  # a description continued on its own line
        depth = indent // 2
        parents = {d: p for d, p in parents.items() if d < depth}
        prefix = "".join(parents[d] for d in sorted(parents))
        for name in (n.strip() for n in names.split(",")):
            if name.endswith(("/", ".py")):
                paths.append(prefix + name)
                if name.endswith("/"):
                    parents[depth] = name
    return paths


def test_the_layout_names_only_what_exists() -> None:
    missing = [p for p in _layout() if not (ROOT / p).exists()]
    assert not missing, f"the layout in {DOC.name} names what is not in deepactors/: {missing}"


def test_the_layout_shows_every_package_and_top_level_module() -> None:
    shown = set(_layout())
    wanted = {f"{p.replace('.', '/')}/" for p in _packages()} | {
        p.name for p in ROOT.glob("*.py") if not p.name.startswith("__")
    }
    left_out = sorted(wanted - shown)
    assert not left_out, f"the layout in {DOC.name} leaves out: {left_out}"


def test_every_name_a_layer_paragraph_opens_with_is_a_module() -> None:
    # The parentheses after a layer's bold title list its modules by name, bare
    # ones too (`agent`, `lc_views`), where the backticked-names check above
    # reads only dotted and private names: a module gone or renamed fails here.
    # A private name (`_subagents`) is a module of the package the heading names.
    modules = _modules()
    last_parts = {m.rsplit(".", 1)[-1] for m in modules}
    stale = [
        n
        for heading in _headings()
        for n in heading
        if n not in modules
        and not any(m.startswith(f"{n}.") for m in modules)
        and not (n.startswith("_") and n in last_parts)
    ]
    assert not stale, f"layer paragraphs of {DOC.name} name modules that do not exist: {stale}"


FOLDER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(/[A-Za-z_][A-Za-z0-9_]*)*/$")


def test_the_prose_names_only_folders_that_exist() -> None:
    # A folder named in the prose (`actors/`, `server/relay/`) is one of the
    # package's, or one beside it at the repository's root (`tests/`, `bench/`).
    repository = ROOT.parent
    named = [
        ticked.removeprefix("deepactors/")
        for paragraph in _prose()
        for ticked in TICKED.findall(paragraph)
        if FOLDER.match(ticked.removeprefix("deepactors/"))
    ]
    stale = [f for f in named if not (ROOT / f).is_dir() and not (repository / f).is_dir()]
    assert not stale, f"{DOC.name} names folders that do not exist: {stale}"
