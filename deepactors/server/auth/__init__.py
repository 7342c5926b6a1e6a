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

from ..._core.public import publish as _publish
from ._api_keys import api_keys as api_keys
from ._auth import Action as Action
from ._auth import Auth as Auth
from ._auth import Authenticator as Authenticator
from ._auth import AuthError as AuthError
from ._auth import AuthRequest as AuthRequest
from ._auth import Identity as Identity
from ._auth import Resource as Resource
from ._auth import Rule as Rule
from ._auth import RuleContext as RuleContext
from ._auth import label_owner as label_owner
from ._auth import namespace_label as namespace_label
from ._jwt import jwt_bearer as jwt_bearer

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

# Reprs, tracebacks and pickles name the public module, as when this package was
# one module (see _core.public).
_publish(__all__, __name__, globals())
