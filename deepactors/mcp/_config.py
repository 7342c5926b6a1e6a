"""``MCPServer``: where an MCP server is and which of its tools an agent gets.

Pure configuration: building one imports nothing of the ``mcp`` SDK (it only
checks that it is installed), so an agent with MCP servers is built, checked
and shared like any other; the connection is made when a run first needs it
(see :mod:`._connection`).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, final

from ..errors import ConfigurationError

__all__ = [
    "DEFAULT_MAX_ANSWER_BYTES",
    "MCPServer",
    "mcp_servers_from",
    "require_sdk",
    "sdk_problem",
]

DEFAULT_MAX_ANSWER_BYTES = 16 * 1024 * 1024
"""Bytes one message from an MCP server may hold (16 MiB): past it the answer is
not read, and the call it answers is an error that says so."""

EXTRA_HINT = "MCP servers need the official mcp SDK: pip install 'deepactors[mcp]'"

_NAME_OK = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def sdk_problem() -> str | None:
    """What is wrong with the installed ``mcp`` SDK (missing, or 1.x), or None."""
    if importlib.util.find_spec("mcp") is None:
        return EXTRA_HINT
    try:
        version = importlib.metadata.version("mcp")
    except importlib.metadata.PackageNotFoundError:
        return None  # importable but not installed as a distribution: a checkout; trust it
    if int(version.split(".")[0]) < 2:
        return (
            f"deepactors speaks MCP through the mcp SDK 2.x; {version} is installed: "
            "pip install -U 'deepactors[mcp]'"
        )
    return None


# Looked up once, with this module: it reads the disk, which a server built
# inside a running event loop must not do on the loop.
_PROBLEM = sdk_problem()


def require_sdk() -> None:
    """Check that the ``mcp`` SDK, 2.x, is installed (without importing it).

    Raises:
        ConfigurationError: It is not; the message names the extra to install.
    """
    if _PROBLEM is not None:
        raise ConfigurationError(_PROBLEM)


@final
@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class MCPServer:
    """An MCP server whose tools an agent may call: a command to run (stdio) or a URL.

    Give one to ``create_deep_agent(mcp_servers={"name": server})``, inside its
    ``tools=[...]``, or to a subagent (its ``mcp_servers`` or ``tools``). Every
    agent of a tree that names the same server (same command, arguments,
    environment and directory, or same URL, headers and token) with the same
    session options (``max_in_flight``, ``connect_timeout``,
    ``max_answer_bytes``) shares one session per runtime: one process for a
    stdio server however many subagents call it. Each agent's own
    ``call_timeout``, prefix and filters apply to its calls, whichever agent
    opened the session. The session opens when a run first needs the tools and
    closes with the runtime (a plain ``ainvoke`` opens a runtime of its own, so:
    per run), or earlier when the runtime holds too many idle ones (see
    ``deepactors.mcp.MAX_IDLE_SESSIONS``, or ``set_max_idle_sessions``).

    Prefer the constructors :meth:`stdio` and :meth:`http`.

    Attributes:
        name: Names the server in errors and logs (the ``mcp_servers`` key).
        transport: ``"stdio"`` or ``"http"`` (streamable HTTP).
        command: The program to run (stdio).
        args: Its arguments (stdio).
        env: Variables added to the small default environment the SDK gives a
            server (``HOME``, ``PATH``, ...), not the whole of ours (stdio).
        cwd: Its working directory (stdio).
        url: The server's endpoint, e.g. ``http://127.0.0.1:8000/mcp`` (http).
        headers: Sent with every request (http).
        auth_token: Sent as ``Authorization: Bearer <token>`` (http).
        prefix: Put before every tool name the model sees (``"git_"``), so two
            servers' tools, or a server's and a built-in one, cannot clash.
        include: Only these tools (the server's names), if given.
        exclude: Not these tools (the server's names).
        max_in_flight: Calls sent to the session at once, by every agent
            sharing it; further calls wait their turn.
        connect_timeout: Seconds to start the server and finish MCP's handshake.
        call_timeout: Seconds one call of this agent may take before it is
            cancelled (the server is told) and answered with an error; None: no
            limit but the run's own deadline.
        max_answer_bytes: Bytes one message from the server may hold (a tool's
            answer, a listing). A larger one is refused while it is read, not
            after: the call gets an error naming this setting, and no more than
            this is held in memory for it. Default 16 MiB.
        lazy: List the tools to the model by name and description only, in the
            system prompt, and give it a ``load_mcp_tools`` tool that adds the
            schemas of those it wants for the rest of its run: for servers with
            many tools, which would otherwise fill the context on every call.
    """

    name: str = "mcp"
    transport: Literal["stdio", "http"]
    command: str | None = None
    args: Sequence[str] = ()
    env: Mapping[str, str] | None = None
    cwd: str | os.PathLike[str] | None = None
    url: str | None = None
    headers: Mapping[str, str] | None = None
    auth_token: str | None = field(default=None, repr=False)
    prefix: str = ""
    include: Collection[str] | None = None
    exclude: Collection[str] = ()
    max_in_flight: int = 64
    connect_timeout: float = 30.0
    call_timeout: float | None = None
    max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES
    lazy: bool = False

    def __post_init__(self) -> None:
        require_sdk()
        if self.transport == "stdio":
            if not self.command:
                raise ConfigurationError(
                    f"MCP server {self.name!r}: a stdio server needs a command"
                )
            if isinstance(self.args, str):
                raise ConfigurationError(
                    f"MCP server {self.name!r}: args is a list of strings, not one string"
                )
        elif self.transport == "http":
            if not self.url or not self.url.startswith(("http://", "https://")):
                raise ConfigurationError(
                    f"MCP server {self.name!r}: an http server needs an http(s) url, "
                    f"not {self.url!r}"
                )
        else:
            raise ConfigurationError(
                f"MCP server {self.name!r}: transport must be 'stdio' or 'http', "
                f"not {self.transport!r}"
            )
        if self.prefix and not re.fullmatch(r"[a-zA-Z0-9_-]+", self.prefix):
            raise ConfigurationError(
                f"MCP server {self.name!r}: prefix {self.prefix!r} must be letters, digits, "
                "'_' or '-'"
            )
        if self.max_in_flight < 1:
            raise ConfigurationError(f"MCP server {self.name!r}: max_in_flight must be >= 1")
        if (
            not isinstance(self.max_answer_bytes, int)
            or isinstance(self.max_answer_bytes, bool)
            or self.max_answer_bytes < 1024
        ):
            raise ConfigurationError(
                f"MCP server {self.name!r}: max_answer_bytes must be an int >= 1024, "
                f"not {self.max_answer_bytes!r}"
            )
        if self.connect_timeout <= 0 or (self.call_timeout is not None and self.call_timeout <= 0):
            raise ConfigurationError(f"MCP server {self.name!r}: timeouts must be > 0")
        if isinstance(self.include, str) or isinstance(self.exclude, str):
            raise ConfigurationError(
                f"MCP server {self.name!r}: include and exclude are collections of tool names"
            )

    @classmethod
    def stdio(
        cls,
        command: str,
        args: Sequence[str] = (),
        *,
        name: str = "mcp",
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        **options: Any,
    ) -> MCPServer:
        """A server run as a subprocess, speaking MCP over its stdin and stdout.

        Its stderr is read by deepactors: each line is logged at DEBUG on the
        ``deepactors.mcp`` logger, and the last lines are quoted in the error
        when the server dies.

        Args:
            command: The program (``"npx"``, ``"uvx"``, ``sys.executable``).
            args: Its arguments.
            name: Names the server in errors (the ``mcp_servers`` key replaces it).
            env: Extra environment variables.
            cwd: Working directory.
            **options: ``prefix``, ``include``, ``exclude``, ``max_in_flight``,
                ``connect_timeout``, ``call_timeout``, ``max_answer_bytes``,
                ``lazy`` (see the class).
        """
        return cls(
            transport="stdio",
            command=command,
            args=tuple(args),
            name=name,
            env=env,
            cwd=cwd,
            **options,
        )

    @classmethod
    def http(
        cls,
        url: str,
        *,
        name: str = "mcp",
        headers: Mapping[str, str] | None = None,
        auth_token: str | None = None,
        **options: Any,
    ) -> MCPServer:
        """A server reached over MCP's streamable HTTP transport.

        Args:
            url: The endpoint (``https://example.com/mcp``).
            name: Names the server in errors (the ``mcp_servers`` key replaces it).
            headers: Sent with every request.
            auth_token: A bearer token for ``Authorization``.
            **options: ``prefix``, ``include``, ``exclude``, ``max_in_flight``,
                ``connect_timeout``, ``call_timeout``, ``max_answer_bytes``,
                ``lazy`` (see the class).
        """
        return cls(
            transport="http", url=url, name=name, headers=headers, auth_token=auth_token, **options
        )

    def connection_key(self) -> tuple[object, ...]:
        """What makes two configurations one session: the same server, the same session options.

        Not the options of each agent's own (``call_timeout``, prefix, filters,
        ``lazy``, the name).
        """
        return (
            self.transport,
            self.command,
            tuple(self.args),
            tuple(sorted((self.env or {}).items())),
            None if self.cwd is None else os.fspath(self.cwd),
            self.url,
            tuple(sorted((self.headers or {}).items())),
            self.auth_token,
            self.max_in_flight,
            self.connect_timeout,
            self.max_answer_bytes,
        )

    def tool_name(self, remote: str) -> str | None:
        """The name the model sees for the server's tool ``remote``; None if filtered out."""
        if self.include is not None and remote not in self.include:
            return None
        if remote in self.exclude:
            return None
        name = self.prefix + remote
        if not _NAME_OK.match(name):
            # Model APIs take 1-64 letters, digits, '_' and '-'; MCP names may hold
            # more ('.', '/'). The call still goes out under the server's own name.
            name = re.sub(r"[^a-zA-Z0-9_-]", "_", name)[:64]
        return name


def mcp_servers_from(config: Mapping[str, object]) -> list[MCPServer]:
    """Servers from ``create_deep_agent``'s ``mcp_servers`` or an ``mcpServers`` JSON object.

    Each value is an :class:`MCPServer` (its key becomes its name) or a dict in
    the shape Claude Desktop's ``mcpServers`` uses: ``{"command", "args", "env",
    "cwd"}`` for stdio, ``{"url", "headers"}`` (``"type": "http"`` or
    ``"streamable-http"``) for HTTP, plus any of ``prefix``, ``include``,
    ``exclude``, ``max_in_flight``, ``connect_timeout``, ``call_timeout``,
    ``max_answer_bytes``, ``lazy``, ``auth_token``. A whole file's object
    (``{"mcpServers": {...}}``) is taken too.

    Raises:
        ConfigurationError: A value that is neither, or an unknown key.
    """
    if "mcpServers" in config and isinstance(config["mcpServers"], Mapping):
        config = config["mcpServers"]
    servers = []
    for name, value in config.items():
        if isinstance(value, MCPServer):
            servers.append(value if value.name == name else replace(value, name=name))
        elif isinstance(value, Mapping):
            servers.append(_from_dict(str(name), value))
        else:
            raise ConfigurationError(
                f"mcp_servers[{name!r}] must be an MCPServer or a dict, not {type(value).__name__}"
            )
    return servers


_OPTIONS = (
    "prefix",
    "include",
    "exclude",
    "max_in_flight",
    "connect_timeout",
    "call_timeout",
    "max_answer_bytes",
    "lazy",
)


def _from_dict(name: str, value: Mapping[str, Any]) -> MCPServer:
    spec = dict(value)
    kind = spec.pop("type", spec.pop("transport", None))
    options = {k: spec.pop(k) for k in _OPTIONS if k in spec}
    if kind in (None, "stdio") and "command" in spec:
        known = {"command", "args", "env", "cwd"}
        build = "stdio"
    elif kind in ("http", "streamable-http", "streamable_http", "streamableHttp") or (
        kind is None and "url" in spec
    ):
        known = {"url", "headers", "auth_token"}
        build = "http"
    else:
        raise ConfigurationError(
            f"mcp_servers[{name!r}]: needs a 'command' (stdio) or a 'url' (http); "
            f"type {kind!r} is not supported"
        )
    unknown = set(spec) - known
    if unknown:
        raise ConfigurationError(
            f"mcp_servers[{name!r}]: unknown key(s) {sorted(unknown)} "
            f"(known: {sorted(known | set(_OPTIONS) | {'type'})})"
        )
    if build == "stdio":
        return MCPServer.stdio(
            spec["command"],
            list(spec.get("args") or ()),
            name=name,
            env=spec.get("env"),
            cwd=spec.get("cwd"),
            **options,
        )
    return MCPServer.http(
        spec.get("url", ""),
        name=name,
        headers=spec.get("headers"),
        auth_token=spec.get("auth_token"),
        **options,
    )
