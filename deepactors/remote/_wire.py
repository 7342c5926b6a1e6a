"""The Agent Protocol over HTTP, on asyncio and trio: the few calls a remote child makes.

``langgraph-sdk``'s async client cannot be used here: every call of it that
sends or reads JSON goes through ``asyncio.get_running_loop().run_in_executor``
(its ``_aencode_json`` / ``_adecode_json``), and its reconnects sleep with
``asyncio.sleep``, so none of it runs on trio. These calls go through
``httpx.AsyncClient`` itself (anyio underneath, so both loops), on the same
endpoints and bodies as the SDK's ``threads`` and ``runs`` clients.

Every failure becomes a :class:`RemoteFailure` whose message the parent's model
reads: who was asked, what for, and what came back.
"""

from __future__ import annotations

import json
import random
import ssl
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
import httpx

from .._core.jsonvalue import JSONValue
from ._read import AnswerTooLarge, NoEvents, read_body, read_events

__all__ = [
    "CHILDREN_PER_CLIENT",
    "Connection",
    "RemoteFailure",
    "Server",
    "ServerKind",
    "open_server",
    "stream_run",
    "wait_run",
]

ServerKind = Literal["deepactors", "langgraph"]

_DETAIL_CHARS = 300
# A refused stream (429: the server's cap on one client's open streams) is
# tried again: another child's stream ends soon. Backoff doubles to this cap.
_BUSY_BACKOFF_CAP = 2.0


class RemoteFailure(Exception):
    """A remote call failed; ``str()`` is what the parent's model is told.

    Attributes:
        status: The HTTP status the server answered with, if it answered one.
    """

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


CHILDREN_PER_CLIENT = 8
"""Children that share one HTTP client (one connection pool) of a server.

httpcore looks at every connection of a pool for each request it sends, and a
child's stream holds one connection while it runs: with one pool for a
fan-out of 1,000 children, each request would walk 1,000 connections. So a
server's children are spread over pools of this many."""


@dataclass(slots=True, eq=False)
class Server:
    """One event-loop run's view of one remote server: its HTTP clients, its kind.

    Attributes:
        url: The server's base URL, for messages.
        kind: ``deepactors`` or ``langgraph`` once asked (``GET /info``).
    """

    url: str
    headers: dict[str, str]
    timeout: httpx.Timeout
    verify: ssl.SSLContext
    max_answer_bytes: int
    idle_timeout: float | None
    clients: list[httpx.AsyncClient] = field(default_factory=list)
    active: list[int] = field(default_factory=list)
    kind: ServerKind | None = None
    probing: anyio.Event | None = None
    # Whether it streams events-lite (a deepactors server older than that
    # mode refuses it with a 422: then events, state updates and all).
    lite: bool = True

    def lease(self) -> Connection:
        """A connection for one child: on the least busy client, a new one if all are full."""
        active = self.active
        slot = min(range(len(active)), key=active.__getitem__, default=-1)
        if slot < 0 or active[slot] >= CHILDREN_PER_CLIENT:
            self.clients.append(
                httpx.AsyncClient(
                    base_url=self.url,
                    headers=self.headers,
                    limits=httpx.Limits(
                        max_connections=None, max_keepalive_connections=CHILDREN_PER_CLIENT
                    ),
                    timeout=self.timeout,
                    verify=self.verify,  # made once (loading CA certificates blocks)
                )
            )
            active.append(0)
            slot = len(active) - 1
        active[slot] += 1
        return Connection(server=self, client=self.clients[slot], slot=slot)

    def release(self, connection: Connection) -> None:
        """The child is done with its connection."""
        self.active[connection.slot] -= 1

    async def aclose(self) -> None:
        """Close every client."""
        for client in self.clients:
            await client.aclose()


@dataclass(slots=True, eq=False)
class Connection:
    """What one child talks to its server through (:meth:`Server.lease`)."""

    server: Server
    client: httpx.AsyncClient
    slot: int

    @property
    def url(self) -> str:
        """The server's base URL."""
        return self.server.url

    @property
    def kind(self) -> ServerKind | None:
        """The server's kind, once known."""
        return self.server.kind

    async def server_kind(self) -> ServerKind:
        """Whether the server is a deepactors server (asked once per loop, then remembered)."""
        server = self.server
        while server.kind is None:
            if server.probing is not None:
                await server.probing.wait()
                continue
            server.probing = probing = anyio.Event()
            try:
                info = await self.call("GET", "/info")
                version = info.get("version") if isinstance(info, Mapping) else None
                server.kind = "deepactors" if version == "deepactors" else "langgraph"
            finally:
                server.probing = None
                probing.set()
        return server.kind

    async def call(self, method: str, path: str, body: object = None) -> JSONValue:
        """One request; its JSON answer (None for an empty body).

        Raises:
            RemoteFailure: The server could not be reached, answered an error
                status, or answered something that is not JSON.
        """
        content = None if body is None else json.dumps(body).encode()
        headers = {"content-type": "application/json"} if content is not None else None
        try:
            async with self.client.stream(method, path, content=content, headers=headers) as res:
                raw = await _body(self, res, method, path)
        except httpx.HTTPError as exc:
            raise RemoteFailure(_transport_error(self.url, method, path, exc)) from None
        if res.status_code >= 400:
            raise RemoteFailure(
                _status_error(self.url, method, path, res.status_code, raw),
                status=res.status_code,
            )
        if not raw:
            return None
        try:
            answer: JSONValue = json.loads(raw)
        except ValueError:
            raise RemoteFailure(
                f"{self.url} answered {method} {path} with something that is not JSON: {_clip(raw)}"
            ) from None
        return answer


def open_server(
    url: str,
    headers: Mapping[str, str],
    *,
    connect_timeout: float,
    read_timeout: float | None,
    max_answer_bytes: int,
    idle_timeout: float | None,
) -> Server:
    """A server's view for this loop (blocking: it loads CA certificates; call it in a thread)."""
    return Server(
        url=url,
        headers=dict(headers),
        # No wait for a pooled connection beyond the child's own deadline.
        timeout=httpx.Timeout(connect_timeout, read=read_timeout, write=connect_timeout, pool=None),
        verify=httpx.create_ssl_context(),
        max_answer_bytes=max_answer_bytes,
        idle_timeout=idle_timeout,
    )


async def _body(conn: Connection | Server, res: httpx.Response, method: str, path: str) -> bytes:
    """``res``'s body, at most the server's ``max_answer_bytes``.

    Raises:
        RemoteFailure: It is longer (the rest is not read).
    """
    server = conn if isinstance(conn, Server) else conn.server
    try:
        return await read_body(res, server.max_answer_bytes)
    except AnswerTooLarge as exc:
        raise RemoteFailure(_too_large(server, f"answered {method} {path} with", exc)) from None


def _too_large(server: Server, what: str, exc: AnswerTooLarge) -> str:
    return (
        f"{server.url} {what} more than max_answer_bytes={server.max_answer_bytes} bytes "
        f"({exc.size} read); the rest was not read"
    )


async def stream_run(
    conn: Connection,
    path: str,
    body: Mapping[str, object],
    *,
    on_run: Callable[[str], None],
    on_part: Callable[[str, JSONValue], None],
    extra_headers: Mapping[str, str],
) -> None:
    """``POST path`` (a ``.../runs/stream``) and read its events to the run's end.

    Args:
        conn: The connection.
        path: ``/threads/{id}/runs/stream``.
        body: The run to create.
        on_run: Called with the run's id as soon as it is known.
        on_part: Called with each part's mode (``events``, ``custom``...,
            without its namespace) and data, in order.
        extra_headers: Sent with the request (trace context).

    Raises:
        RemoteFailure: The run could not be created, the stream broke off, or
            the run ended with an error (its message).
    """

    async def read(res: httpx.Response) -> None:
        await _read_stream(conn, path, res, on_run, on_part)

    headers = {"accept": "text/event-stream", "cache-control": "no-store", **extra_headers}
    await _post(conn, path, body, headers, read)


async def wait_run(
    conn: Connection,
    path: str,
    body: Mapping[str, object],
    *,
    on_run: Callable[[str], None],
    extra_headers: Mapping[str, str],
) -> Mapping[str, Any]:
    """``POST path`` (a ``.../runs/wait``): the run's final values, with no stream to read.

    For a child nobody listens to: one request fewer than a stream and a read of
    the thread's state. The server keeps the response open until the run ends
    (sending whitespace meanwhile), and names the run in its headers at once.

    Raises:
        RemoteFailure: As :func:`stream_run`.
    """
    values: list[Mapping[str, Any]] = []

    async def read(res: httpx.Response) -> None:
        url = conn.url
        if res.status_code >= 400:
            raw = await _body(conn, res, "POST", path)
            raise RemoteFailure(
                _status_error(url, "POST", path, res.status_code, raw), status=res.status_code
            )
        run_id = _run_id(res.headers.get("content-location", ""))
        if run_id:
            on_run(run_id)
        raw = await _body(conn, res, "POST", path)
        try:
            answer = json.loads(raw)
        except ValueError:
            raise RemoteFailure(
                f"{url} answered POST {path} with something that is not JSON: {_clip(raw)}"
            ) from None
        if not isinstance(answer, Mapping):
            raise RemoteFailure(f"{url} answered POST {path} with {_clip(raw)}, not values")
        if "__error__" in answer:
            raise RemoteFailure(_run_error(url, run_id, answer["__error__"]))
        values.append(answer)

    await _post(conn, path, body, dict(extra_headers), read)
    return values[0]


async def _post(
    conn: Connection,
    path: str,
    body: Mapping[str, object],
    headers: dict[str, str],
    read: Callable[[httpx.Response], Awaitable[None]],
) -> None:
    """POST a run and hand its open response to ``read``; a 429 is tried again."""
    content = json.dumps(body).encode()
    headers["content-type"] = "application/json"
    attempt = 0
    while True:
        try:
            async with conn.client.stream("POST", path, content=content, headers=headers) as res:
                if res.status_code == 429:
                    attempt += 1
                    delay = min(_BUSY_BACKOFF_CAP, 0.05 * 2**attempt) * (0.5 + random.random())
                else:
                    await read(res)
                    return
        except httpx.HTTPError as exc:
            raise RemoteFailure(_transport_error(conn.url, "POST", path, exc)) from None
        await anyio.sleep(delay)  # the server's cap on open streams: one ends soon


async def _read_stream(
    conn: Connection,
    path: str,
    res: httpx.Response,
    on_run: Callable[[str], None],
    on_part: Callable[[str, JSONValue], None],
) -> None:
    url = conn.url
    if res.status_code >= 400:
        raw = await _body(conn, res, "POST", path)
        raise RemoteFailure(
            _status_error(url, "POST", path, res.status_code, raw), status=res.status_code
        )
    kind = res.headers.get("content-type", "").partition(";")[0].strip()
    if kind != "text/event-stream":
        raw = await _body(conn, res, "POST", path)
        raise RemoteFailure(
            f"{url} answered POST {path} with {kind or 'no content type'}, not an event "
            f"stream: {_clip(raw)}"
        )
    # The run's id is in its Content-Location (deepactors and LangGraph alike):
    # known before the first event, so a cancel right away can name it.
    run_id = _run_id(res.headers.get("content-location", ""))
    if run_id:
        on_run(run_id)
    # Read to the end whatever comes (the server closes the stream after an
    # error); an event past the cap, or a stream without events for too long,
    # ends the reading at once (see read_events).
    failure: RemoteFailure | None = None

    def on_event(event: str, text: str) -> None:
        nonlocal run_id, failure
        if failure is not None:
            return
        mode = event.partition("|")[0]
        try:
            payload = json.loads(text) if text else None
        except ValueError:
            failure = RemoteFailure(
                f"{url}: a {mode or 'nameless'} event of run {run_id or '?'} is not JSON: "
                f"{_clip(text.encode())}"
            )
            return
        match mode:
            case "metadata":
                if not run_id and isinstance(payload, Mapping):
                    run_id = str(payload.get("run_id") or "")
                    if run_id:
                        on_run(run_id)
            case "error":
                failure = RemoteFailure(_run_error(url, run_id, payload))
            case "end":
                pass  # (LangGraph's; the run's status says how it ended)
            case _:
                on_part(mode, payload)

    server = conn.server
    try:
        await read_events(res, on_event, cap=server.max_answer_bytes, idle=server.idle_timeout)
    except AnswerTooLarge as exc:
        raise RemoteFailure(
            _too_large(server, f"sent an event of run {run_id or '?'} of", exc)
        ) from None
    except NoEvents:
        raise RemoteFailure(
            f"{url} sent no event of run {run_id or '?'} for {server.idle_timeout:g} s "
            "(idle_timeout; heartbeats aside): given up on"
        ) from None
    if failure is not None:
        raise failure


def _run_id(location: str) -> str:
    # /threads/{thread_id}/runs/{run_id} (or /runs/{run_id} for a stateless run)
    _, sep, tail = location.rpartition("/runs/")
    return tail.split("/")[0] if sep else ""


def _run_error(url: str, run_id: str, payload: object) -> str:
    if isinstance(payload, Mapping):
        name = payload.get("error") or "Error"
        message = payload.get("message") or ""
        return f"the run {run_id} on {url} failed: {name}: {message}".rstrip(": ")
    return f"the run {run_id} on {url} failed: {_clip(json.dumps(payload).encode())}"


def _transport_error(url: str, method: str, path: str, exc: httpx.HTTPError) -> str:
    what = str(exc) or type(exc).__name__
    if isinstance(exc, httpx.ConnectError):
        return f"could not connect to {url} ({what}): is the server running?"
    if isinstance(exc, httpx.TimeoutException):
        return f"{url} did not answer {method} {path} in time ({type(exc).__name__})"
    if isinstance(exc, httpx.RemoteProtocolError):
        return (
            f"the connection to {url} broke off during {method} {path} ({what}): "
            "did the server stop?"
        )
    return f"{method} {url}{path} failed: {type(exc).__name__}: {what}"


def _status_error(url: str, method: str, path: str, status: int, raw: bytes) -> str:
    detail = _clip(raw)
    try:
        answer = json.loads(raw)
    except ValueError:
        pass
    else:
        if isinstance(answer, Mapping):
            found = answer.get("detail") or answer.get("message")
            if found:
                detail = str(found)[:_DETAIL_CHARS]
    hint = ""
    if status == 404 and "/runs" in path:
        hint = " (is the graph_id one the server serves?)"
    elif status in (401, 403):
        hint = " (check the subagent's headers: an API key?)"
    return f"{url} answered {status} to {method} {path}: {detail}{hint}"


def _clip(raw: bytes) -> str:
    text = raw[: _DETAIL_CHARS + 1].decode("utf-8", "replace")
    text = " ".join(text.split())
    return text if len(text) <= _DETAIL_CHARS else text[: _DETAIL_CHARS - 3] + "..."
