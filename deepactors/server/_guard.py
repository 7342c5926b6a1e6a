"""What every HTTP request must pass before the app reads it: browser safety and limits.

A server on 127.0.0.1 is reachable from any web page its user opens. Three
checks keep such pages out: the ``Host`` header must name this server (a page
on ``evil.example`` that re-binds its DNS name to 127.0.0.1 still sends
``Host: evil.example``), a request with an ``Origin`` must come from an origin
allowed for CORS or from this server itself, and a request with a body must say
it is JSON (an HTML form or a ``text/plain`` fetch, the requests a browser
sends cross-site without asking first, can say nothing else). A request that
names two servers (two ``Host`` headers, or a target that is not a path) is
refused before any of that (400, as RFC 9112 says). Then limits: a
body is refused past a size (declared or streamed) and cut off past a time, and
one client holds a bounded number of open streams.

It runs ahead of everything, including the stream endpoints' direct path, so it
is kept to one ``dict()`` of the headers and a few set and dict lookups per
request (``bench/w7_request.py`` counts it, with the rest of a stream's request).
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence

import anyio
from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send

from .._core.logs import get_logger
from ..errors import ConfigurationError
from ._body_limit import CLOSE, BodyRefused, BoundedBody, refuse

__all__ = [
    "CLIENT",
    "DEFAULT_BODY_TIMEOUT",
    "DEFAULT_MAX_BODY",
    "DEFAULT_MAX_STREAMS_PER_CLIENT",
    "LOOPBACK_HOSTS",
    "ORIGIN_FORM",
    "AdmittedApp",
    "BodyRefused",
    "Guard",
    "StreamKey",
    "check_limits",
    "client_host",
    "close_if_unread",
    "normal_origin",
]

DEFAULT_MAX_BODY = 4 * 1024 * 1024
"""Bytes of a request body (4 MiB): a run's input, a state update or a store item
is JSON of a few KiB; 4 MiB leaves room for pasted documents and images."""

DEFAULT_BODY_TIMEOUT = 30.0
"""Seconds to receive a whole body: 4 MiB at ~1.1 Mbit/s, much longer than any
honest client takes; a body trickled to hold the connection open is cut off."""

DEFAULT_MAX_STREAMS_PER_CLIENT = 100
"""Streams (and waits, and joins) one client may have open at once."""

LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]")
"""The names a server on this machine answers to by default."""

StreamKey = Callable[[Scope], Hashable]
"""Who a request counts against for the caps on streams and runs (None: not counted)."""

CLIENT: contextvars.ContextVar[Hashable | None] = contextvars.ContextVar(
    "deepactors_client", default=None
)
"""Who the ``POST`` being served counts against (its key): the cap on runs in
flight reads it. None: not counted (no key, or not a request)."""

_log = get_logger("deepactors.server")

_ORIGINS_TOLD = 8
"""Refused origins whose first refusal is logged (each once); then no more."""

_BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# The long-lived responses: a run's SSE stream, a wait or a join for its end.
_STREAM_TAILS = ("/stream", "/wait", "/join")
_JSON = b"application/json"
_KNOWN_HOSTS = 1024
_DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}


def close_if_unread(scope: Scope) -> dict[str, str] | None:
    """``Connection: close`` for an answer given before a request's body is read.

    The body is left in the socket, so the connection cannot carry another
    request; saying so keeps a client from sending its next one down it.
    """
    for name, value in scope["headers"]:
        if (name == b"content-length" and value != b"0") or name == b"transfer-encoding":
            return dict(CLOSE)
    return None


def client_host(scope: Scope) -> Hashable:
    """The default stream key: the client's address (None when the server knows none)."""
    client = scope.get("client")
    return client[0] if client else None


AdmittedApp = Callable[[Scope, Receive, Send, bool], Awaitable[None]]
"""What the guard hands an admitted request to: the app, with the guarded
``receive`` and whether the request carries an ``Origin``."""


class Guard:
    """The checks and limits of every HTTP request (see the module docstring).

    Body deadlines are kept by :meth:`expire_bodies`, a task of the app's
    lifespan, rather than by a cancel scope around each ``receive`` (5-10 us
    per request on the streams' hot path; a registration here is a dict
    insertion and removal).

    Args:
        cors_origins: Origins allowed to call from a browser (``*``: any).
        allowed_hosts: Names the ``Host`` header may give (``*``: any): a name
            with a port (``example.com:8443``) allows that port only; a name
            alone, any port.
        max_body: Bytes a request body may have.
        body_timeout: Seconds a request body may take to arrive.
        max_streams_per_client: Streams open at once per key (None: no cap).
        stream_key: The key of a request (default: the client's address).
        count_runs: Whether runs are capped per key: then a ``POST`` is served
            with its key in :data:`CLIENT` (else only a stream is keyed).
    """

    app: AdmittedApp
    """Where admitted requests go (set by the app that owns the guard)."""

    def __init__(
        self,
        *,
        cors_origins: Sequence[str],
        allowed_hosts: Sequence[str],
        max_body: int,
        body_timeout: float,
        max_streams_per_client: int | None,
        stream_key: StreamKey | None = None,
        count_runs: bool = True,
    ) -> None:
        check_limits(max_body, body_timeout, max_streams_per_client)
        self._any_origin = "*" in cors_origins
        self._origins = frozenset(normal_origin(o).encode() for o in cors_origins)
        self._any_host = "*" in allowed_hosts
        hosts = [h.strip().lower() for h in allowed_hosts]
        self._names = frozenset(h.encode() for h in hosts if _split_host(h)[1] is None)
        self._exact = frozenset(h.encode() for h in hosts if _split_host(h)[1] is not None)
        # Host values seen allowed, as sent: after the first request, one set lookup.
        self._known: set[bytes] = set(self._exact)
        self.max_body = max_body
        self.body_timeout = body_timeout
        self.max_streams = max_streams_per_client
        self.key: StreamKey = stream_key or client_host
        """Who a request counts against (see :data:`StreamKey`)."""
        self.count_runs = count_runs
        self._open: dict[Hashable, int] = {}
        # Bodies being read, in the order of their deadlines (one timeout for all).
        self._reading: dict[BoundedBody, None] = {}
        # Origins refused so far, each logged once: a browser shows its user
        # nothing of a refused preflight, so the operator is told the fix here.
        self._told: set[bytes] = set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # The headers by name (ASGI names are lower-case; of a repeated one, the
        # last): one C call, not a loop in Python, for every request. A name
        # repeated shows as fewer names than headers: only then are the Host
        # headers counted one by one.
        raw = scope["headers"]
        headers = dict(raw)
        host = headers.get(b"host")
        origin = headers.get(b"origin")
        kind = headers.get(b"content-type")
        length = headers.get(b"content-length")
        chunked = headers.get(b"transfer-encoding")
        if len(headers) == len(raw):
            hosts = 0 if host is None else 1
        else:
            hosts = sum(1 for name, _ in raw if name == b"host")
        # A refusal sent before the body is read leaves the body in the socket:
        # the connection is closed after it, so no client sends its next request
        # down a connection the server is dropping.
        unread = CLOSE if (length is not None and length != b"0") or chunked is not None else None
        if hosts != 1 or scope["path"][:1] != "/":
            malformed = _malformed(hosts, scope)
            if malformed is not None:
                await refuse(400, malformed, None, unread)(scope, receive, send)
                return
        if host is not None and not self._any_host and host not in self._known:
            refusal = self._refused_host(host, scope, unread)
            if refusal is not None:
                await refusal(scope, receive, send)
                return
        if origin is not None and not self._any_origin and origin not in self._origins:
            refusal = self._refused_origin(origin, host, scope, unread)
            if refusal is not None:
                await refusal(scope, receive, send)
                return
        takes_body = scope["method"] in _BODY_METHODS
        if kind is not None and kind != _JSON and takes_body and not _is_json(kind):
            # Even with an empty body (an empty form still creates a thread). A
            # missing type is allowed: forms and text/plain fetches (what a page
            # may send cross-site unasked) always carry one, and any other
            # browser request carries an Origin, checked above.
            detail = f"send the body as application/json, not {kind.decode('latin-1')!r}"
            await refuse(415, detail, self._cors(origin), unread)(scope, receive, send)
            return
        body: BoundedBody | None = None
        if unread is not None:
            if length is not None:
                declared = int(length) if length.isdigit() else -1
                if declared < 0:  # the servers refuse these themselves; never trusted here
                    await refuse(400, "bad Content-Length", None, unread)(scope, receive, send)
                    return
                if declared > self.max_body:
                    detail = f"the body is {declared} bytes; the limit is {self.max_body}"
                    await refuse(413, detail, self._cors(origin), unread)(scope, receive, send)
                    return
            if takes_body:  # (no endpoint reads the body of a GET: left unread)
                body = BoundedBody(
                    scope, receive, send, max_body=self.max_body, timeout=self.body_timeout
                )
        streams = self.max_streams is not None and scope["path"].endswith(_STREAM_TAILS)
        # A POST may start a run: who it counts against, for the runs' cap (if any).
        counted = streams or (self.count_runs and scope["method"] == "POST")
        key = self.key(scope) if counted else None
        if key is None:
            await self._serve(scope, receive, send, origin, body)
            return
        token = CLIENT.set(key)
        try:
            if streams:
                await self._counted(key, scope, receive, send, origin, body, unread)
            else:
                await self._serve(scope, receive, send, origin, body)
        finally:
            CLIENT.reset(token)

    async def _counted(
        self,
        key: Hashable,
        scope: Scope,
        receive: Receive,
        send: Send,
        origin: bytes | None,
        body: BoundedBody | None,
        unread: Mapping[str, str] | None,
    ) -> None:
        """Serve a stream, wait or join, counted against ``key``'s cap."""
        count = self._open.get(key, 0)
        assert self.max_streams is not None
        if count >= self.max_streams:
            detail = f"this client has {count} streams open, the most it may; close one first"
            await refuse(429, detail, self._cors(origin), unread)(scope, receive, send)
            return
        self._open[key] = count + 1
        try:
            await self._serve(scope, receive, send, origin, body)
        finally:
            left = self._open[key] - 1
            if left:
                self._open[key] = left
            else:
                del self._open[key]

    def open_streams(self, key: Hashable) -> int:
        """How many streams ``key`` has open now."""
        return self._open.get(key, 0)

    def take_stream(self, scope: Scope) -> Callable[[], None]:
        """Count a stream its path does not name (the other protocols' endpoints:
        AG-UI, the AI SDK's stream, an A2A ``message/stream``) against the same
        cap as the paths ending in ``/stream``.

        Returns:
            What releases it (call it once, when the response has ended).

        Raises:
            HTTPException: 429, the client has its most streams open already.
        """
        most = self.max_streams
        key = None if most is None else self.key(scope)
        if most is None or key is None:
            return _nothing
        count = self._open.get(key, 0)
        if count >= most:
            detail = f"this client has {count} streams open, the most it may; close one first"
            raise HTTPException(429, detail)
        self._open[key] = count + 1
        released = False

        def release() -> None:
            nonlocal released
            if released:
                return
            released = True
            left = self._open[key] - 1
            if left:
                self._open[key] = left
            else:
                del self._open[key]

        return release

    async def expire_bodies(self) -> None:
        """Cut off bodies past ``body_timeout``, for as long as it runs (the app's lifespan).

        A request waiting in ``receive`` for the rest of its body is answered
        408 from here: the server then ends its ``receive`` (a disconnect, since
        the response is complete), and the app stops. One that is not waiting
        gets the 408 from its next ``receive``.
        """
        async with anyio.create_task_group() as tg:
            while True:
                # The clock of the deadlines (a cheaper call than the loop's;
                # only differences of it are slept).
                now = time.monotonic()
                reading = self._reading
                while reading:
                    body = next(iter(reading))
                    if body.deadline > now:
                        break
                    del reading[body]
                    if body.expire():
                        tg.start_soon(body.answer_timeout)
                first = next(iter(reading), None)
                await anyio.sleep(self.body_timeout if first is None else first.deadline - now)

    async def _serve(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        origin: bytes | None,
        body: BoundedBody | None,
    ) -> None:
        if body is None:
            await self.app(scope, receive, send, origin is not None)
            return
        self._reading[body] = None
        try:
            await self.app(scope, body, send, origin is not None)
        except BodyRefused as exc:
            # Read on the direct path, which turns no error into a response (the
            # routed one answers through the app's handlers and never gets here).
            refusal = refuse(exc.status_code, str(exc.detail), self._cors(origin), exc.headers)
            await refusal(scope, receive, send)
        except Exception:
            if not body.answered:
                raise
            # Answered 408 while the app waited for the body: what the app did on
            # being told the client left (a 500 it could not send) is moot.
        finally:
            self._reading.pop(body, None)

    def _refused_host(
        self, host: bytes, scope: Scope, headers: Mapping[str, str] | None
    ) -> JSONResponse | None:
        """The answer to a ``Host`` not seen before: None if it is allowed, else a 421."""
        name, port = _split_host(host.decode("latin-1").lower())
        if port is None:  # "example.com" is "example.com:80" (http)
            port = _DEFAULT_PORTS.get(scope.get("scheme", "http"), 80)
        if name.encode() in self._names or f"{name}:{port}".encode() in self._exact:
            if len(self._known) < _KNOWN_HOSTS:  # bounded: ports and letter cases vary
                self._known.add(host)
            return None
        detail = (
            f"this server does not answer to Host {host.decode('latin-1')!r}: name it with "
            "create_app(allowed_hosts=...) or deepactors serve --allowed-host"
        )
        return refuse(421, detail, None, headers)

    def _refused_origin(
        self, origin: bytes, host: bytes | None, scope: Scope, headers: Mapping[str, str] | None
    ) -> JSONResponse | None:
        """The answer to an ``Origin`` not allowed: None if it is the server's own, else a 403."""
        scheme: str = scope.get("scheme", "http")
        if host is not None and origin == scheme.encode() + b"://" + host:
            return None
        shown = origin.decode("latin-1")
        if origin not in self._told and len(self._told) < _ORIGINS_TOLD:
            self._told.add(origin)
            _log.warning(
                f"refused a web page at {shown} (403; its browser does not show "
                f"why): to let it call, serve with --cors-origin {shown}",
                origin=shown,
            )
        detail = (
            f"origin {shown!r} may not call this server: allow it "
            "with create_app(cors_origins=...) or deepactors serve --cors-origin"
        )
        return refuse(403, detail, None, headers)

    def _cors(self, origin: bytes | None) -> dict[str, str] | None:
        """CORS headers for a refusal, so a page allowed to call can read why."""
        if origin is None:
            return None
        return {"Access-Control-Allow-Origin": origin.decode("latin-1"), "Vary": "Origin"}


def _malformed(hosts: int, scope: Scope) -> str | None:
    """Why a request is not one RFC 9112 lets a server answer (a 400), if it is not.

    More than one ``Host`` (which one names the server?), none in HTTP/1.1, or
    a target not in origin-form (``GET http://evil.example/info``: the name in
    it is not the ``Host`` that was checked). Hypercorn refuses the first two
    itself and routes the last nowhere; uvicorn serves all three, and its
    httptools parser hands the app the path alone (``HeadTimeoutProtocol``
    refuses that one there).
    """
    if hosts > 1:
        return "more than one Host header: a request names one server"
    if hosts == 0 and scope.get("http_version") == "1.1":
        return "an HTTP/1.1 request needs a Host header"
    path: str = scope["path"]
    if not path.startswith("/"):
        return ORIGIN_FORM
    return None


ORIGIN_FORM = "the request target must be a path (origin-form), not an absolute URI or '*'"
"""Why a request target that is not a path is refused (400)."""


def check_limits(max_body: int, body_timeout: float, max_streams: int | None) -> None:
    """Raise ``ConfigurationError`` for a limit that would refuse everything."""
    if max_body < 0:
        raise ConfigurationError(f"max_body must be 0 bytes or more, not {max_body}")
    if not body_timeout > 0:
        raise ConfigurationError(f"body_timeout must be more than 0 seconds, not {body_timeout}")
    if max_streams is not None and max_streams < 1:
        raise ConfigurationError(
            f"max_streams_per_client must be at least 1 (None: no cap), not {max_streams}"
        )


def _is_json(kind: bytes) -> bool:
    return kind.split(b";", 1)[0].strip().lower() == _JSON


def normal_origin(origin: str) -> str:
    """An origin as browsers send it: lower-case, no trailing slash."""
    return origin.strip().rstrip("/").lower()


def _split_host(host: str) -> tuple[str, int | None]:
    """``name[:port]`` (``[v6]:port`` too) as the name and the port (None: none given)."""
    if host.startswith("["):
        end = host.find("]")
        name, rest = host[: end + 1], host[end + 1 :]
        port = rest[1:] if rest.startswith(":") else None
    else:
        name, colon, port_text = host.rpartition(":")
        if not colon:
            return host, None
        port = port_text
    if port is None or not port.isdigit():
        return (name, None) if port is None else (host, None)
    return name, int(port)


def _nothing() -> None:
    """Releases a stream that was not counted."""
