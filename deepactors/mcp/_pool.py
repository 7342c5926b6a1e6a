"""The MCP sessions one runtime holds open, and which one an agent's call goes to.

One pool per runtime (``Runtime.shared``), keyed by what makes a session
(:meth:`MCPServer.connection_key`): every agent naming the same server with the
same session options shares one session, whatever its tool prefix, filters or
``call_timeout``. Nothing is kept for the process as a whole: a pool goes with
its runtime.

Sessions nobody is using are not kept without bound: a server given a token per
user (``auth_token``) makes one session per user. Past :data:`MAX_IDLE_SESSIONS`
idle ones (or the runtime's own bound, :func:`set_max_idle_sessions`), the least
recently used are closed (their servers stopped); a session with a listing or a
call in progress is never closed, and a closed one is opened again when next
needed.
"""

from __future__ import annotations

from collections import OrderedDict

from anyio.abc import TaskGroup

from ..actors import Runtime, SharedKey, current_runtime
from ..errors import ConfigurationError
from ._config import MCPServer
from ._connection import Connection

__all__ = ["MAX_IDLE_SESSIONS", "connection_for", "set_max_idle_sessions"]

MAX_IDLE_SESSIONS = 32
"""Sessions with nothing in progress a runtime keeps open (least recently used closed first)."""


class _Pool:
    """One runtime's sessions, most recently used last."""

    def __init__(self, tg: TaskGroup, *, max_idle: int = MAX_IDLE_SESSIONS) -> None:
        self._tg = tg
        self._connections: OrderedDict[tuple[object, ...], Connection] = OrderedDict()
        self.max_idle = max_idle

    def get(self, server: MCPServer) -> Connection:
        key = server.connection_key()
        found = self._connections.get(key)
        if found is not None:
            self._connections.move_to_end(key)
            return found
        connection = self._connections[key] = Connection(server, self._tg)
        self.prune()
        return connection

    def prune(self) -> None:
        """Close the least recently used idle sessions past :attr:`max_idle`."""
        idle = [key for key, c in self._connections.items() if c.idle]
        for key in idle[: max(0, len(idle) - self.max_idle)]:
            self._connections.pop(key).close()

    def __len__(self) -> int:
        return len(self._connections)


_POOL: SharedKey[_Pool] = SharedKey("mcp", _Pool)


def set_max_idle_sessions(rt: Runtime, max_idle: int) -> None:
    """Set how many MCP sessions with nothing in progress ``rt`` keeps open.

    The default is :data:`MAX_IDLE_SESSIONS`. Past the bound the least recently
    used idle sessions are closed (their servers stopped), now and whenever a
    session is opened; a session with a listing or a call in progress is never
    closed, and a closed one opens again when next needed. 0 keeps none: each
    idle session closes as soon as another is opened.

    Args:
        rt: The runtime (from :func:`~deepactors.open_runtime`) whose sessions these are.
        max_idle: Idle sessions kept open, an int >= 0.

    Raises:
        ConfigurationError: ``max_idle`` is not an int >= 0.
        RuntimeClosed: ``rt`` is closing.
    """
    if isinstance(max_idle, bool) or not isinstance(max_idle, int) or max_idle < 0:
        raise ConfigurationError(
            f"max_idle: MCP sessions kept open with nothing in progress, an int >= 0, "
            f"not {max_idle!r}"
        )
    pool = rt.shared(_POOL)
    pool.max_idle = max_idle
    pool.prune()


def connection_for(server: MCPServer) -> Connection:
    """The session to ``server`` that the calling actor's runtime shares.

    Raises:
        ConfigurationError: Called outside any runtime (an agent's run always has one).
    """
    rt = current_runtime()
    if rt is None:
        raise ConfigurationError(
            f"MCP server {server.name!r}: its tools are used by agents, inside a run"
        )
    return rt.shared(_POOL).get(server)
