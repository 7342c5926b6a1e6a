"""``serve_acp``: an agent as an ACP agent on this process's stdin and stdout.

The editor starts the agent as a subprocess and speaks JSON-RPC on its stdio:
stdout carries the protocol and nothing else (logs go to stderr). Reads and
writes run in worker threads (``anyio.to_thread``), so it serves on asyncio
and on trio alike.
"""

from __future__ import annotations

import os
import sys

import anyio
from anyio.abc import ByteReceiveStream, ByteSendStream

from ..actors import Runtime, open_runtime
from ..agent import DeepAgent
from ._agent import AcpAgent

__all__ = ["serve_acp"]

_CHUNK = 64 * 1024


class _FdReceive(ByteReceiveStream):
    """Bytes read from a file descriptor in a worker thread."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    async def receive(self, max_bytes: int = _CHUNK) -> bytes:
        data = await anyio.to_thread.run_sync(os.read, self._fd, max_bytes, abandon_on_cancel=True)
        if not data:
            raise anyio.EndOfStream
        return data

    async def aclose(self) -> None:
        pass  # the process's own stdin: closed when it exits


class _FdSend(ByteSendStream):
    """Bytes written to a file descriptor in a worker thread."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    async def send(self, item: bytes) -> None:
        view = memoryview(item)
        while view:
            written = await anyio.to_thread.run_sync(os.write, self._fd, view)
            view = view[written:]

    async def aclose(self) -> None:
        pass


async def serve_acp(agent: DeepAgent, runtime: Runtime | None = None) -> None:
    """Serve ``agent`` to the ACP client on stdio until it closes stdin.

    Args:
        agent: The agent (see :class:`~deepactors.acp.AcpAgent` for how sessions use it).
        runtime: Where the runs go; None: a runtime of its own for the session.
    """
    receive, send = _FdReceive(sys.stdin.fileno()), _FdSend(sys.stdout.fileno())
    if runtime is not None:
        await AcpAgent(agent, runtime).serve(receive, send)
        return
    async with open_runtime() as own:
        await AcpAgent(agent, own).serve(receive, send)
