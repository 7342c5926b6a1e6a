"""Reading a ``SKILL.md``: YAML front matter, checked against the Agent Skills rules.

A skill file starts with a front matter block::

    ---
    name: web-research              # required: <= 64 chars, a-z 0-9 and single hyphens
    description: Find and cite ...  # required: <= 1024 chars (longer is cut)
    license: MIT                    # optional
    compatibility: needs network    # optional: <= 500 chars (longer is cut)
    metadata: {owner: research}     # optional: string keys and values
    allowed-tools: read_file grep   # optional: a space-separated string or a list
    ---
    # The instructions (read by the agent when the skill applies)

A missing or broken front matter, or a missing ``name`` or ``description``, makes
the skill unusable (it is skipped, with the reason). Lesser faults (a name that
does not match its folder, an over-long description) are fixed or accepted and
reported as warnings, as deepagents does.

The front matter is bounded before and while it is parsed, since the agent can
write skill files itself and one bad file must not break every later run of a
thread: at most :data:`MAX_FRONT_MATTER_CHARS` characters, nested at most
:data:`MAX_FRONT_MATTER_DEPTH` levels, at most :data:`MAX_FRONT_MATTER_NODES`
values with every alias counted as a copy of its anchor (so a "billion laughs"
alias bomb is refused), and parsed within :data:`MAX_PARSE_SECONDS`. A file over
any of them is skipped with the reason, like any other broken file.
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, final

import anyio.to_thread

if TYPE_CHECKING:
    import yaml
    from yaml.nodes import Node

__all__ = [
    "MAX_COMPATIBILITY",
    "MAX_DESCRIPTION",
    "MAX_FRONT_MATTER_CHARS",
    "MAX_FRONT_MATTER_DEPTH",
    "MAX_FRONT_MATTER_LINES",
    "MAX_FRONT_MATTER_NODES",
    "MAX_NAME",
    "MAX_PARSE_SECONDS",
    "Parsed",
    "Skill",
    "parse_skill",
]

MAX_NAME = 64
MAX_DESCRIPTION = 1024
MAX_COMPATIBILITY = 500
MAX_FRONT_MATTER_LINES = 500
"""The closing ``---`` must come within this many lines (only these are read)."""

MAX_FRONT_MATTER_CHARS = 128 * 1024
"""Larger front matter is refused unparsed.

The fields it may hold come to a few KiB (name, description, compatibility, a
little metadata); this leaves room for generous metadata while keeping the
pure-Python YAML parse of the largest allowed block well under a second.
"""

MAX_FRONT_MATTER_DEPTH = 32
"""Collections nested deeper than this are refused while parsing.

PyYAML composes nested collections by recursion, so a few thousand ``[`` would
exhaust Python's stack; the check stops long before. Real front matter nests two
or three levels (``metadata: {owner: x}``).
"""

MAX_FRONT_MATTER_NODES = 10_000
"""At most this many values, an alias counting as every value of its anchor.

Aliases make each reference share the anchor's object, so a few lines of
anchors and aliases ("billion laughs") stand for billions of values: cheap to
load, ruinous for anything that walks or prints them.
"""

MAX_PARSE_SECONDS = 5.0
"""A parse still running after this long gives up (checked at every value)."""

_NAME = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
_THREAD_CHARS = 16 * 1024  # parse bigger front matter in a worker thread, off the loop


class _TooComplex(Exception):
    """The front matter is over a parse bound (its message says which)."""


@functools.cache
def _bounded_loader() -> type[yaml.SafeLoader]:
    """PyYAML's safe loader with the bounds, made on the first parse.

    PyYAML is imported here, not with the module: every agent imports this module,
    few read a skill, and no process that only serves them needs YAML.
    """
    import yaml

    class _BoundedLoader(yaml.SafeLoader):
        """PyYAML's safe loader with depth, size (aliases expanded) and time bounds."""

        def __init__(self, stream: str) -> None:
            super().__init__(stream)
            self._depth = 0
            self._nodes = 0
            self._deadline = time.monotonic() + MAX_PARSE_SECONDS
            # Values under each anchored node, aliases expanded: what one alias to it costs.
            self._weight: dict[int, int] = {}

        def compose_node(self, parent: Node | None, index: int) -> Node | None:
            """Compose one node, counting it (an alias as its anchor's whole tree)."""
            if self.check_event(yaml.AliasEvent):
                alias = super().compose_node(parent, index)
                # An alias to an anchor still being composed (a recursive one) counts once.
                self._count(self._weight.get(id(alias), 1))
                return alias
            if self._depth >= MAX_FRONT_MATTER_DEPTH:
                raise _TooComplex(
                    f"the front matter nests deeper than {MAX_FRONT_MATTER_DEPTH} levels"
                )
            # The stubs leave peek_event untyped; every event it can return here has .anchor.
            anchored = self.peek_event().anchor is not None  # type: ignore[no-untyped-call]
            before = self._nodes
            self._depth += 1
            try:
                node = super().compose_node(parent, index)
            finally:
                self._depth -= 1
            self._count(1)
            if anchored and node is not None:
                self._weight[id(node)] = self._nodes - before
            return node

        def _count(self, nodes: int) -> None:
            self._nodes += nodes
            if self._nodes > MAX_FRONT_MATTER_NODES:
                raise _TooComplex(
                    f"the front matter holds over {MAX_FRONT_MATTER_NODES} values "
                    "(aliases counted as copies of their anchors)"
                )
            if time.monotonic() > self._deadline:
                raise _TooComplex(f"parsing the front matter took over {MAX_PARSE_SECONDS} s")

    return _BoundedLoader


def _load(text: str) -> object:
    """Parse YAML text within the bounds (raises :class:`yaml.YAMLError` past one)."""
    loader = _bounded_loader()(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class Skill:
    """One usable skill, as the prompt lists it.

    Attributes:
        name: The skill's name (later sources override earlier ones by it).
        description: What it is for, when to use it.
        path: Its ``SKILL.md`` in the agent's backend.
        source: The source folder (or its label) it came from.
        license: Its license, if given.
        compatibility: What it needs to work, if given.
        metadata: Free-form string pairs.
        allowed_tools: Tools the skill expects to use.
    """

    name: str
    description: str
    path: str
    source: str
    license: str | None = None
    compatibility: str | None = None
    metadata: Mapping[str, str] = field(default_factory=dict)
    allowed_tools: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Parsed:
    """What parsing one file gave: a skill, or the reason it is unusable; and warnings."""

    skill: Skill | None
    problem: str | None = None
    warnings: tuple[str, ...] = ()


async def parse_skill(lines: Sequence[str], *, path: str, folder: str, source: str) -> Parsed:
    """Parse a ``SKILL.md`` given as its first lines (at least the front matter).

    Args:
        lines: The file's lines, without line endings.
        path: The file's path (for messages).
        folder: The name of the folder holding it (the skill's expected name).
        source: The source it was found in.
    """
    if not lines or lines[0].strip() != "---":
        return Parsed(skill=None, problem="no YAML front matter: the file must start with '---'")
    end, size = None, 0
    for i in range(1, len(lines)):
        if lines[i].strip() == "---":
            end = i
            break
        size += len(lines[i]) + 1
        if size > MAX_FRONT_MATTER_CHARS:
            return Parsed(
                skill=None,
                problem=(
                    f"the front matter is over the limit of {MAX_FRONT_MATTER_CHARS} characters"
                ),
            )
    if end is None:
        return Parsed(
            skill=None,
            problem=(
                "the front matter is not closed by a '---' line within the first "
                f"{MAX_FRONT_MATTER_LINES} lines"
            ),
        )
    text = "\n".join(lines[1:end])
    import yaml

    try:
        if len(text) < _THREAD_CHARS:
            data = _load(text)
        else:
            data = await anyio.to_thread.run_sync(_load, text)
    except _TooComplex as exc:
        return Parsed(skill=None, problem=str(exc))
    except yaml.YAMLError as exc:
        problem = " ".join(str(exc).split())
        return Parsed(skill=None, problem=f"invalid YAML in the front matter: {problem}")
    except (RecursionError, MemoryError) as exc:
        # The bounds should stop any file first; this keeps a file they miss a skip.
        return Parsed(skill=None, problem=f"the front matter is too complex to parse ({exc!r})")
    if not isinstance(data, Mapping):
        return Parsed(skill=None, problem="the front matter must be a mapping of fields")
    return _fields(data, path=path, folder=folder, source=source)


def _fields(data: Mapping[object, object], *, path: str, folder: str, source: str) -> Parsed:
    warnings: list[str] = []
    raw_name, raw_description = data.get("name"), data.get("description")
    if not isinstance(raw_name, str) or not raw_name.strip():
        return Parsed(skill=None, problem="the required field 'name' is missing or empty")
    if not isinstance(raw_description, str) or not raw_description.strip():
        return Parsed(skill=None, problem="the required field 'description' is missing or empty")
    name, description = raw_name.strip(), " ".join(raw_description.split())
    if len(name) > MAX_NAME or not _NAME.match(name):
        warnings.append(
            f"name {name!r} should be at most {MAX_NAME} lowercase letters, digits and "
            "single hyphens"
        )
    if name != folder:
        warnings.append(f"name {name!r} does not match its folder {folder!r}")
    if len(description) > MAX_DESCRIPTION:
        warnings.append(f"description cut to {MAX_DESCRIPTION} characters")
        description = description[:MAX_DESCRIPTION]
    license_ = _text(data.get("license"), "license", warnings)
    compatibility = _text(data.get("compatibility"), "compatibility", warnings)
    if compatibility is not None and len(compatibility) > MAX_COMPATIBILITY:
        warnings.append(f"compatibility cut to {MAX_COMPATIBILITY} characters")
        compatibility = compatibility[:MAX_COMPATIBILITY]
    skill = Skill(
        name=name,
        description=description,
        path=path,
        source=source,
        license=license_,
        compatibility=compatibility,
        metadata=_metadata(data.get("metadata"), warnings),
        allowed_tools=_tools(data.get("allowed-tools"), warnings),
    )
    return Parsed(skill=skill, warnings=tuple(warnings))


def _scalar(value: object) -> bool:
    return isinstance(value, str | int | float | bool)


def _text(value: object, key: str, warnings: list[str]) -> str | None:
    if value is None:
        return None
    if not _scalar(value):
        warnings.append(f"{key} is not text; ignored")
        return None
    return " ".join(str(value).split())


def _metadata(value: object, warnings: list[str]) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        warnings.append("metadata is not a mapping; ignored")
        return {}
    out = {str(k): str(v) for k, v in value.items() if _scalar(k) and _scalar(v)}
    if len(out) != len(value):
        warnings.append("metadata entries that are not text were ignored")
    return out


def _tools(value: object, warnings: list[str]) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(value.replace(",", " ").split())
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(v.strip() for v in value if v.strip())
    warnings.append("allowed-tools is neither a string nor a list of strings; ignored")
    return ()
