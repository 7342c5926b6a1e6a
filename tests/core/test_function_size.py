"""No function of the package runs past 80 lines; modules past ~500 are flagged.

A function is measured as its body reads: from the line after its docstring
(or, without one, after its signature) to its last line, blank lines, comments
and nested functions included. Its signature and its docstring do not count:
a signature with a keyword per line is the function's interface, a docstring
its documentation, and counting them would reward folding both, which is the
squeezing this rule replaces.

A function past the limit does more than one thing: split it along its seam
into named helpers that each do one of them (docs/architecture.md, "Sizes").

Measured whole (signature and docstring too), a function is held to the same
limit: one whose keywords need more than that to declare and document takes
too many of them, and its seam is an option value (``create_app``'s
``AppOptions``, ``create_deep_agent``'s ``AgentOptions``: typed keywords
documented where they are defined), not shorter documentation.

Modules have a guideline, not a cap: one idea reads in about 100-300 lines, and
one past ~500 is a prompt to look for a second idea in it. A module over it is
named in a warning (shown in pytest's warnings summary, never an error: see
``filterwarnings`` in pyproject.toml), so it stays visible without inviting
anyone to fold lines to get under a number.
"""

from __future__ import annotations

import ast
import warnings
from pathlib import Path

import deepactors

ROOT = Path(deepactors.__file__).parent
FUNCTION_LIMIT = 80
MODULE_GUIDELINE = 500


def body_lines(node: ast.FunctionDef | ast.AsyncFunctionDef, lines: list[str]) -> int:
    """The lines of ``node``'s body as it reads (``lines``: its module's), no docstring."""
    assert node.end_lineno is not None
    first = node.body[0]
    if (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        assert first.end_lineno is not None
        return node.end_lineno - first.end_lineno
    # Comments above the first statement are the body's too; the signature ends
    # no later than its last argument or return annotation.
    signature = [node.lineno, *(getattr(a, "end_lineno", 0) or 0 for a in ast.walk(node.args))]
    if node.returns is not None:
        signature.append(node.returns.end_lineno or 0)
    start = first.lineno
    while start - 1 > max(signature) and lines[start - 2].lstrip().startswith("#"):
        start -= 1
    return node.end_lineno - start + 1


def _functions() -> dict[str, int]:
    """Every function and method of the package (nested ones too), by place."""
    out: dict[str, int] = {}
    for path in sorted(ROOT.rglob("*.py")):
        text = path.read_text()
        lines = text.splitlines()
        for node in ast.walk(ast.parse(text, str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                where = f"{path.relative_to(ROOT)}:{node.lineno} {node.name}"
                out[where] = body_lines(node, lines)
    return out


def test_no_function_is_over_the_limit() -> None:
    over = [f"{where}: {n}" for where, n in _functions().items() if n > FUNCTION_LIMIT]
    assert not over, (
        f"functions whose body is over {FUNCTION_LIMIT} lines (split each along its seam):\n"
        + "\n".join(over)
    )


def test_no_function_is_over_the_limit_measured_whole() -> None:
    over = []
    for path in sorted(ROOT.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                assert node.end_lineno is not None
                whole = node.end_lineno - node.lineno + 1
                if whole > FUNCTION_LIMIT:
                    over.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}: {whole}")
    assert not over, (
        f"functions over {FUNCTION_LIMIT} lines with their signature and docstring "
        "(group their keywords into an option value):\n" + "\n".join(over)
    )


def test_the_measure_counts_the_body_as_it_reads() -> None:
    source = '''
def documented(
    a: int,
    b: int,
) -> int:
    """A docstring

    of several lines.
    """
    # a comment counts
    x = a

    def inner() -> int:
        return b

    return x + inner()


def undocumented(a: int) -> int:
    # a comment above the first statement counts
    return a


def one_line() -> int: return 1
'''
    lines = source.splitlines()
    measured = {
        node.name: body_lines(node, lines)
        for node in ast.parse(source).body
        if isinstance(node, ast.FunctionDef)
    }
    assert measured == {"documented": 7, "undocumented": 2, "one_line": 1}


def test_modules_past_the_guideline_are_named() -> None:
    sizes = {
        str(path.relative_to(ROOT)): len(path.read_text().splitlines())
        for path in sorted(ROOT.rglob("*.py"))
    }
    for module, n in sizes.items():
        if n > MODULE_GUIDELINE:
            warnings.warn(
                f"module past the size guideline: {module} has {n} lines "
                f"(~{MODULE_GUIDELINE}): is it one idea? (docs/architecture.md, Sizes)",
                UserWarning,
                stacklevel=1,
            )
