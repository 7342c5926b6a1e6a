"""A streamable-HTTP MCP server: the SDK's transport, on an HTTP client whose answers are bounded.

The SDK reads an answer sent as an event stream event by event, each bounded
(``max_sse_event_size``, given ``max_answer_bytes``), but an answer sent as
plain JSON whole, however large. The client here bounds that too, while
reading: past ``max_answer_bytes`` the rest of the body is not read, and the
call it answers gets the error an oversized stdio answer gets (naming the setting).
"""

from __future__ import annotations

import functools
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio.to_thread

from ..tracing import outgoing_headers
from ._config import MCPServer
from ._stdio import ANSWER_TOO_LARGE

if TYPE_CHECKING:
    import httpx2

__all__ = ["TOO_LARGE_MARK", "http_transport"]

TOO_LARGE_MARK = "larger than max_answer_bytes"
"""In the message of an answer refused for its size (the SDK wraps it in its own)."""


@asynccontextmanager
async def http_transport(server: MCPServer) -> AsyncIterator[Any]:
    """The SDK's streamable-HTTP streams to ``server``, on a bounded client."""
    from mcp.client.streamable_http import streamable_http_client

    headers = dict(server.headers or {})
    if server.auth_token is not None:
        headers["Authorization"] = f"Bearer {server.auth_token}"
    assert server.url is not None
    # Building the client loads the CA certificates from disk: not on the loop.
    client = await anyio.to_thread.run_sync(
        functools.partial(_client, headers, server.max_answer_bytes)
    )
    async with (
        client,
        streamable_http_client(
            server.url, http_client=client, max_sse_event_size=server.max_answer_bytes
        ) as streams,
    ):
        yield streams


def _client(headers: dict[str, str], cap: int) -> httpx2.AsyncClient:
    import httpx2
    from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, MCP_DEFAULT_TIMEOUT

    class CappedStream(httpx2.AsyncByteStream):
        """A plain JSON answer, kept until it ends or passes ``cap`` bytes.

        Past the cap, the rest is not read: the answer becomes the JSON-RPC
        error the request gets (the SDK would otherwise log a parse error).
        """

        def __init__(self, inner: httpx2.AsyncByteStream, request_id: object) -> None:
            self._inner = inner
            self._id = request_id

        async def __aiter__(self) -> AsyncIterator[bytes]:
            parts: list[bytes] = []
            size = 0
            async for chunk in self._inner:
                size += len(chunk)
                if size > cap:
                    parts.clear()
                    break
                parts.append(chunk)
            else:
                for part in parts:
                    yield part
                return
            await self._inner.aclose()
            yield too_large_answer(self._id, size, cap)

        async def aclose(self) -> None:
            await self._inner.aclose()

    class CappedTransport(httpx2.AsyncBaseTransport):
        def __init__(self) -> None:
            self._inner = httpx2.AsyncHTTPTransport()

        async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
            response = await self._inner.handle_async_request(request)
            kind = response.headers.get("content-type", "").lower()
            request_id = (
                _request_id(request.content) if kind.startswith("application/json") else None
            )
            # An async transport's answer streams asynchronously (typed as either).
            if request_id is not None and isinstance(response.stream, httpx2.AsyncByteStream):
                response.stream = CappedStream(response.stream, request_id)
            return response

        async def aclose(self) -> None:
            await self._inner.aclose()

    return httpx2.AsyncClient(
        headers=headers,
        timeout=httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=MCP_DEFAULT_SSE_READ_TIMEOUT),
        transport=CappedTransport(),
        event_hooks={"request": [_send_trace]},
    )


def _request_id(body: bytes) -> object:
    """The id of the JSON-RPC request ``body`` holds, or None (a notification, a batch)."""
    try:
        message = json.loads(body)
    except ValueError:
        return None
    return message.get("id") if isinstance(message, dict) else None


def too_large_answer(request_id: object, size: int, cap: int) -> bytes:
    """The JSON-RPC error that stands for an answer past the cap."""
    text = f"its answer was {TOO_LARGE_MARK}={cap} ({size} bytes so far) and was not read"
    error = {"code": ANSWER_TOO_LARGE, "message": text}
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error}).encode()


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
