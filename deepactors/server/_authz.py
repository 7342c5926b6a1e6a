"""Who calls (set once per request, before any endpoint) and what they may touch.

The app authenticates a request in its ASGI entry (both the routed way and the
direct stream endpoints), and sets :data:`CALLER` for the request's task: the
run manager's lookups read it, so an endpoint cannot forget to check. Tasks a
request starts (a run's driver) inherit it; work started by the server itself
(a relay follower, shutdown) runs with no caller and is not restricted.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterable, Mapping

from starlette.types import Scope

from ._records import ThreadRecord
from ._ui import UI_PATHS
from .auth import (
    Action,
    Auth,
    AuthError,
    AuthRequest,
    Identity,
    Resource,
    RuleContext,
    label_owner,
)

__all__ = [
    "CALLER",
    "IDENTITY_KEY",
    "OPEN_PATHS",
    "OWNER_KEY",
    "authenticate",
    "caller",
    "may",
    "may_thread",
    "owned",
    "owned_namespace",
    "visible",
    "without_owner",
]

CALLER: contextvars.ContextVar[tuple[Auth, Identity] | None] = contextvars.ContextVar(
    "deepactors_caller", default=None
)
"""The request's auth and identity; None when the server has no auth (or for
the server's own work)."""

IDENTITY_KEY = "deepactors.identity"
"""Where the request's identity is kept in its ASGI scope."""

OWNER_KEY = "owner"
"""The thread metadata key naming its owner (as LangGraph's server keeps it)."""

OPEN_PATHS = frozenset({"/", "/ok", "/ready", *UI_PATHS})
"""Answered without authentication: the health and readiness checks, and the
built-in page's static files (they hold no secrets; its API calls are checked)."""


def caller() -> Identity | None:
    """The identity of the request being served, if the server authenticates."""
    found = CALLER.get()
    return None if found is None else found[1]


async def authenticate(auth: Auth, scope: Scope) -> Identity:
    """The identity of the request in ``scope``.

    Raises:
        AuthError: Not authenticated (401), or a credential header given twice (400).
    """
    headers = scope["headers"]
    if len(dict(headers)) != len(headers):  # a name repeated (one C call to tell)
        _one_credential(headers)
    client = scope.get("client")
    request = AuthRequest(
        method=scope.get("method", "GET"),
        path=scope.get("path", "/"),
        raw_headers=headers,
        client=None if client is None else str(client[0]),
    )
    return await auth.identify(request)


_CREDENTIALS = (b"authorization", b"x-api-key")


def _one_credential(headers: Iterable[tuple[bytes, bytes]]) -> None:
    """Refuse a request that gives ``Authorization`` or ``X-Api-Key`` twice.

    Which of the two counts is a guess one hop may make one way and the next
    another (a proxy that checks the first, a server that reads the last):
    such a request is refused, as RFC 9110 lets a server refuse a field
    repeated that is not a list.

    Raises:
        AuthError: 400, naming the header.
    """
    seen: list[bytes] = []
    for name, _ in headers:
        if name in _CREDENTIALS:
            if name in seen:
                raise AuthError(
                    f"{name.decode()} is given more than once: send one credential", status=400
                )
            seen.append(name)


async def may(resource: Resource, action: Action, owner: str | None, value: object = None) -> bool:
    """Whether the request's caller may ``action`` the resource (always, without auth)."""
    found = CALLER.get()
    if found is None:
        return True
    auth, identity = found
    context = RuleContext(
        identity=identity, resource=resource, action=action, owner=owner, value=value
    )
    return await auth.allows(context)


async def may_thread(thread: ThreadRecord, action: Action) -> bool:
    """:func:`may` for a thread (its owner from its metadata)."""
    if CALLER.get() is None:
        return True
    owner = thread.metadata.get(OWNER_KEY)
    return await may("threads", action, owner if isinstance(owner, str) else None, thread)


def owned(metadata: Mapping[str, object]) -> dict[str, object]:
    """A new thread's metadata: the client's, with the caller as its owner."""
    found = CALLER.get()
    if found is None:  # no auth: nobody owns it
        return dict(metadata)
    out = dict(metadata)
    out.pop(OWNER_KEY, None)  # one the client tried to set
    out[OWNER_KEY] = found[1].id
    return out


def without_owner(metadata: Mapping[str, object]) -> dict[str, object]:
    """``metadata`` less an owner a client tried to set (with auth on)."""
    out = dict(metadata)
    if CALLER.get() is not None:
        out.pop(OWNER_KEY, None)
    return out


async def visible(threads: Iterable[ThreadRecord]) -> list[ThreadRecord]:
    """The threads the caller may read."""
    if CALLER.get() is None:
        return list(threads)
    return [t for t in threads if await may_thread(t, "search")]


async def owned_namespace(namespace: tuple[str, ...], action: Action) -> None:
    """Refuse a store namespace that is not the caller's (its first element is the
    owner's :func:`~deepactors.server.auth.namespace_label`).

    Raises:
        AuthError: 403, the namespace belongs to someone else (or to nobody).
    """
    found = CALLER.get()
    if found is None:
        return
    owner = label_owner(namespace[0]) if namespace else None
    if not await may("store", action, owner, namespace):
        label = found[1].namespace_label
        raise AuthError(
            f"store namespaces are per user: start the namespace with {label!r}, your user "
            "id as a label ('.' written %2E, '%' written %25)",
            status=403,
        )
