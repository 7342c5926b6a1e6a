"""The package's imports point one way, down the layers, and never in a circle.

Every import counts, as the house rules say: module level, inside functions,
under ``TYPE_CHECKING`` (a type is a dependency too). A new module must be given
a layer here, so where it sits is a decision, not an accident.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import deepactors

ROOT = Path(deepactors.__file__).parent

# Lowest first. A module may import only from its own layer or below. Longest
# prefix wins, so a package can sit in one layer and one of its modules in another.
LAYERS: list[tuple[str, ...]] = [
    (
        "errors",
        "messages",
        "history",
        "_sizes",
        "_core",
        "models.cache",
    ),
    ("filediff", "state", "interrupts", "events", "budget", "limits"),
    ("persistence", "backends"),
    # LangChain's package face sits high (create_deep_agent and its agent); what
    # it runs on import and its views, messages and tools sit here (see
    # test_imports_point_down_the_layers on a package's face). lc_views is the
    # views' deprecated old path.
    (
        "context",
        "tools",
        "langchain.views",
        "langchain._files",
        "langchain._specs",
        "langchain._messages",
        "langchain._tools",
        "lc_views",
        "tracing",
    ),
    ("models", "hooks", "langchain._chat_model"),
    # Middleware that spawns no children sits below the runtime.
    (
        "middleware._caching",
        "middleware._compact",
        "middleware._context_editing",
        "middleware._context_stack",
        "middleware._fallback",
        "middleware._filesystem",
        "middleware._fs_format",
        "middleware._fs_tools",
        "middleware._hitl",
        "middleware._limits",
        "middleware._memory",
        "middleware._patch",
        "middleware._permissions",
        "middleware._retry",
        "middleware._schema",
        "middleware._skill_parse",
        "middleware._skills",
        "middleware._structured",
        "middleware._summarization",
        "middleware._summary_call",
        "middleware._summary_policy",
        "middleware._todo",
        "middleware._tokens",
        "middleware._tool_retry",
        "middleware._transcript",
    ),
    ("actors",),
    # A subagent run elsewhere: a ChildRunner, beside the local children of actors
    # (another server's, an A2A agent's, or a Ray worker's).
    ("remote", "remote.a2a", "placement"),
    ("middleware._subagents", "middleware"),
    ("agent", "mcp", "acp"),
    # The assembly; factory and demo are its deprecated old paths.
    ("assembly", "factory", "demo", "langchain"),
    # The server, and the other protocols it speaks (each a folder of its own).
    ("server", "server.agui", "server.aisdk", "server.a2a"),
    ("cli", "__main__", "__init__"),
]


def _modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _targets(name: str, path: Path, known: set[str], nodes: list[ast.stmt]) -> set[str]:
    """The package modules the import statements among ``nodes`` name."""
    is_pkg = path.name == "__init__.py"
    package = name if is_pkg else name.rpartition(".")[0]
    found: set[str] = set()
    for node in nodes:
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names if a.name.startswith("deepactors")]
            targets = [t.removeprefix("deepactors").lstrip(".") for t in targets]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                up = package.split(".") if package else []
                up = up[: len(up) - node.level + 1]
                base = ".".join([*up, *([node.module] if node.module else [])])
            elif (node.module or "").startswith("deepactors"):
                base = (node.module or "").removeprefix("deepactors").lstrip(".")
            else:
                continue
            for alias in node.names:
                sub = f"{base}.{alias.name}" if base else alias.name
                targets.append(sub if sub in known else base)
        found.update(targets)
    found.discard(name)
    return found


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The package modules ``name`` imports (relative names, '' for the package)."""
    nodes = list(ast.walk(ast.parse(path.read_text(), str(path))))
    return _targets(name, path, known, [n for n in nodes if isinstance(n, ast.stmt)])


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _run_on_import(statements: list[ast.stmt]) -> list[ast.stmt]:
    """The statements of a module body that run when it is imported: not those of
    its functions and classes, nor those under ``if TYPE_CHECKING:``."""
    out: list[ast.stmt] = []
    for node in statements:
        if isinstance(node, ast.If):
            out += [] if _type_checking(node.test) else _run_on_import(node.body)
            out += _run_on_import(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody):
                out += _run_on_import(block)
            for handler in node.handlers:
                out += _run_on_import(handler.body)
        elif isinstance(node, ast.With):
            out += _run_on_import(node.body)
        elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.append(node)
    return out


@functools.cache
def _face_runs(package: str) -> frozenset[str]:
    """What a package's ``__init__`` imports when it runs (first, before any module
    of the package): its imports at module level, outside ``if TYPE_CHECKING:``."""
    modules = _modules()
    path = modules[package]
    body = ast.parse(path.read_text(), str(path)).body
    return frozenset(_targets(package, path, set(modules), _run_on_import(body)))


def _layer(name: str) -> int:
    # The package's own __init__ (name "") re-exports the public API: the top.
    best, rank = -1, (len(LAYERS) - 1 if name == "" else -1)
    for i, layer in enumerate(LAYERS):
        for prefix in layer:
            if (name == prefix or name.startswith(f"{prefix}.")) and len(prefix) > best:
                best, rank = len(prefix), i
    return rank


def test_every_module_has_a_layer() -> None:
    unplaced = [m for m in _modules() if _layer(m) < 0]
    assert not unplaced


def _ancestors(module: str) -> list[str]:
    """``a.b.c`` -> ``["a.b", "a"]``: the packages whose ``__init__`` runs first."""
    out = [module]
    while "." in out[-1]:
        out.append(out[-1].rpartition(".")[0])
    return out[1:]


def test_imports_point_down_the_layers() -> None:
    modules = _modules()
    known = set(modules)
    upward = []
    for name, path in modules.items():
        for target in _imports(name, path, known):
            if name != target and _layer(target) > _layer(name):
                upward.append(f"{name} (layer {_layer(name)}) imports {target} ({_layer(target)})")
            # Importing a module runs its packages' __init__ first: from outside
            # a package, what that __init__ runs counts as imported too. A face
            # that names higher modules only for type checkers (and loads them
            # on first use, as langchain's does) sits high by its own imports,
            # yet runs nothing higher when a lower module of its package is imported.
            for package in _ancestors(target):
                if name == package or name.startswith(f"{package}."):
                    continue
                for ran in _face_runs(package):
                    # The face's own package and those above it are this loop's.
                    outer = [t for t in _ancestors(ran) if not f"{package}.".startswith(f"{t}.")]
                    for t in [ran, *outer]:
                        if _layer(t) > _layer(name):
                            upward.append(
                                f"{name} (layer {_layer(name)}) imports {target}, whose "
                                f"package {package} runs {t} ({_layer(t)})"
                            )
    assert not upward, "\n".join(sorted(upward))


def test_no_module_reaches_into_another_packages_private_module() -> None:
    # A private module (``_x``) serves the package it is in, subpackages included:
    # ``persistence._aiosqlite`` is for ``persistence``; ``_loops`` for everyone.
    modules = _modules()
    known = set(modules)
    reaching = []
    for name, path in modules.items():
        for target in _imports(name, path, known):
            parent, _, last = target.rpartition(".")
            inside = not parent or name == parent or name.startswith(f"{parent}.")
            if last.startswith("_") and not last.startswith("__") and not inside:
                reaching.append(f"{name} imports {target}")
    assert not reaching, "\n".join(sorted(reaching))


def test_there_is_no_import_circle() -> None:
    modules = _modules()
    known = set(modules)
    graph = {name: _imports(name, path, known) & known for name, path in modules.items()}
    state: dict[str, int] = {}
    circles: list[list[str]] = []

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                circles.append([*trail[trail.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt, [*trail, nxt])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    assert not circles, circles
