"""Who is calling the server, and what they may touch.

``create_app(agents, auth=...)`` (``deepactors serve --auth ...``) takes an
:class:`Auth`: an authenticator (an async function from the request's method,
path and headers to an :class:`Identity`, or None for "not authenticated") and,
optionally, rules per resource and action. Every request but the health check
(``/``, ``/ok``) is authenticated before anything runs; a request that is not
gets 401. Then every thread, run and store item is its owner's:

- a thread (and so its runs, state and history) belongs to the identity that
  created it (``metadata["owner"]``, which no client can set or change, kept
  with the thread across restarts); a thread of another owner is answered 404,
  as if it did not exist, and its id is free for the caller to make a thread
  of their own (ids are per owner: see ``_thread_lookup``);
- a store item belongs to the identity whose id is the first element of its
  namespace (``("alice", "memories")``), written as :func:`namespace_label`
  writes it (a ``.`` as ``%2E``, since labels never hold one:
  ``("alice%2Esmith@example%2Ecom", "memories")``); another's is answered 403,
  and searches and listings are kept to the caller's own namespaces;
- the identity reaches the run: hooks and tools read it as ``run.identity``
  (``ToolRuntime.identity``), to act on the user's behalf.

Rules (:meth:`Auth.on`) come on top of ownership: a rule that returns True lets
an identity through where ownership alone would not (an admin reading every
thread), one that returns False refuses what ownership would allow.

Built-in authenticators: static API keys (:func:`api_keys`, from a mapping, a
file or an environment variable; ``Authorization: Bearer <key>`` or
``X-Api-Key: <key>``) and JWT bearer tokens (:func:`jwt_bearer`, issuer and
audience checked, keys from a file, a PEM string or a JWKS URL; verified by
PyJWT, the ``jwt`` extra).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import anyio.to_thread

from .._core.logs import get_logger
from ..errors import ConfigurationError, DeepActorsError

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
    "api_keys",
    "jwt_bearer",
    "label_owner",
    "namespace_label",
]

_log = get_logger("deepactors.server")

Resource = Literal["threads", "runs", "store", "assistants"]
Action = Literal["create", "read", "update", "delete", "search"]


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

    def to_json(self) -> dict[str, Any]:
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
            header = key = ""
            for name, raw in self._raw:  # ASGI names are lower case
                if name == b"authorization":
                    header = raw.decode("latin-1")
                elif name == b"x-api-key":
                    key = raw.decode("latin-1")
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


# --- static API keys ---------------------------------------------------------------


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

    def add(key: str, who: str | Identity | Mapping[str, Any], where: str) -> None:
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
        for key, who in _keys_in_file(Path(file)):
            add(key, who, str(file))
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


def _keys_in_file(path: Path) -> list[tuple[str, Any]]:
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
    found: list[tuple[str, Any]] = []
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


# --- JWT bearer tokens -------------------------------------------------------------


def jwt_bearer(
    *,
    issuer: str,
    audience: str,
    key: str | None = None,
    key_file: str | os.PathLike[str] | None = None,
    jwks_url: str | None = None,
    algorithms: tuple[str, ...] = ("RS256", "ES256", "EdDSA"),
    user_claim: str = "sub",
    permissions_claim: str = "scope",
    leeway: float = 30.0,
) -> Auth:
    """Authenticate by JWT bearer tokens, verified with PyJWT (the ``jwt`` extra).

    The signature, ``exp``, ``iss`` and ``aud`` are checked; the identity's id
    is ``user_claim`` and its permissions the space-separated (or list)
    ``permissions_claim``.

    Args:
        issuer: The ``iss`` tokens must carry.
        audience: The ``aud`` tokens must carry.
        key: A PEM public key (or an HMAC secret, with ``HS256`` in ``algorithms``).
        key_file: A file holding that key.
        jwks_url: A JWKS endpoint to fetch signing keys from (cached; fetched in
            a worker thread, never on the event loop).
        algorithms: The accepted algorithms (never ``none``).
        user_claim: The claim holding the user id.
        permissions_claim: The claim holding scopes or roles.
        leeway: Seconds of clock skew allowed.

    Raises:
        ConfigurationError: Not exactly one key source, or PyJWT is missing.
    """
    try:
        import jwt
    except ImportError as exc:
        raise ConfigurationError(
            f"JWT authentication needs PyJWT: pip install 'deepactors[jwt]' ({exc})"
        ) from exc
    if sum(x is not None for x in (key, key_file, jwks_url)) != 1:
        raise ConfigurationError("jwt_bearer: give exactly one of key, key_file, jwks_url")
    if not algorithms or any(a.lower() == "none" for a in algorithms):
        raise ConfigurationError("jwt_bearer: name the signing algorithms (never 'none')")
    if key_file is not None:
        try:
            key = Path(key_file).read_text()
        except OSError as exc:
            raise ConfigurationError(f"cannot read the JWT key {key_file}: {exc}") from None
    jwks = jwt.PyJWKClient(jwks_url, cache_keys=True) if jwks_url is not None else None
    required: Any = {"require": ["exp", "iss", "aud", user_claim]}

    def verify(token: str) -> dict[str, Any]:
        signing_key: Any = key
        if jwks is not None:
            signing_key = jwks.get_signing_key_from_jwt(token).key
        claims: dict[str, Any] = jwt.decode(
            token,
            signing_key,
            algorithms=list(algorithms),
            audience=audience,
            issuer=issuer,
            leeway=leeway,
            options=required,
        )
        return claims

    async def authenticate(request: AuthRequest) -> Identity | None:
        token = request.token
        if token is None or not _JWT_SHAPE.fullmatch(token):
            return None
        try:
            if jwks is not None:
                # Fetching the keys is blocking I/O (urllib): off the loop.
                claims = await anyio.to_thread.run_sync(verify, token)
            else:
                claims = verify(token)
        except jwt.PyJWTError as exc:
            _log.info("JWT refused", reason=type(exc).__name__)
            return None
        user = claims.get(user_claim)
        if not isinstance(user, str) or not user:
            return None
        granted = claims.get(permissions_claim) or ()
        if isinstance(granted, str):
            granted = granted.split()
        perms = frozenset(p for p in granted if isinstance(p, str))
        return Identity(id=user, permissions=perms, metadata={"claims": claims})

    return Auth(authenticate)


_JWT_SHAPE = re.compile(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*")
