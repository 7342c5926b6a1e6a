"""A stdio MCP server: its process, its pipes, each message bounded, and how it is stopped.

The SDK's own ``stdio_client`` is not used, for two things it does not let a
caller decide:

- **How big a message may be.** It reads a line whole before parsing it (and
  joins its buffer to each new chunk, so a 50 MB line is copied thousands of
  times on the way): a server's 100 MB answer was held, copied and parsed in
  full before the file middleware moved it aside. Here a line is kept only up
  to the server's ``max_answer_bytes``; past that the rest of it is dropped as
  it arrives, and the call it answers gets an error saying so.
- **How long stopping it may take.** It closes the server's stdin, then waits
  2 s for the server to exit, then sends SIGTERM and waits 2 s more, all under
  a shield: a server blocked in a call (not reading its stdin) kept a run with
  ``timeout=4`` until 6 s. Here the waits end at a deadline the caller gives
  (see ``Connection``): a server whose calls were cut off by a deadline, and
  that has not answered since, gets no time past it.

The process runs in a session of its own (its own process group), so stopping
it stops whatever it started.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import IO, TYPE_CHECKING, Any

import anyio
import anyio.lowlevel
from anyio.abc import Process
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from ._config import MCPServer

if TYPE_CHECKING:
    from mcp.shared.message import SessionMessage

__all__ = ["ANSWER_TOO_LARGE", "StderrTail", "stdio_transport"]

_log = logging.getLogger("deepactors.mcp")

ANSWER_TOO_LARGE = -32_090
"""The JSON-RPC error code of the error a call gets for an answer past the cap
(in the range JSON-RPC leaves to implementations)."""

STDIN_GRACE = 2.0
"""Seconds a server may take to exit once its stdin is closed (the SDK's figure)."""

TERM_GRACE = 2.0
"""Seconds it may take to exit after SIGTERM, before SIGKILL."""

_FLUSH = 0.5  # seconds for the last messages the session sent to reach the server
_REAP_WAIT = 2.0  # after SIGKILL: only a process the kernel cannot stop takes this long
_POLL = 0.01  # seconds between looks at whether the process has exited
_CHUNK = 65_536
_EDGE = 512  # bytes kept of each end of a line too long to keep whole (to find its id)

# Where a too-long answer says which request it answers: first, as the Python
# SDK writes it, or last, as the TypeScript SDK does ({"result": ..., "id": 3}).
_ID = rb'(-?\d+|"(?:[^"\\]|\\.){0,200}")'
_ID_FIRST = re.compile(rb'^\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*' + _ID)
_ID_LAST = re.compile(rb'"id"\s*:\s*' + _ID + rb"\s*\}\s*$")


class StderrTail:
    """A stdio server's stderr: each line logged at DEBUG, the last few kept for errors."""

    def __init__(self, server: str, lines: int = 6) -> None:
        self._server = server
        self.lines: deque[str] = deque(maxlen=lines)
        self.notes: list[str] = []
        self._partial = b""
        read, write = os.pipe()
        os.set_blocking(read, False)
        self._read = read
        # Handed to the subprocess as its stderr; ours is closed once it runs,
        # so the pipe ends when the server (and whatever it started) exits.
        self.write: IO[str] | None = os.fdopen(write, "w")

    def close_write(self) -> None:
        """Close our copy of the write end (the server has its own)."""
        if self.write is not None:
            self.write.close()
            self.write = None

    async def pump(self) -> None:
        """Read the pipe until every writer has closed it."""
        while True:
            await anyio.wait_readable(self._read)
            try:
                data = os.read(self._read, _CHUNK)
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

    def note(self, text: str) -> None:
        """Something about the server's end that its error should say (before its stderr)."""
        self.notes.append(text)

    def quote(self) -> str:
        """The server's last words, for an error message (empty if it said nothing)."""
        lines = list(self.lines)
        if self._partial.strip():
            lines.append(self._partial.decode("utf-8", "replace").rstrip())
        said = "".join(f"; {n}" for n in self.notes)
        return said + ("; its stderr ended with:\n" + "\n".join(lines) if lines else "")


@asynccontextmanager
async def stdio_transport(
    server: MCPServer, tail: StderrTail, *, stop_by: Callable[[], float]
) -> AsyncIterator[tuple[Any, Any]]:
    """Run ``server``'s command; yield the session's read and write streams.

    Args:
        server: A stdio server's configuration (``max_answer_bytes`` bounds a message).
        tail: Where its stderr goes.
        stop_by: Called as the server is stopped: the time (``anyio.current_time()``
            scale) by which it must be gone; the usual graces are cut to fit.

    Raises:
        OSError: The command could not be started.
    """
    from mcp.client.stdio import get_default_environment

    assert server.command is not None
    assert tail.write is not None
    process = await anyio.open_process(
        [server.command, *server.args],
        env=get_default_environment() | dict(server.env or {}),
        stderr=tail.write,
        cwd=server.cwd,
        start_new_session=True,
    )
    # No await between the spawn and the task group: a cancellation there
    # would leave the process running.
    read_in, read_out = anyio.create_memory_object_stream[Any](0)
    write_in, write_out = anyio.create_memory_object_stream[Any](0)
    writer = anyio.CancelScope()
    written = anyio.Event()
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_read_messages, process, read_in, server, tail)
            tg.start_soon(_write_messages, process, write_out, writer, written)
            try:
                yield read_out, write_in
            finally:
                by = stop_by()
                with anyio.CancelScope(shield=True):
                    # The reader drains from now on (a server blocked writing
                    # its stdout cannot see its stdin close); what the session
                    # sent last (a cancellation) gets a moment to go out.
                    read_out.close()
                    write_in.close()
                    with anyio.move_on_after(_until(by, _FLUSH)):
                        await written.wait()
                    writer.cancel()
                    await _stop(process, server.name, by)
                tg.cancel_scope.cancel()
    finally:
        for stream in (read_in, read_out, write_in, write_out):
            stream.close()


async def _read_messages(
    process: Process, out: MemoryObjectSendStream[Any], server: MCPServer, tail: StderrTail
) -> None:
    """Each line of the server's stdout as a message, none kept past ``max_answer_bytes``.

    Once the session is gone (or a message could not be delivered), the rest is
    read and dropped: a server whose stdout pipe is full cannot exit.
    """
    assert process.stdout is not None
    lines = _Lines(server.max_answer_bytes)
    open_ = True
    try:
        async for chunk in process.stdout:
            for line in lines.feed(chunk):
                if not open_:
                    continue
                message = _parse(line) if isinstance(line, bytes) else _too_large(line, server)
                if message is _UNATTRIBUTED:
                    # An answer to nobody knows which call: the session ends, so
                    # every call waiting on it learns (and the next restarts it).
                    tail.note(
                        f"it sent a message larger than max_answer_bytes="
                        f"{server.max_answer_bytes}, which was dropped"
                    )
                    open_ = False
                    out.close()
                elif message is not None:
                    try:
                        await out.send(message)
                    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                        open_ = False
    except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
        pass  # the server's end went away
    finally:
        out.close()


class _Long:
    """A line past the cap: its size, and the bytes kept of each end."""

    __slots__ = ("head", "size", "tail")

    def __init__(self, head: bytes, tail: bytes, size: int) -> None:
        self.head = head
        self.tail = tail
        self.size = size


class _Lines:
    """Splits a byte stream into lines, keeping no line past ``cap`` bytes."""

    def __init__(self, cap: int) -> None:
        self._cap = cap
        self._parts: list[bytes] = []
        self._size = 0
        self._long: _Long | None = None

    def feed(self, chunk: bytes) -> list[bytes | _Long]:
        """The lines ``chunk`` completes: bytes, or a :class:`_Long` for one past the cap."""
        out: list[bytes | _Long] = []
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            piece = chunk[start:] if end < 0 else chunk[start:end]
            self._add(piece)
            if end < 0:
                return out
            long = self._long
            out.append(b"".join(self._parts) if long is None else long)
            self._parts, self._size, self._long = [], 0, None
            start = end + 1

    def _add(self, piece: bytes) -> None:
        self._size += len(piece)
        long = self._long
        if long is not None:
            long.size = self._size
            long.tail = (long.tail + piece)[-_EDGE:]
        elif self._size > self._cap:
            # Past the cap: both ends are kept (where the request id is), the
            # rest dropped as it arrives.
            parts = [*self._parts, piece]
            self._long = _Long(_edge(parts), _edge(parts, last=True), self._size)
            self._parts = []
        elif piece:
            self._parts.append(piece)


def _parse(line: bytes) -> SessionMessage | Exception | None:
    from mcp.shared.message import SessionMessage
    from mcp_types import jsonrpc_message_adapter

    if not line.strip():
        return None
    try:
        return SessionMessage(jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as exc:  # pydantic's ValidationError is one
        # As the SDK does: the session hands it to its message handler.
        return exc


def _edge(parts: list[bytes], *, last: bool = False) -> bytes:
    """The first (or last) ``_EDGE`` bytes of ``parts`` joined, joining no more than that."""
    out = b""
    for part in reversed(parts) if last else parts:
        need = _EDGE - len(out)
        if need <= 0:
            break
        out = part[-need:] + out if last else out + part[:need]
    return out


_UNATTRIBUTED = object()


def _too_large(line: _Long, server: MCPServer) -> SessionMessage | object:
    """The error answer to the request a line past the cap answers (if it says which)."""
    from mcp.shared.message import SessionMessage
    from mcp_types import ErrorData, JSONRPCError

    found = _ID_FIRST.match(line.head) or _ID_LAST.search(line.tail)
    if found is None:
        return _UNATTRIBUTED
    raw = found.group(1)
    request_id: int | str = int(raw) if raw[:1] != b'"' else _json_string(raw)
    text = (
        f"its answer was larger than max_answer_bytes={server.max_answer_bytes} "
        f"({line.size} bytes) and was not read"
    )
    error = JSONRPCError(
        jsonrpc="2.0", id=request_id, error=ErrorData(code=ANSWER_TOO_LARGE, message=text)
    )
    return SessionMessage(error)


def _json_string(raw: bytes) -> str:
    import json

    value = json.loads(raw)
    return value if isinstance(value, str) else str(value)


async def _write_messages(
    process: Process,
    messages: MemoryObjectReceiveStream[Any],
    scope: anyio.CancelScope,
    done: anyio.Event,
) -> None:
    assert process.stdin is not None
    try:
        with scope:
            async with messages:
                async for message in messages:
                    json = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await process.stdin.send(json.encode() + b"\n")
    except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
        pass  # the server closed its stdin, or exited: the reader sees the end
    finally:
        done.set()


async def _stop(process: Process, name: str, stop_by: float) -> None:
    """Close stdin, SIGTERM the server's group, SIGKILL it: each wait ends by ``stop_by``."""
    assert process.stdin is not None
    with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.stdin.aclose()
    how = "exited after its stdin closed"
    if not await _exited(process, _until(stop_by, STDIN_GRACE)):
        how = "stopped by SIGTERM"
        _signal(process, signal.SIGTERM)
        if not await _exited(process, _until(stop_by, TERM_GRACE)):
            how = "killed"
            _signal(process, signal.SIGKILL)
            if not await _exited(process, _REAP_WAIT):
                _log.warning("MCP server %s (pid %d) survived SIGKILL", name, process.pid)
    _log.debug("MCP server %s: %s", name, how)
    assert process.stdout is not None
    with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.stdout.aclose()


def _until(stop_by: float, grace: float) -> float:
    return max(0.0, min(grace, stop_by - anyio.current_time()))


async def _exited(process: Process, within: float) -> bool:
    # Polled, not process.wait(): on asyncio that also waits for the pipes to
    # close, which a child the server started (holding them) delays.
    deadline = anyio.current_time() + within
    while process.returncode is None:
        if anyio.current_time() >= deadline:
            return False
        await anyio.sleep(_POLL)
    return True


def _signal(process: Process, sig: int) -> None:
    # The group: the server ran in a session of its own, whose id is its pid.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, sig)
