"""Static API keys: ``api_keys``, from a mapping, a file or an environment variable.

A key is sent as ``Authorization: Bearer <key>`` or ``X-Api-Key: <key>`` and is
looked up by its SHA-256 digest: the table holds no key, and a lookup tells a
guesser nothing of how close a guess came.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path

from ...errors import ConfigurationError
from ._auth import Auth, AuthRequest, Identity

__all__ = ["api_keys"]


def _digest(token: str) -> bytes:
    # Keys are kept and looked up by their digest: a dict lookup on a digest
    # tells an attacker nothing about how close a guess came.
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


def api_keys(
    keys: Mapping[str, str | Identity] | None = None,
    *,
    file: str | os.PathLike[str] | None = None,
    env: str | None = None,
) -> Auth:
    """Authenticate by static API keys (``Authorization: Bearer <key>`` or ``X-Api-Key``).

    Args:
        keys: Key to user id (or to a full :class:`Identity`).
        file: A file of keys: JSON (``{"key": "user"}`` or ``{"key": {"id": ...,
            "permissions": [...]}}``), or lines ``key user [perm,perm]`` (``#``
            comments).
        env: An environment variable holding ``key=user,key2=user2``.

    Raises:
        ConfigurationError: No key at all, an unreadable file, a key shorter than
            16 characters (a guessable key is no key).
    """
    table: dict[bytes, Identity] = {}

    def add(key: str, who: object, where: str) -> None:
        if not isinstance(key, str) or len(key) < 16 or any(c.isspace() for c in key):
            raise ConfigurationError(f"{where}: an API key is 16+ characters, no spaces")
        if isinstance(who, Identity):
            identity = who
        elif isinstance(who, str):
            identity = Identity(id=who)
        elif isinstance(who, Mapping) and isinstance(who.get("id"), str):
            identity = Identity(
                id=who["id"],
                permissions=frozenset(who.get("permissions") or ()),
                metadata=dict(who.get("metadata") or {}),
            )
        else:
            raise ConfigurationError(f"{where}: a key names a user id, not {who!r}")
        table[_digest(key)] = identity

    for key, who in (keys or {}).items():
        add(key, who, "api_keys")
    if file is not None:
        for key, entry in _keys_in_file(Path(file)):
            add(key, entry, str(file))
    if env is not None:
        raw = os.environ.get(env)
        if raw is None:
            raise ConfigurationError(f"environment variable {env} is not set")
        for pair in filter(None, (p.strip() for p in raw.split(","))):
            key, sep, user = pair.partition("=")
            if not sep:
                raise ConfigurationError(f"{env}: pairs key=user separated by commas")
            add(key.strip(), user.strip(), env)
    if not table:
        raise ConfigurationError("api_keys: no key given")

    async def authenticate(request: AuthRequest) -> Identity | None:
        token = request.token
        return None if token is None else table.get(_digest(token))

    return Auth(authenticate)


def _keys_in_file(path: Path) -> list[tuple[str, object]]:
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigurationError(f"cannot read API keys from {path}: {exc}") from None
    if text.lstrip().startswith("{"):
        try:
            loaded = json.loads(text)
        except ValueError as exc:
            raise ConfigurationError(f"{path}: not valid JSON: {exc}") from None
        if not isinstance(loaded, dict):
            raise ConfigurationError(f"{path}: a JSON object of key -> user")
        return list(loaded.items())
    found: list[tuple[str, object]] = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        if len(parts) not in (2, 3):
            raise ConfigurationError(f"{path}:{number}: 'key user [perm,perm]'")
        perms = parts[2].split(",") if len(parts) == 3 else []
        found.append((parts[0], {"id": parts[1], "permissions": perms}))
    return found
