"""``MCPToolsMiddleware``: an agent's MCP servers, as tools the model sees and calls.

Which tools a server has is known only once it runs, and it runs only when a
run first needs it: so the tools are not in the agent's spec (built before
anything runs) but added to each model request, and a call naming one of them
is given its tool on the way down the ``wrap_tool_call`` chain. Everything
inside (human approval, retries, budgets, the eviction of large results by
the file middleware outside) treats it as any other tool.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..context import RunKey, ToolRuntime
from ..errors import ConfigurationError
from ..hooks import AgentMiddleware, ModelHandler, ToolCallRequest, ToolHandler
from ..tools import Tool, tool
from ._config import MCPServer
from ._pool import connection_for
from ._tools import MCPTool, tools_of

if TYPE_CHECKING:
    from ..messages import AssistantMessage, ToolMessage
    from ..models import ModelRequest
    from ..tools import Command

__all__ = ["LOAD_TOOL", "MCPToolsMiddleware"]

LOAD_TOOL = "load_mcp_tools"

# The lazy tools a run has loaded (each subagent's run loads its own).
_LOADED: RunKey[set[str]] = RunKey("mcp_tools_loaded", set)

_LAZY_PROMPT = (
    "## MCP tools to load\n\n"
    "These tools exist, but their parameters are not shown yet. Call `load_mcp_tools` with "
    "the names of those you need; you can call them from your next turn on.\n"
)


class _Named:
    """One server's tools as one agent names them, for one listing of one session."""

    __slots__ = ("by_name", "listing", "server", "tools")

    def __init__(self, server: MCPServer, listing: object, tools: list[MCPTool]) -> None:
        self.server = server
        self.listing = listing  # held: its id keys the cache
        self.tools = tools
        self.by_name = {t.name: t for t in tools}


class MCPToolsMiddleware(AgentMiddleware):
    """Gives an agent the tools of some MCP servers.

    ``create_deep_agent`` adds it for ``mcp_servers`` (and servers inside
    ``tools``); build one yourself only for an agent you assemble by hand.

    Args:
        servers: The servers, each with its own prefix and filters.

    Raises:
        ConfigurationError: Two servers of one agent with the same name.
    """

    def __init__(self, servers: Sequence[MCPServer]) -> None:
        names = [s.name for s in servers]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ConfigurationError(f"two MCP servers are named {dupes[0]!r}")
        self.servers = tuple(servers)
        self._name = f"MCPToolsMiddleware[{','.join(names)}]"
        self._load: Tool | None = self._load_tool() if any(s.lazy for s in servers) else None
        self._joined: dict[
            tuple[int, tuple[Tool, ...]], tuple[Sequence[Tool], tuple[Tool, ...]]
        ] = {}
        # (server index, id of a session's listing) -> its tools as this agent names them.
        self._named_cache: dict[tuple[int, int], _Named] = {}

    @property
    def declared_tools(self) -> frozenset[str]:
        """The tool names known before any server runs: those of servers with ``include=``.

        ``create_deep_agent`` accepts them in ``interrupt_on``.
        """
        return frozenset(
            name
            for server in self.servers
            if server.include is not None
            for remote in server.include
            if (name := server.tool_name(remote)) is not None
        )

    @property
    def name(self) -> str:
        """Names the servers too: an agent may have several of these (inherited and its own)."""
        return self._name

    async def _named(self) -> list[_Named]:
        out = []
        cache = self._named_cache
        for i, server in enumerate(self.servers):
            listing = await connection_for(server).tools()
            named = cache.get((i, id(listing)))
            if named is None or named.listing is not listing:
                if len(cache) >= 64:  # runtimes x listings: a few; bounded anyway
                    cache.clear()
                named = cache[i, id(listing)] = _Named(server, listing, tools_of(server, listing))
            out.append(named)
        return out

    async def wrap_model_call(
        self, request: ModelRequest, handler: ModelHandler
    ) -> AssistantMessage:
        """Add the servers' tools to the request (starting the servers on first use).

        Raises:
            ConfigurationError: A server's tool has the name of another tool.
            ToolError: A server could not be started.
        """
        extra: list[Tool] = []
        lazy: list[MCPTool] = []
        for named in await self._named():
            (lazy if named.server.lazy else extra).extend(named.tools)
        if lazy and self._load is not None:
            loaded = request.run.local(_LOADED) if request.run is not None else set()
            extra += [t for t in lazy if t.name in loaded]
            extra.append(self._load)
            request = request.replace(system_prompt=_with_listing(request.system_prompt, lazy))
        if extra:
            request = request.replace(tools=self._with(request.tools, tuple(extra)))
        return await handler(request)

    def _with(self, tools: Sequence[Tool], extra: tuple[Tool, ...]) -> tuple[Tool, ...]:
        """The agent's tools and the servers' as one tuple, made once per pair.

        The same tuple call after call: what measures a tool set (the
        summarization's token count) caches by it, and names are checked once.
        """
        key = (id(tools), extra)
        found = self._joined.get(key)
        if found is not None and found[0] is tools:
            return found[1]
        taken = {t.name for t in tools}
        for t in extra:
            if t.name in taken:
                raise ConfigurationError(
                    f"the MCP tool {t.name!r} has the name of another tool of this agent: "
                    "give its server a prefix= or exclude= it"
                )
            taken.add(t.name)
        joined = (*tools, *extra)
        if len(self._joined) >= 64:  # agents x tool sets: a handful; bounded anyway
            self._joined.clear()
        self._joined[key] = (tools, joined)
        return joined

    async def wrap_tool_call(
        self, request: ToolCallRequest, handler: ToolHandler
    ) -> ToolMessage | Command:
        """Give a call naming one of the servers' tools its tool."""
        if request.tool is None:
            name = request.call.name
            if name == LOAD_TOOL and self._load is not None:
                return await handler(request.replace(tool=self._load))
            for named in await self._named():
                found = named.by_name.get(name)
                if found is not None:
                    request = request.replace(tool=found)
                    break
        return await handler(request)

    def _load_tool(self) -> Tool:
        async def load_mcp_tools(names: list[str], runtime: ToolRuntime) -> str:
            """Load MCP tools listed in the system prompt, so that you can call them.

            Args:
                names: The tools' names, as listed.
            """
            known = {
                t.name for named in await self._named() if named.server.lazy for t in named.tools
            }
            loaded = runtime.run.local(_LOADED)
            found = [n for n in names if n in known]
            loaded.update(found)
            missing = [n for n in names if n not in known]
            text = f"Loaded: {', '.join(found)}." if found else "Nothing loaded."
            if missing:
                text += f" Not MCP tools to load: {', '.join(missing)}."
            return text

        return tool(name=LOAD_TOOL)(load_mcp_tools)


def _with_listing(prompt: str | None, lazy: list[MCPTool]) -> str:
    lines = [f"- {t.name}: {(t.description.strip().splitlines() or [''])[0]}" for t in lazy]
    section = _LAZY_PROMPT + "\n".join(lines)
    return f"{prompt}\n\n{section}" if prompt else section
