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

Closing a stdio session waits for the server to exit, within bounds (see
:mod:`._stdio`); a server whose calls a deadline cut off, and that has not
answered since, is presumed stuck and is given no time past that deadline, so a
run's own runtime closes within the run's ``timeout``.
"""

from __future__ import annotations

import functools
import importlib
import logging
import math
import sys
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from typing import TYPE_CHECKING, Any, TypeVar, cast

import anyio
import anyio.to_thread
from anyio.abc import TaskGroup, TaskStatus

from ..errors import ToolError
from ._config import MCPServer
from ._http import TOO_LARGE_MARK, http_transport
from ._stdio import ANSWER_TOO_LARGE, StderrTail, stdio_transport

if TYPE_CHECKING:
    from mcp import ClientSession
    from mcp_types import CallToolResult
    from mcp_types import Tool as RemoteTool

__all__ = ["Connection"]

_log = logging.getLogger("deepactors.mcp")

R = TypeVar("R")


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

    def __init__(self, session: ClientSession, ended: anyio.Event, tail: StderrTail | None):
        self.session = session
        self.ended = ended
        self.tail = tail

    def why(self) -> str:
        return self.tail.quote() if self.tail is not None else ""


class Connection:
    """The session to one MCP server that a runtime's actors share.

    What a session is made of (the command or URL, ``max_in_flight``,
    ``connect_timeout``, ``max_answer_bytes``) comes from ``server``; what a
    call may take (``call_timeout``) from the calling agent's own configuration.

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
        self._users = 0  # listings and calls in progress
        # The latest deadline that cut a call off, since the server last
        # answered one (None: it answers); see stop_by.
        self._cut_off: float | None = None

    @property
    def idle(self) -> bool:
        """Whether nothing is being listed or called (so the session may be closed)."""
        return self._users == 0

    def close(self) -> None:
        """End the session (if one is open): its task stops the server and leaves."""
        live = self._live
        if live is not None:
            live.ended.set()

    def stop_by(self) -> float:
        """When a stdio server being stopped must be gone (``anyio.current_time()`` scale).

        A server that answers gets the usual graces (:mod:`._stdio`). One whose
        calls a deadline cut off, with no answer since, is presumed stuck in them
        (not reading its stdin): it gets no time past that deadline, so the
        runtime of a run with ``timeout=`` closes within it.
        """
        return math.inf if self._cut_off is None else self._cut_off

    async def tools(self) -> list[RemoteTool]:
        """The server's tools, listed once per session (and again after it changes them)."""
        tools = self._tools
        if tools is not None:
            return tools
        # One listing for the tree: 1,000 subagents starting at once ask once.
        self._users += 1
        try:
            async with self._listing:
                if self._tools is None:
                    live = await self._session()
                    async with self._limiter:
                        self._tools = await self._request(
                            live, "list its tools", self._list, live.session
                        )
                return self._tools
        finally:
            self._users -= 1

    async def call(
        self,
        name: str,
        arguments: dict[str, Any],
        progress: Callable[[float, float | None, str | None], Awaitable[None]] | None = None,
        *,
        timeout: float | None = None,
    ) -> CallToolResult:
        """Call the server's tool ``name``.

        Args:
            name: The tool, by the server's name.
            arguments: Its arguments.
            progress: Called with each progress notification the server sends
                about the call (asking for them), if given.
            timeout: Seconds the call may take (the calling agent's
                ``call_timeout``); None: until the run's own deadline.

        Raises:
            ToolError: The server could not be started, died during the call,
                answered with a protocol error, took longer than ``timeout``, or
                sent an answer past ``max_answer_bytes``; the message says which.
        """
        self._users += 1
        try:
            async with self._limiter:
                live = await self._session()
                call = functools.partial(live.session.call_tool, progress_callback=progress)
                with anyio.move_on_after(math.inf if timeout is None else timeout) as scope:
                    # Cancelled by the scope: the SDK tells the server (notifications/cancelled).
                    return await self._watched(live, f"run {name!r}", call, name, arguments)
                assert scope.cancelled_caught
                raise ToolError(
                    f"the MCP tool {name!r} of {self.server.name!r} took longer than "
                    f"{timeout:g} s and was cancelled"
                )
        finally:
            self._users -= 1

    async def _watched(
        self, live: _Live, what: str, fn: Callable[..., Awaitable[R]], *args: Any
    ) -> R:
        """:meth:`_request`, noting a call a deadline cuts off (see :meth:`stop_by`)."""
        deadline = anyio.current_effective_deadline()
        try:
            result = await self._request(live, what, fn, *args)
        except anyio.get_cancelled_exc_class():
            if deadline <= anyio.current_time():
                self._cut_off = max(deadline, self._cut_off or -math.inf)
            raise
        self._cut_off = None
        return result

    async def _request(
        self, live: _Live, what: str, fn: Callable[..., Awaitable[R]], *args: Any
    ) -> R:
        from mcp import MCPError
        from mcp_types import CONNECTION_CLOSED, PARSE_ERROR

        try:
            return await fn(*args)
        except MCPError as exc:
            error = exc.error
            if error.code == ANSWER_TOO_LARGE or (
                error.code in (CONNECTION_CLOSED, PARSE_ERROR) and _too_large(error.message)
            ):
                raise ToolError(
                    f"the MCP server {self.server.name!r} could not {what}: its answer was "
                    f"larger than max_answer_bytes={self.server.max_answer_bytes} bytes "
                    "and was not read (ask for less, or raise the server's max_answer_bytes)"
                ) from None
            if error.code == CONNECTION_CLOSED:
                # The in-flight call may or may not have run: not repeated, reported.
                await _settle(live)
                again = "started again" if self.server.transport == "stdio" else "reconnected"
                raise ToolError(
                    f"the MCP server {self.server.name!r} closed the connection before it "
                    f"could {what}; it will be {again} on the next call{live.why()}"
                ) from None
            raise ToolError(
                f"the MCP server {self.server.name!r} refused to {what}: {error.message}"
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
        tail = StderrTail(server.name) if server.transport == "stdio" else None
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
        tail: StderrTail | None,
        ended: anyio.Event,
        started: list[_Live],
        task_status: TaskStatus[_Live],
    ) -> BaseException | None:
        from mcp import ClientSession

        server = self.server
        async with AsyncExitStack() as stack:
            transport: AbstractAsyncContextManager[Any] = (
                http_transport(server)
                if tail is None
                else stdio_transport(server, tail, stop_by=self.stop_by)
            )
            read, write = await stack.enter_async_context(transport)
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

    async def _on_message(self, message: object) -> None:
        from mcp_types import ToolListChangedNotification

        if isinstance(message, ToolListChangedNotification):
            self._tools = None
        await anyio.lowlevel.checkpoint()


def _too_large(message: str) -> bool:
    # The SDK's words for an event past its max_sse_event_size, or ours for a
    # plain answer past the cap (which it wraps as a parse error).
    return TOO_LARGE_MARK in message or "byte limit" in message


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


async def _settle_tail(tail: StderrTail | None) -> None:
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
    # The SDK imports it at a tool's first answer checked against its output
    # schema, on the event loop; jsonschema's import lists folders of schemas.
    "jsonschema",
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
