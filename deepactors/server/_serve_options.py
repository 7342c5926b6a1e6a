"""What ``deepactors serve`` is asked for: ``ServeOptions``, and what follows from them.

The command line (``cli._serve``) fills one in; ``serve`` checks it, builds the
app from it and runs it (``_processes``). Besides the fields, the values the
options imply live here: the ``Host`` names served, the database runs are shared
through, and ``create_app``'s keywords.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from typing import Any, final

from ..persistence import is_postgres_url
from ._guard import (
    DEFAULT_BODY_TIMEOUT,
    DEFAULT_MAX_BODY,
    DEFAULT_MAX_STREAMS_PER_CLIENT,
    LOOPBACK_HOSTS,
)
from ._options import DEFAULT_IDLE_TIMEOUT, AppOptions
from ._retention import DEFAULT_RUN_RETENTION
from ._run_slots import DEFAULT_MAX_RUNS_PER_CLIENT
from ._wire_json import TTLStrategy
from .relay import DEFAULT_STREAM_LOG_BYTES, FOLLOW_PATIENCE

__all__ = ["DEFAULT_HEADER_TIMEOUT", "DEFAULT_IDLE_TIMEOUT", "ServeOptions", "is_postgres"]

DEFAULT_HEADER_TIMEOUT = 10.0
"""Seconds a connection has to send a request's headers, from its opening or from
its previous response (so also how long an idle kept-alive one stays open): more
than the 5 s httpx keeps an idle connection, so a client never reuses one the
server is closing."""


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class ServeOptions:
    """What ``deepactors serve`` was asked for."""

    target: str | None = None
    host: str = "127.0.0.1"
    port: int = 2024
    db: str | None = None
    loop: str = "asyncio"
    workers: int = 1
    runs_db: str | None = None
    runs_db_patience: float = FOLLOW_PATIENCE
    """Seconds another process's run is followed while the runs database is
    unreachable (see ``create_app``)."""
    log_level: str | None = "info"
    """Root logger level, ``debug`` to ``critical``; None leaves logging as configured."""
    log_format: str = "console"
    """``console`` lines or ``json`` lines, on stderr."""
    cors_origins: tuple[str, ...] = ()
    """Origins web pages may call from (``*``: any); none by default."""
    allowed_hosts: tuple[str, ...] = ()
    """``Host`` names served besides ``localhost``, ``127.0.0.1``, ``[::1]`` and
    ``host``, which are served at ``port``; ``*``: any."""
    max_body: int = DEFAULT_MAX_BODY
    """Bytes a request body may have (413)."""
    body_timeout: float = DEFAULT_BODY_TIMEOUT
    """Seconds a request body may take to arrive (408)."""
    header_timeout: float = DEFAULT_HEADER_TIMEOUT
    """Seconds a connection may take to send a request's headers (see
    :data:`DEFAULT_HEADER_TIMEOUT`); then it is closed."""
    max_streams_per_client: int | None = DEFAULT_MAX_STREAMS_PER_CLIENT
    """Streams, waits and joins one client (its identity, else its address) may have
    open at once (429); None: no cap."""
    max_runs_per_client: int | None = DEFAULT_MAX_RUNS_PER_CLIENT
    """Runs one client (its identity, else its address) may have in flight at once,
    background runs included (429 with ``Retry-After``); None: no cap."""
    trusted_proxies: tuple[str, ...] = ()
    """Reverse proxies (addresses, networks, ``*``) whose ``X-Forwarded-For`` and
    ``X-Forwarded-Proto`` are believed (as uvicorn's ``--forwarded-allow-ips``); none
    by default, on both servers."""
    auth: str | None = None
    """How clients authenticate (None: they do not, and only loopback is served)."""
    insecure: bool = False
    """Serve a non-loopback ``host`` without authentication all the same."""
    run_retention: float | None = DEFAULT_RUN_RETENTION
    """Seconds a finished run's record stays in memory (see ``create_app``); None: for ever."""
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT
    """Seconds an idle thread keeps its state and values in memory (see ``create_app``)."""
    stream_log_bytes: int = DEFAULT_STREAM_LOG_BYTES
    """Bytes of SSE frames a resumable run keeps for rejoins (see ``create_app``)."""
    webhooks: bool = True
    """Whether runs may name a webhook (see :mod:`deepactors.server.webhooks`)."""
    webhook_allowed_hosts: tuple[str, ...] = ()
    """Hosts webhooks may call whatever they resolve to (this machine, a private network)."""
    store_ttl: float | None = None
    """Minutes a store item lives unless put with its own ``ttl``; None: for ever (see
    :class:`~deepactors.persistence.ttl.ExpiringStore`)."""
    thread_ttl: float | None = None
    """Minutes a thread lives after its last change unless made with its own ``ttl``;
    None: until deleted (see ``create_app``'s ``thread_ttl``)."""
    thread_ttl_strategy: TTLStrategy | None = None
    """What happens to it then (``delete``, ``keep_latest``); None: langgraph.json's
    strategy, else ``delete``."""

    @property
    def shared_runs(self) -> str | None:
        """The PostgreSQL DSN runs are shared through: ``--runs-db``, else a PostgreSQL ``--db``."""
        if self.runs_db is not None:
            return self.runs_db
        return self.db if self.db is not None and is_postgres(self.db) else None

    @property
    def served_hosts(self) -> tuple[str, ...]:
        """What the ``Host`` header may name: the loopback names and ``host`` at
        ``port``, and ``allowed_hosts`` (``*``: anything)."""
        if "*" in self.allowed_hosts:
            return ("*",)
        names = list(LOOPBACK_HOSTS)
        if not _is_wildcard(self.host):
            names.append(f"[{self.host}]" if ":" in self.host else self.host)
        served = [f"{name.lower()}:{self.port}" for name in names]
        return tuple(dict.fromkeys([*served, *self.allowed_hosts]))

    def app_options(self) -> AppOptions:
        """``create_app``'s options (browser checks, limits, retention) as these set them.

        Threads' and the store's time to live, and webhooks, are the app's
        parts' (see ``build_app``), read from these options there.
        """
        return {
            "cors_origins": self.cors_origins,
            "allowed_hosts": self.served_hosts,
            "max_body": self.max_body,
            "body_timeout": self.body_timeout,
            "max_streams_per_client": self.max_streams_per_client,
            "max_runs_per_client": self.max_runs_per_client,
            "trusted_proxies": self.trusted_proxies,
            "run_retention": self.run_retention,
            "idle_timeout": self.idle_timeout,
            "stream_log_bytes": self.stream_log_bytes,
            "runs_db_patience": self.runs_db_patience,
            # A process that only serves: collections deferred while runs are
            # in progress (process-wide, as tune_gc).
            "defer_gc": True,
        }

    def to_json(self) -> str:
        """These options as JSON, for worker processes (:meth:`from_json`)."""
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> ServeOptions:
        """The options :meth:`to_json` wrote."""
        given: dict[str, Any] = json.loads(text)
        # JSON has no tuples: the fields that hold one (each defaults to one) get theirs back.
        tuples = {f.name for f in fields(cls) if isinstance(f.default, tuple)}
        args: dict[str, Any] = {k: tuple(v) if k in tuples else v for k, v in given.items()}
        return cls(**args)


def is_postgres(db: str) -> bool:
    """Whether ``db`` names a PostgreSQL database (else it is a SQLite file)."""
    return is_postgres_url(db)


def _is_wildcard(host: str) -> bool:
    return host.strip("[]") in ("", "0.0.0.0", "::")
