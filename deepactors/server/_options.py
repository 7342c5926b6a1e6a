"""``create_app``'s options: the keywords (:class:`AppOptions`) and their one parse.

``create_app`` takes the parts it serves (agents, persistence, authentication,
the runs database, webhooks, crons) by name, and everything else, the request
guard's limits, how long what it keeps stays in memory, the runtime's knobs, as
:class:`AppOptions` keywords. :class:`AppSettings` is those keywords checked and
completed with their defaults, once: ``create_app`` builds the app's parts from
it, and ``deepactors serve`` builds one before it starts anything, so a bad
option fails there and then, with the same message either way.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypedDict, cast, final

from starlette.types import Scope

from .._core.keywords import unexpected_keywords
from .._core.pacing import DEFAULT_QUANTUM
from ..errors import ConfigurationError
from ..tracing import Tracing
from ._authz import IDENTITY_KEY
from ._guard import (
    DEFAULT_BODY_TIMEOUT,
    DEFAULT_MAX_BODY,
    DEFAULT_MAX_STREAMS_PER_CLIENT,
    LOOPBACK_HOSTS,
    StreamKey,
    check_limits,
    normal_origin,
)
from ._retention import DEFAULT_RUN_RETENTION
from ._run_slots import DEFAULT_MAX_RUNS_PER_CLIENT, RunSlots
from ._thread_ttl import DEFAULT_THREAD_TTL_SWEEP, ThreadTTL
from ._wire_json import TTLStrategy
from .auth import Auth
from .relay import DEFAULT_STREAM_LOG_BYTES, FOLLOW_PATIENCE, patience

__all__ = ["DEFAULT_IDLE_TIMEOUT", "AppOptions", "AppSettings"]

DEFAULT_IDLE_TIMEOUT = 300.0
"""Seconds an idle thread's actor keeps its state in memory (``idle_timeout``)."""


class AppOptions(TypedDict, total=False):
    """The keywords of :func:`~deepactors.server.create_app` besides the parts it serves.

    Each is optional; leaving one out means its default. Pass them as keywords
    (``create_app(agents, max_body=1_000_000, cors_origins=["http://localhost:3000"])``)
    or gather them first (``options: AppOptions = {...}``, then
    ``create_app(agents, **options)``): type checkers check both.

    Attributes:
        cors_origins: Origins web pages may call from (Agent Chat UI in a
            browser: ``http://localhost:3000``), or ``*`` for any. None by
            default: a request with any other ``Origin`` than the server's own
            is refused (403) before anything runs, so a page the user opens
            cannot drive the agents.
        allowed_hosts: What the ``Host`` header may name (421 otherwise), so a
            page whose DNS name is re-bound to this machine is refused: a name
            (any port) or ``name:port``; ``*`` allows any (behind a proxy that
            checks it). Default: this machine's loopback names.
        max_body: Bytes a request body may have (413 past it, from its declared
            length at once, else as it streams in: never buffered beyond it).
        body_timeout: Seconds a request body may take to arrive (408 after).
        max_streams_per_client: Streams, waits and joins one client may have
            open at once (429 past it); None: no cap.
        stream_key: Who a request counts against for that cap and for
            ``max_runs_per_client``, from its ASGI scope (None: not counted);
            default: the caller's identity with ``auth``, else the client's
            address (a trusted proxy's client's: ``trusted_proxies``).
        max_runs_per_client: Runs one client may have in flight at once,
            whatever their kind (streamed, waited for, in the background,
            stateless, queued on a thread); past it a new run is refused with
            429 and ``Retry-After`` before anything of it is done. None: no cap.
        trusted_proxies: Addresses or networks (``10.0.0.0/8``; ``*``: any) of
            reverse proxies whose ``X-Forwarded-For`` and ``X-Forwarded-Proto``
            are believed, as uvicorn's ``--forwarded-allow-ips``: a request from
            one is the client's it names (its address keys the caps, its scheme
            is the origin's). From any other peer they are ignored. None by
            default: run uvicorn with ``proxy_headers=False`` (``deepactors
            serve`` does), or it believes them from 127.0.0.1 itself.
        idle_timeout: Seconds a thread's actor keeps its state in memory, and
            what was read of the thread for requests (then read back from the
            checkpointer when a request needs it).
        run_retention: Seconds a finished run's record (its values, its input)
            stays in memory for clients to join or read it; None: for ever.
            Then a run of a thread keeps only its status, times, metadata and
            error (``GET`` and ``/join`` still answer, ``/join`` with the
            thread's values from the checkpointer); a stateless run is gone
            with its thread when it ends. See ``docs/server-memory.md``.
        stream_log_bytes: Bytes of SSE frames a resumable run keeps for clients
            that rejoin it (``Last-Event-ID``); past it the oldest are dropped,
            and a client that asks for one of those is told so (410).
        runs_db_patience: Seconds this process keeps trying to follow a run of
            another process (a client waiting on it, joining or rejoining its
            stream) while the runs database is unreachable; then the run ends
            here as an error that says so, so the client is answered in bounded
            time. The run goes on in its own process meanwhile.
        pacing: Seconds of agent steps per event-loop turn, as for
            :func:`~deepactors.open_runtime`: what bounds how long a burst of
            runs keeps the server from reading requests and writing streams.
        defer_gc: Defer CPython's collections of objects alive while runs are
            in progress, as for :func:`~deepactors.open_runtime`: a burst of
            streams otherwise spends much of its start in young collections
            that find nothing, and a middle-generation one can pause the
            server for a long moment. Process-wide, hence off here;
            ``deepactors serve`` turns it on.
        tracing: OpenTelemetry traces and metrics of the runs, as for
            :func:`~deepactors.open_runtime` (on whenever a provider is set);
            a request's ``traceparent`` header makes its run part of the
            caller's trace.
        thread_ttl: Seconds a thread lives after its last change (made,
            patched, its state updated, a run ended) unless made with a ``ttl``
            of its own; then it is deleted, never while a run of it is in
            flight. None (the default): threads live until deleted.
        thread_ttl_strategy: What happens to such a thread: ``"delete"`` (the
            default), or ``"keep_latest"``: its history is dropped and its
            latest state kept (``ThreadHandle.keep_latest``), once per change.
        thread_ttl_sweep: Seconds between two sweeps for expired threads.
    """

    cors_origins: Sequence[str]
    allowed_hosts: Sequence[str]
    max_body: int
    body_timeout: float
    max_streams_per_client: int | None
    stream_key: StreamKey | None
    max_runs_per_client: int | None
    trusted_proxies: Sequence[str]
    idle_timeout: float
    run_retention: float | None
    stream_log_bytes: int
    runs_db_patience: float
    pacing: float | None
    defer_gc: bool
    tracing: Tracing | bool
    thread_ttl: float | None
    thread_ttl_strategy: TTLStrategy
    thread_ttl_sweep: float


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class AppSettings:
    """:class:`AppOptions` checked, normalized and completed with their defaults.

    Made only by :meth:`parse`; each field is the option of the same name
    (see :class:`AppOptions`), but for ``cors_origins`` (as browsers send
    them), ``trusted_proxies`` (None: none) and ``thread_ttl`` (the three
    ``thread_ttl*`` options as one value).
    """

    cors_origins: tuple[str, ...]
    allowed_hosts: tuple[str, ...]
    max_body: int
    body_timeout: float
    max_streams_per_client: int | None
    stream_key: StreamKey | None
    max_runs_per_client: int | None
    trusted_proxies: tuple[str, ...] | None
    idle_timeout: float
    run_retention: float | None
    stream_log_bytes: int
    runs_db_patience: float
    pacing: float | None
    defer_gc: bool
    tracing: Tracing | bool
    thread_ttl: ThreadTTL

    @classmethod
    def parse(cls, options: Mapping[str, object], *, auth: Auth | None = None) -> AppSettings:
        """Check ``options`` (:class:`AppOptions`) and fill in the defaults.

        Args:
            options: The keywords given.
            auth: The app's authentication, if any: then requests count
                against the caller's identity by default.

        Raises:
            TypeError: A keyword ``create_app`` does not take (naming the
                closest one it does).
            ConfigurationError: A bad value (the message names the option),
                or an ``auth`` that is not an :class:`~deepactors.server.auth.Auth`.
        """
        if auth is not None and not isinstance(auth, Auth):
            raise ConfigurationError(f"auth: a deepactors.server.auth.Auth, not {auth!r}")
        given: dict[str, object] = dict(options)
        unknown = given.keys() - AppOptions.__annotations__.keys()
        if unknown:
            raise unexpected_keywords("create_app", unknown, AppOptions.__annotations__)
        o = cast(AppOptions, given)  # its keys checked just above; values below
        for name in ("cors_origins", "allowed_hosts", "trusted_proxies"):
            if isinstance(o.get(name), str):
                raise ConfigurationError(f"{name} is a sequence of strings, not one string")
        max_body = o.get("max_body", DEFAULT_MAX_BODY)
        body_timeout = o.get("body_timeout", DEFAULT_BODY_TIMEOUT)
        max_streams = o.get("max_streams_per_client", DEFAULT_MAX_STREAMS_PER_CLIENT)
        check_limits(max_body, body_timeout, max_streams)
        max_runs = RunSlots(o.get("max_runs_per_client", DEFAULT_MAX_RUNS_PER_CLIENT)).cap
        stream_log_bytes = o.get("stream_log_bytes", DEFAULT_STREAM_LOG_BYTES)
        if not stream_log_bytes > 0:
            raise ConfigurationError(f"stream_log_bytes: bytes > 0, not {stream_log_bytes!r}")
        run_retention = o.get("run_retention", DEFAULT_RUN_RETENTION)
        if run_retention is not None and not run_retention >= 0:  # NaN too
            raise ConfigurationError(f"run_retention: seconds >= 0, or None, not {run_retention!r}")
        stream_key = o.get("stream_key", None if auth is None else _identity_key)
        return cls(
            cors_origins=tuple(normal_origin(x) for x in o.get("cors_origins", ())),
            allowed_hosts=tuple(o.get("allowed_hosts", LOOPBACK_HOSTS)),
            max_body=max_body,
            body_timeout=body_timeout,
            max_streams_per_client=max_streams,
            stream_key=stream_key,
            max_runs_per_client=max_runs,
            trusted_proxies=_trusted(o.get("trusted_proxies", ())),
            idle_timeout=o.get("idle_timeout", DEFAULT_IDLE_TIMEOUT),
            run_retention=run_retention,
            stream_log_bytes=stream_log_bytes,
            runs_db_patience=patience(o.get("runs_db_patience", FOLLOW_PATIENCE)),
            pacing=o.get("pacing", DEFAULT_QUANTUM),
            defer_gc=o.get("defer_gc", False),
            tracing=o.get("tracing", True),
            thread_ttl=ThreadTTL(
                o.get("thread_ttl"),
                o.get("thread_ttl_strategy", "delete"),
                o.get("thread_ttl_sweep", DEFAULT_THREAD_TTL_SWEEP),
            ),
        )


def _trusted(proxies: Sequence[str]) -> tuple[str, ...] | None:
    """``trusted_proxies`` checked (None: none).

    Raises:
        ConfigurationError: An entry that is neither an address, a network nor ``*``
            (uvicorn would take it as a name no peer ever has, silently).
    """
    out = tuple(p.strip() for p in proxies)
    for entry in out:
        try:
            if entry != "*":
                if "/" in entry:
                    ipaddress.ip_network(entry)
                else:
                    ipaddress.ip_address(entry)
        except ValueError as exc:
            raise ConfigurationError(
                f"trusted_proxies: an IP address, a network (10.0.0.0/8) or '*', not "
                f"{entry!r} ({exc})"
            ) from None
    return out or None


def _identity_key(scope: Scope) -> Hashable:
    """The caller's identity, which requests count against when the app authenticates."""
    identity = scope.get(IDENTITY_KEY)
    return None if identity is None else identity.id
