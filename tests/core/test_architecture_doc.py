"""docs/architecture.md draws the layers that tests/core/test_layers.py enforces.

The document's layer drawing is a code block whose first line reads
``layers, top first`` and whose left column lists module prefixes, comma
separated (``pkg.{_a, _b}`` names several modules of one package); a layer's
names continue on the next line while they end in a comma or an open brace. The
description column starts where the header line's second heading starts. These
tests read that block, so the drawing cannot drift from the layer list the
import test checks: a module moved, added or given another layer fails here
until the document says so too.
"""

from __future__ import annotations

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
