"""A griffe extension: Sphinx roles in deepactors' docstrings become cross-references.

The docstrings are Google style with Sphinx's inline roles (``:class:`~x.Y```,
``:meth:`generate```), as trio's and httpx's read in an editor. mkdocstrings
renders Markdown, where a role would show as its raw text, so each one becomes an
optional autorefs link: resolved in the scope of the object whose docstring holds
it (a method's class, its module, that module's imports), shown as code, and
linked when the reference documents that object; otherwise plain code, never a
warning (a role may name something outside the reference, such as ``anyio``).
RST's ``::`` before a literal block becomes a colon.
"""

from __future__ import annotations

import re
from html import escape
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(class|func|meth|attr|mod|exc|data|obj|const):`(~?)([^`]+)`")
LITERAL_BLOCK = re.compile(r"(\S)::\n")


def _identifier(obj: griffe.Object, target: str) -> str:
    """The full path ``target`` names in ``obj``'s scope, or ``target`` itself."""
    first, _, rest = target.partition(".")
    scope: griffe.Object | None = obj
    while scope is not None:
        try:
            full = scope.resolve(first)
        except Exception:  # griffe raises NameResolutionError, or finds an alias it cannot follow
            scope = scope.parent
            continue
        return f"{full}.{rest}" if rest else full
    return target


def _convert(obj: griffe.Object, text: str) -> str:
    def replace(match: re.Match[str]) -> str:
        role, short, target = match.group(1), match.group(2), match.group(3).strip()
        title_target = re.fullmatch(r"(.+?)\s*<(.+)>", target)
        if title_target:
            title, target = title_target.group(1), title_target.group(2)
        else:
            title = target.rsplit(".", 1)[-1] if short else target
            if role in ("func", "meth"):
                title += "()"
        identifier = _identifier(obj, target.lstrip("."))
        return (
            f'<autoref identifier="{escape(identifier)}" optional>'
            f"<code>{escape(title)}</code></autoref>"
        )

    return LITERAL_BLOCK.sub(r"\1:\n", ROLE.sub(replace, text))


class SphinxRoles(griffe.Extension):
    """Rewrites every docstring of the package once it is loaded."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        seen: set[int] = set()
        stack: list[griffe.Object] = [pkg]
        while stack:
            obj = stack.pop()
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            if obj.docstring is not None:
                obj.docstring.value = _convert(obj, obj.docstring.value)
            for member in obj.members.values():
                if not member.is_alias:
                    stack.append(member)  # type: ignore[arg-type]
