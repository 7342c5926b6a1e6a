"""The one path normaliser every backend uses.

Agent paths are virtual, absolute POSIX paths: ``/`` is the backend's root,
whatever that is (a dict in state, a folder on disk, a store namespace). Doing the
checks once, before any backend sees a path, is what keeps the backends from
disagreeing about what ``/a/../b`` or ``~/x`` means.
"""

from __future__ import annotations

import re

from deepactors.errors import InvalidPath

__all__ = ["is_under", "join", "normalize_path", "parent", "path_key", "relative_to"]

# "C:", "c:\\x", "C:/x": a Windows host path, never a virtual one.
_DRIVE = re.compile(r"^/?[A-Za-z]:(?:$|[/\\])")


def normalize_path(path: str) -> str:
    """Turn an agent-given path into the canonical virtual form.

    A relative path is taken from the root (``notes.md`` -> ``/notes.md``); empty
    and ``.`` components and repeated slashes collapse; a trailing slash is
    dropped (except for ``/`` itself).

    Raises:
        InvalidPath: ``..`` components (they would climb out of the root), a
            leading ``~`` (a home folder the backend does not have), NUL bytes,
            backslashes and Windows drive paths (host paths, not agent paths).
    """
    if not isinstance(path, str):
        raise InvalidPath(f"a path must be a string, not {type(path).__name__}")
    if "\0" in path:
        raise InvalidPath("the path contains a NUL byte", path=path)
    if "\\" in path or _DRIVE.match(path):
        raise InvalidPath(
            f"{path!r} looks like a Windows host path; use virtual paths like '/notes.md'",
            path=path,
        )
    parts: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            raise InvalidPath(
                f"{path!r} contains '..'; use absolute paths from the root like '/dir/file'",
                path=path,
            )
        if not parts and part.startswith("~"):
            raise InvalidPath(
                f"{path!r} starts with '~'; there is no home folder, paths start at '/'",
                path=path,
            )
        parts.append(part)
    return "/" + "/".join(parts)


def join(folder: str, name: str) -> str:
    """Join a normalised folder and a relative name (``/`` + ``a`` -> ``/a``)."""
    return folder + name if folder == "/" else f"{folder}/{name}"


def parent(path: str) -> str:
    """The folder holding a normalised path (``/`` is its own parent)."""
    head = path.rsplit("/", 1)[0]
    return head or "/"


def is_under(path: str, folder: str) -> bool:
    """Whether normalised ``path`` is ``folder`` itself or inside it.

    Compared on whole segments: ``/memories2`` is not under ``/memories``.
    """
    return folder == "/" or path == folder or path.startswith(folder + "/")


def relative_to(path: str, folder: str) -> str:
    """``path`` relative to ``folder`` without a leading slash ("" for the folder)."""
    if folder == "/":
        return path[1:]
    return path[len(folder) + 1 :]


def path_key(path: str) -> tuple[str, ...]:
    """Sort key that orders paths the way a sorted tree walk visits them.

    ``/a/b`` sorts before ``/a.txt`` (as ripgrep's ``--sort path`` does), which plain
    string order would not do, since ``.`` < ``/``.
    """
    return tuple(path.split("/"))
