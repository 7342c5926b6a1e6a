"""JWT bearer tokens: ``jwt_bearer``, verified with PyJWT (the ``jwt`` extra).

``jwt_bearer`` checks its options once and returns an ``Auth`` whose
authenticator is a ``JwtChecker``: per request, it takes the bearer token if it
has a JWT's shape, verifies it (signature, ``exp``, ``iss``, ``aud``; keys from a
JWKS endpoint fetched off the event loop), and reads the caller from its claims.
PyJWT is imported when ``jwt_bearer`` is called, never with the package.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, final

import anyio.to_thread

from ..._core.logs import get_logger
from ...errors import ConfigurationError
from ._auth import Auth, AuthRequest, Identity

if TYPE_CHECKING:
    from jwt import PyJWKClient

__all__ = ["JwtChecker", "jwt_bearer"]

_log = get_logger("deepactors.server")

_JWT_SHAPE = re.compile(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*")


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
    checker = JwtChecker(
        issuer=issuer,
        audience=audience,
        key=key,
        jwks=jwt.PyJWKClient(jwks_url, cache_keys=True) if jwks_url is not None else None,
        algorithms=algorithms,
        user_claim=user_claim,
        permissions_claim=permissions_claim,
        leeway=leeway,
    )
    return Auth(checker.authenticate)


@final
class JwtChecker:
    """The authenticator ``jwt_bearer`` makes: one token verified, its caller read.

    Built from options ``jwt_bearer`` has checked: a key (PEM or HMAC secret) or
    a JWKS client (``key`` None), never both.
    """

    __slots__ = (
        "_algorithms",
        "_audience",
        "_decode",
        "_issuer",
        "_jwks",
        "_key",
        "_leeway",
        "_permissions_claim",
        "_refused",
        "_required",
        "_user_claim",
    )

    def __init__(
        self,
        *,
        issuer: str,
        audience: str,
        key: str | None,
        jwks: PyJWKClient | None,
        algorithms: tuple[str, ...],
        user_claim: str,
        permissions_claim: str,
        leeway: float,
    ) -> None:
        import jwt  # importable: jwt_bearer imported it

        self._decode = jwt.decode
        self._refused = jwt.PyJWTError
        self._issuer = issuer
        self._audience = audience
        self._key = key
        self._jwks = jwks
        self._algorithms = list(algorithms)
        self._user_claim = user_claim
        self._permissions_claim = permissions_claim
        self._leeway = leeway
        self._required: Any = {"require": ["exp", "iss", "aud", user_claim]}

    async def authenticate(self, request: AuthRequest) -> Identity | None:
        """The caller of ``request`` (None: no token of a JWT's shape, or one refused)."""
        token = request.token
        if token is None or not _JWT_SHAPE.fullmatch(token):
            return None
        try:
            if self._jwks is not None:
                # Fetching the keys is blocking I/O (urllib): off the loop.
                claims = await anyio.to_thread.run_sync(self.verify, token)
            else:
                claims = self.verify(token)
        except self._refused as exc:
            _log.info("JWT refused", reason=type(exc).__name__)
            return None
        return self.identity(claims)

    def verify(self, token: str) -> dict[str, object]:
        """The claims of ``token``, its signature, ``exp``, ``iss`` and ``aud`` checked.

        Blocking when the keys come from a JWKS endpoint (a worker thread's call).

        Raises:
            jwt.PyJWTError: The token is refused.
        """
        signing_key: Any = self._key
        if self._jwks is not None:
            signing_key = self._jwks.get_signing_key_from_jwt(token).key
        claims: dict[str, object] = self._decode(
            token,
            signing_key,
            algorithms=self._algorithms,
            audience=self._audience,
            issuer=self._issuer,
            leeway=self._leeway,
            options=self._required,
        )
        return claims

    def identity(self, claims: dict[str, object]) -> Identity | None:
        """The caller the verified ``claims`` name (None: no user id in them)."""
        user = claims.get(self._user_claim)
        if not isinstance(user, str) or not user:
            return None
        granted = claims.get(self._permissions_claim)
        # A space-separated string (OAuth's ``scope``) or a list of names.
        names = granted.split() if isinstance(granted, str) else granted
        perms = (
            frozenset(p for p in names if isinstance(p, str))
            if isinstance(names, list)
            else frozenset()
        )
        return Identity(id=user, permissions=perms, metadata={"claims": claims})
