"""JSON-RPC 2.0 over newline-delimited JSON: the Agent Client Protocol's wire.

One :class:`Peer` per connection: it reads messages from the client, runs a
handler task per request (and per notification) in its task group, answers
each request with its handler's result or error, and sends requests of its own
to the client (:meth:`Peer.request`), matching the answers by id. Streams are
anyio byte streams, so it runs over stdio (in worker threads) or any pipe, on
asyncio and on trio.
"""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping

import anyio
from anyio.abc import ByteReceiveStream, ByteSendStream, TaskGroup

from .._core.jsonvalue import JSONObject, JSONValue
from .._core.logs import get_logger

__all__ = [
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "METHOD_NOT_FOUND",
    "RESOURCE_NOT_FOUND",
    "Handler",
    "Peer",
    "RpcError",
]

_log = get_logger("deepactors.acp")

METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
RESOURCE_NOT_FOUND = -32002
MAX_LINE = 64 * 1024 * 1024
"""Bytes one message may have (a prompt with images, a file's content): past it
the connection is closed, rather than held in memory without end."""

Handler = Callable[[Mapping[str, JSONValue]], Awaitable[object]]
"""A method's handler: its params, to its result (a request's) or nothing."""


class RpcError(Exception):
    """A JSON-RPC error: raised by a handler to answer with it, or by
    :meth:`Peer.request` when the other side answered with one."""

    def __init__(self, code: int, message: str, data: object = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


class Peer:
    """One JSON-RPC connection (see the module docstring).

    Args:
        receive: The bytes the other side sends.
        send: Where this side's messages go.
        methods: Handlers of the other side's requests, by method.
        notifications: Handlers of its notifications, by method.
    """

    def __init__(
        self,
        receive: ByteReceiveStream,
        send: ByteSendStream,
        *,
        methods: Mapping[str, Handler],
        notifications: Mapping[str, Handler],
    ) -> None:
        self._receive = receive
        self._send = send
        self._methods = dict(methods)
        self._notifications = dict(notifications)
        self._lock = anyio.Lock()
        self._next_id = 0
        self._waiting: dict[int, _Waiter] = {}
        self._closed = False

    async def serve(self) -> None:
        """Read and dispatch messages until the other side closes its end."""
        async with anyio.create_task_group() as tg:
            try:
                async for message in self._messages():
                    self._dispatch(tg, message)
            finally:
                self._closed = True
                for waiter in self._waiting.values():
                    waiter.answer(
                        {"error": {"code": INTERNAL_ERROR, "message": "connection closed"}}
                    )
                tg.cancel_scope.cancel()

    async def _messages(self) -> AsyncIterator[JSONObject]:
        buffer = b""
        while True:
            try:
                data = await self._receive.receive()
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                return
            buffer += data
            if len(buffer) > MAX_LINE:
                _log.error("message over the size limit: closing", limit=MAX_LINE)
                return
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                if not line.strip():
                    continue
                try:
                    message = json.loads(line)
                except ValueError:
                    await self._write({"error": {"code": -32700, "message": "parse error"}})
                    continue
                if isinstance(message, dict):
                    yield message

    def _dispatch(self, tg: TaskGroup, message: JSONObject) -> None:
        method = message.get("method")
        if isinstance(method, str):
            params = message.get("params") or {}
            if "id" in message:
                tg.start_soon(self._answer, message["id"], method, params)
            else:
                handler = self._notifications.get(method)
                if handler is not None:
                    tg.start_soon(self._notify, handler, params)
            return
        answered = message.get("id")  # our requests' ids are ints: no other is waited for
        waiter = self._waiting.pop(answered, None) if isinstance(answered, int) else None
        if waiter is not None:
            waiter.answer(message)

    async def _answer(self, request_id: JSONValue, method: str, params: JSONValue) -> None:
        handler = self._methods.get(method)
        if handler is None:
            error: dict[str, object] = {
                "code": METHOD_NOT_FOUND,
                "message": f"method not found: {method}",
            }
            await self._write({"id": request_id, "error": error})
            return
        try:
            result = await handler(params if isinstance(params, Mapping) else {})
        except RpcError as exc:
            error = {"code": exc.code, "message": exc.message}
            if exc.data is not None:
                error["data"] = exc.data
            await self._write({"id": request_id, "error": error})
            return
        except Exception as exc:
            _log.warning("request failed", method=method, error=repr(exc))
            error = {"code": INTERNAL_ERROR, "message": f"{type(exc).__name__}: {exc}"}
            await self._write({"id": request_id, "error": error})
            return
        await self._write({"id": request_id, "result": result})

    async def _notify(self, handler: Handler, params: JSONValue) -> None:
        try:
            await handler(params if isinstance(params, Mapping) else {})
        except Exception as exc:
            _log.warning("notification failed", error=repr(exc))

    async def _write(self, message: Mapping[str, object]) -> None:
        line = json.dumps({"jsonrpc": "2.0", **message}, separators=(",", ":"), default=repr)
        async with self._lock:
            await self._send.send(line.encode() + b"\n")

    async def notify(self, method: str, params: Mapping[str, object]) -> None:
        """Send the other side a notification."""
        if not self._closed:
            await self._write({"method": method, "params": dict(params)})

    async def request(
        self, method: str, params: Mapping[str, object], *, timeout: float = math.inf
    ) -> JSONValue:
        """Send the other side a request; its result.

        Raises:
            RpcError: It answered with an error (or the connection closed).
            TimeoutError: No answer within ``timeout`` seconds.
        """
        if self._closed:
            raise RpcError(INTERNAL_ERROR, "connection closed")
        self._next_id += 1
        request_id = self._next_id
        waiter = self._waiting[request_id] = _Waiter()
        try:
            await self._write({"id": request_id, "method": method, "params": dict(params)})
            with anyio.fail_after(timeout):
                await waiter.event.wait()
        finally:
            self._waiting.pop(request_id, None)
        response = waiter.response
        if "error" in response:
            error = response["error"] or {}
            if not isinstance(error, dict):
                raise RpcError(INTERNAL_ERROR, f"an error that is not an object: {error!r}")
            code = error.get("code", INTERNAL_ERROR)
            raise RpcError(
                int(code) if isinstance(code, int | float | str) else INTERNAL_ERROR,
                str(error.get("message", "error")),
                error.get("data"),
            )
        return response.get("result")


class _Waiter:
    """A request sent, until its response (or the connection's end) arrives."""

    __slots__ = ("event", "response")

    def __init__(self) -> None:
        self.event = anyio.Event()
        self.response: JSONObject = {}

    def answer(self, response: JSONObject) -> None:
        self.response = response
        self.event.set()
