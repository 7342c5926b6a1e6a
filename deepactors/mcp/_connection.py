"""One MCP server's session within one runtime: opened on first use, reopened after it dies.

The session lives in a task of the runtime (its ``system`` task group, see
``Runtime.shared``), not in the task of the tool call that opened it: the SDK's
transports and ``ClientSession`` hold task groups, which must be left by the
task that entered them, and the session must outlive that call so the rest of
the tree can use it. That task waits until the session ends (the server closed
the connection, or died) or the runtime closes; either way it leaves the
session and the transport, which for stdio ends the server and reaps it (the
SDK does so under a shield, with every wait bounded).

A call in flight when the server dies fails with a :class:`ToolError` the model
reads; the next call starts the server again, once, and says why if it cannot.
"""

from __future__ import annotations

import functools
import importlib
import logging
import os
import sys
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import IO, TYPE_CHECKING, Any, TypeVar, cast

import anyio
import anyio.to_thread
from anyio.abc import TaskGroup, TaskStatus

from ..errors import ToolError
from ..tracing import outgoing_headers
from ._config import MCPServer

if TYPE_CHECKING:
    from mcp import ClientSession
    from mcp_types import CallToolResult
    from mcp_types import Tool as RemoteTool

__all__ = ["Connection", "open_connection"]

_log = logging.getLogger("deepactors.mcp")

R = TypeVar("R")

# Lines of a stdio server's stderr quoted when it dies.
_TAIL_LINES = 6


class _StderrTail:
    """A stdio server's stderr: each line logged at DEBUG, the last few kept for errors."""

    def __init__(self, server: str) -> None:
        self._server = server
        self.lines: deque[str] = deque(maxlen=_TAIL_LINES)
        self._partial = b""
        read, write = os.pipe()
        os.set_blocking(read, False)
        self._read = read
        # Handed to the subprocess as its stderr; ours is closed once it runs,
        # so the pipe ends when the server (and whatever it started) exits.
        self.write: IO[str] | None = os.fdopen(write, "w")

    def close_write(self) -> None:
        if self.write is not None:
            self.write.close()
            self.write = None

    async def pump(self) -> None:
        while True:
            await anyio.wait_readable(self._read)
            try:
                data = os.read(self._read, 65536)
            except BlockingIOError:
                continue
            if not data:
                return
            self._take(data)

    def close(self) -> None:
        """Close both ends (once the pump is done)."""
        self.close_write()
        if self._read >= 0:
            os.close(self._read)
            self._read = -1

    def _take(self, data: bytes) -> None:
        *lines, partial = (self._partial + data).split(b"\n")
        self._partial = partial[-4096:]  # a line that never ends must not grow without bound
        for raw in lines:
            line = raw.decode("utf-8", "replace").rstrip()
            if line:
                self.lines.append(line)
                _log.debug("%s: %s", self._server, line)

    def quote(self) -> str:
        lines = list(self.lines)
        if self._partial.strip():
            lines.append(self._partial.decode("utf-8", "replace").rstrip())
        return "; its stderr ended with:\n" + "\n".join(lines) if lines else ""


class _Watched:
    """The transport's read stream, telling when it ends (the connection is gone).

    The SDK's dispatcher reads it to the end; wrapping it is how a connection
    learns, through public interfaces only, that the server went away.
    """

    def __init__(self, inner: Any, ended: anyio.Event) -> None:
        self._inner = inner
        self._ended = ended

    @property
    def last_context(self) -> Any:
        # The streamable HTTP transport's stream carries each message's contextvars.
        return getattr(self._inner, "last_context", None)

    def __aiter__(self) -> _Watched:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            self._ended.set()
            raise StopAsyncIteration from None

    async def receive(self) -> Any:
        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            self._ended.set()
            raise

    async def aclose(self) -> None:
        self._ended.set()
        await self._inner.aclose()

    def close(self) -> None:
        self._ended.set()
        self._inner.close()

    async def __aenter__(self) -> _Watched:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class _Live:
    """One open session, and how it ended."""

    def __init__(self, session: ClientSession, ended: anyio.Event, tail: _StderrTail | None):
        self.session = session
        self.ended = ended
        self.tail = tail

    def why(self) -> str:
        return self.tail.quote() if self.tail is not None else ""


class Connection:
    """The session to one MCP server that a runtime's actors share.

    Args:
        server: The server's configuration.
        tg: Where the session's task lives (the runtime's).
    """

    def __init__(self, server: MCPServer, tg: TaskGroup) -> None:
        self.server = server
        self._tg = tg
        self._limiter = anyio.Semaphore(server.max_in_flight)
        self._lock = anyio.Lock()
        self._listing = anyio.Lock()
        self._live: _Live | None = None
        # Kept across a reconnect: a server that came back has the same tools,
        # unless it says otherwise (notifications/tools/list_changed).
        self._tools: list[RemoteTool] | None = None
        self.opened = 0  # sessions opened so far (a reconnect adds one)
        self.named: dict[int, Any] = {}  # for the middleware: tools as each agent names them

    async def tools(self) -> list[RemoteTool]:
        """The server's tools, listed once per session (and again after it changes them)."""
        tools = self._tools
        if tools is not None:
            return tools
        # One listing for the tree: 1,000 subagents starting at once ask once.
        async with self._listing:
            if self._tools is None:
                live = await self._session()
                async with self._limiter:
                    self._tools = await self._request(
                        live, "list its tools", self._list, live.session
                    )
            return self._tools

    async def call(
        self,
        name: str,
        arguments: dict[str, Any],
        progress: Callable[[float, float | None, str | None], Awaitable[None]] | None = None,
    ) -> CallToolResult:
        """Call the server's tool ``name``.

        Args:
            name: The tool, by the server's name.
            arguments: Its arguments.
            progress: Called with each progress notification the server sends
                about the call (asking for them), if given.

        Raises:
            ToolError: The server could not be started, died during the call, or
                answered with a protocol error; the message says which.
        """
        async with self._limiter:
            live = await self._session()
            call = functools.partial(live.session.call_tool, progress_callback=progress)
            timeout = self.server.call_timeout
            if timeout is None:
                return await self._request(live, f"run {name!r}", call, name, arguments)
            with anyio.move_on_after(timeout) as scope:
                # Cancelled by the scope: the SDK tells the server (notifications/cancelled).
                return await self._request(live, f"run {name!r}", call, name, arguments)
            assert scope.cancelled_caught
            raise ToolError(
                f"the MCP tool {name!r} of {self.server.name!r} took longer than "
                f"{timeout:g} s and was cancelled"
            )

    async def _request(
        self, live: _Live, what: str, fn: Callable[..., Awaitable[R]], *args: Any
    ) -> R:
        from mcp import MCPError
        from mcp_types import CONNECTION_CLOSED

        try:
            return await fn(*args)
        except MCPError as exc:
            if exc.error.code == CONNECTION_CLOSED:
                # The in-flight call may or may not have run: not repeated, reported.
                await _settle(live)
                again = "started again" if self.server.transport == "stdio" else "reconnected"
                raise ToolError(
                    f"the MCP server {self.server.name!r} closed the connection before it "
                    f"could {what}; it will be {again} on the next call{live.why()}"
                ) from None
            raise ToolError(
                f"the MCP server {self.server.name!r} refused to {what}: {exc.error.message}"
            ) from None

    @staticmethod
    async def _list(session: ClientSession) -> list[RemoteTool]:
        from mcp_types import PaginatedRequestParams

        listing = await session.list_tools()
        tools = list(listing.tools)
        # A server that pages forever must not hang the run.
        for _ in range(100):
            if listing.next_cursor is None:
                break
            listing = await session.list_tools(
                params=PaginatedRequestParams(cursor=listing.next_cursor)
            )
            tools.extend(listing.tools)
        return tools

    async def _session(self) -> _Live:
        live = self._live
        if live is not None and not live.ended.is_set():
            return live
        async with self._lock:
            live = self._live
            if live is None or live.ended.is_set():
                self._live = None
                live = self._live = await self._open()
            return live

    async def _open(self) -> _Live:
        await load_sdk()
        try:
            live: _Live = await self._tg.start(self._host)
        except ToolError:
            raise
        except Exception as exc:
            cause = _leaf(exc)
            how = "started" if self.server.transport == "stdio" else "reached"
            raise ToolError(
                f"the MCP server {self.server.name!r} could not be {how}: "
                f"{type(cause).__name__}: {cause}"
            ) from None
        self.opened += 1
        return live

    async def _host(self, *, task_status: TaskStatus[_Live]) -> None:
        """Open a session, hand it over, and keep it until it ends or the runtime closes."""
        server = self.server
        ended = anyio.Event()
        tail = _StderrTail(server.name) if server.transport == "stdio" else None
        started: list[_Live] = []
        failure: BaseException | None = None
        try:
            async with anyio.create_task_group() as pumps:
                if tail is not None:
                    pumps.start_soon(tail.pump)
                try:
                    failure = await self._serve(tail, ended, started, task_status)
                except Exception as exc:
                    if not started:
                        failure = exc
                    else:
                        # The session broke (its transport failed): it has ended,
                        # and the runtime must not (this task is in its task group).
                        _log.debug("MCP server %s: session failed", server.name, exc_info=True)
                finally:
                    pumps.cancel_scope.cancel()
        finally:
            ended.set()
            if tail is not None:
                tail.close()
        if failure is not None:
            raise failure
        _log.debug("MCP server %s: session closed", server.name)

    async def _serve(
        self,
        tail: _StderrTail | None,
        ended: anyio.Event,
        started: list[_Live],
        task_status: TaskStatus[_Live],
    ) -> BaseException | None:
        from mcp import ClientSession

        server = self.server
        async with AsyncExitStack() as stack:
            read, write = await stack.enter_async_context(_transport(server, tail))
            if tail is not None:
                tail.close_write()
            session = await stack.enter_async_context(
                ClientSession(
                    cast(Any, _Watched(read, ended)), write, message_handler=self._on_message
                )
            )
            try:
                with anyio.fail_after(server.connect_timeout):
                    await session.initialize()
            except Exception as exc:
                # Returned, not raised: it would come out of the SDK's task
                # groups wrapped in exception groups.
                await _settle_tail(tail)
                reason = "no answer in time" if isinstance(exc, TimeoutError) else str(exc)
                return ToolError(
                    f"the MCP server {server.name!r} did not complete MCP's handshake "
                    f"({type(exc).__name__}: {reason})" + (tail.quote() if tail else "")
                )
            live = _Live(session, ended, tail)
            started.append(live)
            task_status.started(live)
            _log.debug("MCP server %s: session open", server.name)
            await ended.wait()
        return None

    async def _on_message(self, message: Any) -> None:
        from mcp_types import ToolListChangedNotification

        if isinstance(message, ToolListChangedNotification):
            self._tools = None
        await anyio.lowlevel.checkpoint()


def _leaf(exc: BaseException) -> BaseException:
    """The first error inside the exception groups the SDK's task groups wrap it in."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


async def _settle(live: _Live) -> None:
    """Give a dying session a moment to wind down, so its error quotes the server's last words."""
    with anyio.move_on_after(1):
        await live.ended.wait()
    await _settle_tail(live.tail)


async def _settle_tail(tail: _StderrTail | None) -> None:
    # What the server wrote just before exiting is in the pipe; one pass of the
    # loop lets the pump read it.
    if tail is not None:
        for _ in range(3):
            await anyio.sleep(0.01)


_SDK_MODULES = (
    "mcp",
    "mcp_types",
    "mcp.client.stdio",
    "mcp.client.streamable_http",
    "mcp.shared._httpx_utils",
)


async def load_sdk() -> None:
    """Import the ``mcp`` SDK in a worker thread, the first time.

    Importing it takes a good second (its many pydantic models): done on the
    event loop, it would stall every other run of the process meanwhile.
    """
    if not all(name in sys.modules for name in _SDK_MODULES):
        await anyio.to_thread.run_sync(_import_sdk)


def _import_sdk() -> None:
    for name in _SDK_MODULES:
        importlib.import_module(name)


@asynccontextmanager
async def _transport(server: MCPServer, tail: _StderrTail | None) -> AsyncIterator[Any]:
    if server.transport == "stdio":
        from mcp import StdioServerParameters, stdio_client

        assert server.command is not None
        assert tail is not None
        assert tail.write is not None
        params = StdioServerParameters(
            command=server.command,
            args=list(server.args),
            env=dict(server.env) if server.env is not None else None,
            cwd=server.cwd,
        )
        async with stdio_client(params, errlog=cast(Any, tail.write)) as streams:
            yield streams
        return
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    headers = dict(server.headers or {})
    if server.auth_token is not None:
        headers["Authorization"] = f"Bearer {server.auth_token}"
    assert server.url is not None
    # Building the client loads the CA certificates from disk: not on the loop.
    client = await anyio.to_thread.run_sync(functools.partial(create_mcp_http_client, headers))
    hooks = client.event_hooks
    client.event_hooks = {**hooks, "request": [*hooks.get("request", ()), _send_trace]}
    async with client, streamable_http_client(server.url, http_client=client) as streams:
        yield streams


async def _send_trace(request: Any) -> None:
    """Put the current trace context in an MCP request's headers (``traceparent``).

    The SDK sends each message from a task of its own, run in the context the
    message was sent from: a tool call's request is sent in its call's
    context, where the call's ``execute_tool`` span is current, so the server
    sees that span as its parent. Nothing is added when tracing is off.
    """
    headers = outgoing_headers()
    if headers:
        request.headers.update(headers)


@asynccontextmanager
async def open_connection(server: MCPServer) -> AsyncIterator[Connection]:
    """A connection of its own, closed on leaving: for a call made outside any runtime."""
    async with anyio.create_task_group() as tg:
        try:
            yield Connection(server, tg)
        finally:
            tg.cancel_scope.cancel()
