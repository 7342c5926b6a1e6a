""":class:`RemoteAgent`: a subagent that runs as a run on another Agent Protocol server.

A ``task`` call to a remote subagent (or a background task) is one thread on
the remote server, made for it, and one run of ``graph_id`` on it: the task's
description as the user's message and the parent's files as the run's
``files``. The run is followed to its end over its event stream (its events
relayed into the parent's), or, when nobody listens to the parent, waited for
(``.../runs/wait``); its final state gives the answer and the file changes, which come back as a
:class:`~deepactors.filediff.FileDiff` and merge into the parent's files
exactly as a local child's do.

Cancelling the awaiting task (the parent's deadline, its cancellation, the
subagent's ``timeout``) cancels the remote run with ``POST
.../runs/{run_id}/cancel``, shielded and bounded by ``cancel_timeout``; the
stream is opened with ``on_disconnect="cancel"`` too, so a parent process that
dies leaves no run going. A message put in the child's inbox (a background
task's ``update_async_task``) becomes a new run on the same thread with
``multitask_strategy="interrupt"``, which the child follows in turn, as
deepagents' ``update_async_task`` does.

What the child's runs spent is charged to the parent however they ended
(a deepactors server records it for failed and cancelled runs too). When the
child ends, its thread is deleted on the server, unless ``keep_threads``:
its answer and file changes are here by then (see :mod:`._child`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, field
from typing import final

import anyio
import httpx

from .._core.perloop import PerLoop
from ..actors import ChildOutcome
from ..budget import Budget
from ..context import Inbox, RunContext
from ..errors import ConfigurationError
from ..filediff import FileRecord
from ._child import DEADLINE_GRACE as DEADLINE_GRACE
from ._child import REMOTE_RUN as REMOTE_RUN
from ._child import RemoteChild
from ._wire import Server, open_server

__all__ = [
    "DEADLINE_GRACE",
    "DEFAULT_CANCEL_TIMEOUT",
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_IDLE_TIMEOUT",
    "DEFAULT_MAX_ANSWER_BYTES",
    "DEFAULT_READ_TIMEOUT",
    "REMOTE_RUN",
    "RemoteAgent",
]

DEFAULT_CONNECT_TIMEOUT = 5.0
"""Seconds to open a connection to the remote server (and to send a request)."""

DEFAULT_READ_TIMEOUT = 60.0
"""Seconds the remote server may stay silent: deepactors and LangGraph servers
send a heartbeat on an open stream every 15 s or less, so a silence this long
is a server that hangs."""

DEFAULT_IDLE_TIMEOUT = 300.0
"""Seconds a run's event stream may go without an event (heartbeats do not
count): a server that only sends heartbeats holds the child no longer."""

DEFAULT_MAX_ANSWER_BYTES = 64 * 1024 * 1024
"""Bytes one answer of the remote server may hold (64 MiB): a response body (the
child's final state, its files included) or one event of its stream."""

DEFAULT_CANCEL_TIMEOUT = 5.0
"""Seconds a cancelled child spends telling the server to cancel its run (and
reading what it spent, and deleting its thread); as long again to delete the
thread of a child that ended."""


@final
@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class RemoteAgent:
    """A subagent served by another Agent Protocol server (deepactors or LangGraph).

    Give it to ``task`` as a :class:`~deepactors.middleware.SubAgentSpec`'s
    ``agent``, or as a subagent dict ``{"name", "description", "graph_id",
    "url"}`` to ``create_deep_agent``. It implements
    :class:`~deepactors.actors.ChildRunner`.

    Attributes:
        name: The subagent's name (its ``subagent_type``).
        graph_id: The assistant or graph the remote server runs (``assistant_id``).
        url: The server's base URL, ``http://host:port``.
        headers: Sent with every request (an ``x-api-key``, an
            ``Authorization``).
        connect_timeout: Seconds to connect and to send a request.
        read_timeout: Seconds the server may stay silent (None: for ever).
        idle_timeout: Seconds a run's event stream may go without an event,
            heartbeats aside (None: until the run's deadline). Past it, the
            child fails saying so, and its run is cancelled (the stream closes).
        max_answer_bytes: Bytes one answer may hold: a response body (the
            child's final state, its files included) or one event of a run's
            stream. A larger one is refused while it is read, not after: the
            child fails with an error naming this setting, and no more than
            this is held in memory for it.
        cancel_timeout: Seconds a cancelled child may spend cancelling its run
            (and reading what it spent, and deleting its thread); as long
            again to delete the thread of a child that ended.
        keep_threads: Keep each child's thread on the server when the child
            ends (to read or continue it there). By default it is deleted
            once its answer and file changes are here, unless the child
            stopped to wait for a human decision.

    Raises:
        ConfigurationError: An empty name or graph_id, or a URL that is not
            ``http(s)://host[:port][/path]``.
    """

    name: str
    graph_id: str
    url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    read_timeout: float | None = DEFAULT_READ_TIMEOUT
    idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT
    max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES
    cancel_timeout: float = DEFAULT_CANCEL_TIMEOUT
    keep_threads: bool = False
    _servers: PerLoop[Server] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        for key in ("name", "graph_id"):
            value = getattr(self, key)
            if not isinstance(value, str) or not value.strip():
                raise ConfigurationError(f"RemoteAgent {key} must be a non-empty string")
        try:
            parsed = httpx.URL(self.url)
        except (httpx.InvalidURL, TypeError) as exc:
            raise ConfigurationError(
                f"RemoteAgent {self.name!r}: url {self.url!r}: {exc}"
            ) from None
        if parsed.scheme not in ("http", "https") or not parsed.host:
            raise ConfigurationError(
                f"RemoteAgent {self.name!r}: url must be http(s)://host[:port], not {self.url!r}"
            )
        for key in ("connect_timeout", "cancel_timeout", "read_timeout", "idle_timeout"):
            value = getattr(self, key)
            optional = key in ("read_timeout", "idle_timeout")
            if (value is not None or not optional) and not (
                isinstance(value, int | float) and value > 0
            ):
                raise ConfigurationError(
                    f"RemoteAgent {key} must be seconds above 0, not {value!r}"
                )
        cap = self.max_answer_bytes
        if not isinstance(cap, int) or isinstance(cap, bool) or cap < 1024:
            raise ConfigurationError(
                f"RemoteAgent max_answer_bytes must be an int >= 1024, not {cap!r}"
            )
        object.__setattr__(self, "_servers", PerLoop(self._open, _close))

    async def _open(self) -> Server:
        # Making its SSL context loads CA certificates: blocking, so in a thread.
        make = functools.partial(
            open_server,
            self.url.rstrip("/"),
            self.headers,
            connect_timeout=self.connect_timeout,
            read_timeout=self.read_timeout,
            max_answer_bytes=self.max_answer_bytes,
            idle_timeout=self.idle_timeout,
        )
        return await anyio.to_thread.run_sync(make)

    async def aclose(self) -> None:
        """Close this event loop's HTTP clients now (else they are closed as the loop ends)."""
        await self._servers.aclose()

    def run_child(
        self,
        *,
        description: str,
        path: str,
        label: str,
        parent: RunContext,
        files: Mapping[str, FileRecord],
        timeout: float | None,
        budget: Budget | None = None,
        inbox: Inbox | None = None,
    ) -> Awaitable[ChildOutcome]:
        """Run the child on the remote server and reply (see ``ChildRunner``).

        The run is given the time left before the nearest deadline (the
        parent's, or ``timeout``) and the budget left (the parent's, within
        ``budget``); what it spent is added to the parent's usage and charged
        to its budget. A remote failure of any kind (unreachable, an error
        status, a failed run, a server that stopped mid-run) is a ``failed``
        outcome whose answer says what happened; a run that stopped to wait
        for a human decision is ``failed`` too, saying where it waits.
        """
        child = RemoteChild(
            agent=self,
            description=description,
            path=path,
            label=label,
            parent=parent,
            files=files,
            budget=budget,
            inbox=inbox,
        )
        return self._run(child, timeout)

    async def _run(self, child: RemoteChild, timeout: float | None) -> ChildOutcome:
        with anyio.move_on_after(math.inf if timeout is None else timeout):
            return await child.run(await self._servers.get())
        assert timeout is not None  # (only its timeout ends the scope)
        return ChildOutcome.timed_out(
            child.path,
            timeout,
            "The remote subagent",
            "its run was cancelled and none of its file changes were kept",
        )


async def _close(server: Server) -> None:
    await server.aclose()
