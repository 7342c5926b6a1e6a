"""Who a caller is and what they may do: identities, requests, rules and ``Auth``.

``Auth`` holds an authenticator (a request to an ``Identity``) and the rules
asked on top of ownership; ``namespace_label`` and ``label_owner`` tie a user id
to the first label of their store namespaces. The built-in authenticators are
beside it (``_api_keys``, ``_jwt``); the package's docstring says how the
server applies all of it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, final

from ...errors import ConfigurationError, DeepActorsError

__all__ = [
    "Action",
    "Auth",
    "AuthError",
    "AuthRequest",
    "Authenticator",
    "Identity",
    "Resource",
    "Rule",
    "RuleContext",
    "label_owner",
    "namespace_label",
]

Resource = Literal["threads", "runs", "store", "assistants"]
Action = Literal["create", "read", "update", "delete", "search"]


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class Identity:
    """An authenticated caller.

    Attributes:
        id: Who it is; threads and store namespaces are owned by this id.
        permissions: What the authenticator granted (scopes, roles), for rules.
        metadata: Anything else the authenticator knows (a display name, a tenant).
    """

    id: str
    permissions: frozenset[str] = frozenset()
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id:
            raise ConfigurationError(f"an identity's id is a non-empty string, not {self.id!r}")

    def to_json(self) -> dict[str, object]:
        """The identity as JSON (for logs and run metadata)."""
        return {"id": self.id, "permissions": sorted(self.permissions)}

    @property
    def namespace_label(self) -> str:
        """The first label of this identity's store namespaces (see :func:`namespace_label`)."""
        return namespace_label(self.id)


def namespace_label(user_id: str) -> str:
    """A user id as the first label of that user's store namespaces.

    Namespace labels never hold a ``.`` (the protocol joins them with dots in a
    URL, and langgraph-sdk refuses one), but user ids do (e-mail ``sub``
    claims). So the label is the id with ``%`` written ``%25`` and ``.``
    written ``%2E``; every other character is kept, and an id with neither is
    its own label. Every id has exactly one label, and no two ids share one.

    Example:
        ``namespace_label("alice.smith@example.com") == "alice%2Esmith@example%2Ecom"``
    """
    if "%" not in user_id and "." not in user_id:
        return user_id
    return user_id.replace("%", "%25").replace(".", "%2E")


def label_owner(label: str) -> str | None:
    """The user id whose :func:`namespace_label` ``label`` is (None: nobody's).

    A label in any other spelling (``%2e``, a lone ``%``) is nobody's: one
    user's namespaces have one name.
    """
    if "%" not in label:
        return None if "." in label else label
    user_id = label.replace("%2E", ".").replace("%25", "%")
    return user_id if namespace_label(user_id) == label else None


@final
class AuthRequest:
    """What an authenticator sees of a request.

    Args:
        method: ``GET``, ``POST``...
        path: The URL path.
        headers: The headers, names in lower case (the last of repeated ones).
        client: The peer's address, if known.
        raw_headers: The ASGI headers instead of ``headers``: the mapping is then
            made only if an authenticator asks for it (an API key or a JWT is
            read from ``token`` without it, on every request).
    """

    __slots__ = ("_headers", "_raw", "client", "method", "path")

    def __init__(
        self,
        *,
        method: str,
        path: str,
        headers: Mapping[str, str] | None = None,
        client: str | None = None,
        raw_headers: Sequence[tuple[bytes, bytes]] = (),
    ) -> None:
        self.method = method
        self.path = path
        self.client = client
        self._headers = headers
        self._raw = raw_headers

    def __repr__(self) -> str:
        return f"AuthRequest({self.method} {self.path})"

    @property
    def headers(self) -> Mapping[str, str]:
        """The headers, names in lower case (the last of repeated ones)."""
        if self._headers is None:
            self._headers = {
                name.decode("latin-1").lower(): value.decode("latin-1") for name, value in self._raw
            }
        return self._headers

    @property
    def token(self) -> str | None:
        """The credential: ``Authorization: Bearer <token>``, else ``X-Api-Key``."""
        if self._headers is None:
            # By name (ASGI names are lower case), the last of repeated ones:
            # one C call, on every request, not a loop in Python.
            named = dict(self._raw)
            header = named.get(b"authorization", b"").decode("latin-1")
            key = named.get(b"x-api-key", b"").decode("latin-1")
        else:
            header = self._headers.get("authorization", "")
            key = self._headers.get("x-api-key", "")
        scheme, _, value = header.partition(" ")
        if scheme.lower() == "bearer" and value.strip():
            return value.strip()
        return key.strip() or None


class AuthError(DeepActorsError):
    """A request is refused: 401 (who are you?), 403 (not you), or 400 (a
    credential given twice).

    Args:
        detail: Said to the client: nothing about who else exists.
        status: 401, 403 or 400.
    """

    def __init__(self, detail: str, *, status: int = 401) -> None:
        super().__init__(detail)
        self.status = status


Authenticator = Callable[[AuthRequest], Awaitable["Identity | None"]]
"""From a request to its caller; None (or :class:`AuthError`) refuses it."""


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class RuleContext:
    """What a rule is asked about.

    Attributes:
        identity: Who asks.
        resource: ``threads``, ``runs``, ``store`` or ``assistants``.
        action: ``create``, ``read``, ``update``, ``delete`` or ``search``.
        owner: The resource's owner (None: unknown, e.g. a thread saved without
            its metadata, by an older deepactors); a store item's is the user id
            whose :func:`namespace_label` its namespace's first element is.
        value: What is touched: a thread's JSON, a store namespace (a tuple).
    """

    identity: Identity
    resource: Resource
    action: Action
    owner: str | None
    value: Any = None


Rule = Callable[[RuleContext], Awaitable["bool | None"]]
"""True lets through, False refuses, None leaves it to ownership."""


@final
class Auth:
    """Authentication and authorization for ``create_app(auth=...)``.

    Args:
        authenticate: The authenticator (or set it later with the decorator).

    Example:
        ```python
        auth = Auth()

        @auth.authenticate
        async def who(request: AuthRequest) -> Identity | None:
            user = await my_sessions.lookup(request.token)
            return None if user is None else Identity(id=user.id)

        @auth.on("threads", "read")
        async def admins_read_all(ctx: RuleContext) -> bool | None:
            return True if "admin" in ctx.identity.permissions else None
        ```
    """

    def __init__(self, authenticate: Authenticator | None = None) -> None:
        self._authenticate = authenticate
        self._rules: list[tuple[str, str, Rule]] = []

    def authenticate(self, function: Authenticator) -> Authenticator:
        """Decorator: make ``function`` the authenticator."""
        self._authenticate = function
        return function

    def on(self, resource: str = "*", action: str = "*") -> Callable[[Rule], Rule]:
        """Decorator: a rule for ``resource`` and ``action`` (``*``: any).

        Rules are asked in the order they were added; the first that answers
        True or False decides.
        """
        resources = ("threads", "runs", "store", "assistants", "*")
        actions = ("create", "read", "update", "delete", "search", "*")
        if resource not in resources or action not in actions:
            raise ConfigurationError(
                f"a rule is for a resource in {resources} and an action in {actions}, "
                f"not {resource!r}, {action!r}"
            )

        def add(rule: Rule) -> Rule:
            self._rules.append((resource, action, rule))
            return rule

        return add

    async def identify(self, request: AuthRequest) -> Identity:
        """The request's identity.

        Raises:
            AuthError: Not authenticated (401), or refused by the authenticator.
        """
        if self._authenticate is None:
            raise ConfigurationError("this Auth has no authenticator: decorate one")
        identity = await self._authenticate(request)
        if identity is None:
            raise AuthError("authentication required: a valid bearer token or X-Api-Key")
        if not isinstance(identity, Identity):
            raise ConfigurationError(
                f"an authenticator returns an Identity or None, not {type(identity).__name__}"
            )
        return identity

    async def allows(self, context: RuleContext) -> bool:
        """Whether ``context.identity`` may do ``context.action`` on the resource."""
        for resource, action, rule in self._rules:
            if resource in ("*", context.resource) and action in ("*", context.action):
                answer = await rule(context)
                if answer is not None:
                    return bool(answer)
        return context.owner is not None and context.owner == context.identity.id
