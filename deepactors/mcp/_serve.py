"""A deep agent served as an MCP server: one tool that runs it, over stdio or streamable HTTP.

Claude Desktop, Claude Code or any MCP client hands the agent a task by
calling the tool (``run`` by default); the answer is the agent's final message.
While the tree works, each subagent started, finished, failed or cancelled and
each tool call is reported as an MCP progress notification (when the client
asked for progress). A client that cancels its call (``notifications/cancelled``)
cancels the run and its whole tree. Runs share one runtime for the life of the
server, so the agent's own MCP servers are started once, not per call.
"""

from __future__ import annotations

import importlib
import json
import logging
import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Literal

import anyio
import anyio.to_thread

from .._core.asgi import serve_here
from ..actors import Runtime, await_handle, open_runtime
from ..events import (
    Event,
    SubagentCancelled,
    SubagentFailed,
    SubagentFinished,
    SubagentSpawned,
    ToolCallStarted,
    describe,
)
from ._connection import load_sdk

if TYPE_CHECKING:
    from ..actors import HasSpec
    from ..state import AgentResult

__all__ = ["mcp_app", "serve_mcp"]

_log = logging.getLogger("deepactors.mcp")

# What a client is told about while the tree works: enough to see it move,
# not every model token.
_PROGRESS = (SubagentSpawned, SubagentFinished, SubagentFailed, SubagentCancelled, ToolCallStarted)

_DESCRIPTION = (
    "Hand a task to the agent {name!r}, which plans, uses its tools and delegates to "
    "subagents, and answers when done. Give the whole task in one message."
)


def mcp_app(
    agent: HasSpec,
    runtime: Runtime | None = None,
    *,
    name: str | None = None,
    tool_name: str = "run",
    description: str | None = None,
) -> Any:
    """An MCP server (the SDK's ``mcp.server.mcpserver.MCPServer``) with one tool running ``agent``.

    The tool takes ``task`` (the user's message) and optionally ``thread_id``
    (to continue a conversation the runtime or the agent's checkpointer keeps),
    and answers with the agent's final message (its structured response as JSON
    when it has a ``response_format``); a run that fails is an ``isError`` result.

    Call it with the SDK imported (:func:`serve_mcp` does); serve the result
    with its ``run_stdio_async()`` or ``streamable_http_app()``.

    Args:
        agent: The agent (a ``DeepAgent``).
        runtime: Where runs go; None: each call opens a runtime of its own (its
            MCP servers are then started per call).
        name: The server's name (default ``deepactors-<agent name>``).
        tool_name: The tool's name.
        description: The tool's description (default: one naming the agent).
    """
    from mcp.server.mcpserver import Context
    from mcp.server.mcpserver import MCPServer as SDKServer
    from mcp.server.mcpserver.exceptions import ToolError as SDKToolError

    spec_name = agent.spec.name
    app: Any = SDKServer(name or f"deepactors-{spec_name}")

    async def run(task: str, ctx: Any, thread_id: str | None = None) -> str:
        async with _runtime(runtime) as rt:
            outcome = await _run(rt, agent, task, thread_id, ctx)
        if isinstance(outcome, BaseException):
            raise SDKToolError(f"{type(outcome).__name__}: {outcome}")
        return outcome

    # Real objects, not the strings of this module's postponed annotations: the
    # SDK reads them to find the Context parameter and to build the schema.
    run.__annotations__ = {"task": str, "ctx": Context, "thread_id": str | None, "return": str}
    run.__doc__ = description or _DESCRIPTION.format(name=spec_name)
    app.add_tool(run, name=tool_name, description=run.__doc__)
    return app


@asynccontextmanager
async def _runtime(runtime: Runtime | None) -> AsyncIterator[Runtime]:
    if runtime is not None:
        yield runtime
    else:
        async with open_runtime() as rt:
            rt.keeps_background = False  # closed when the call returns
            yield rt


async def _run(
    rt: Runtime, agent: HasSpec, task: str, thread_id: str | None, ctx: Any
) -> str | Exception:
    """Run ``agent`` on ``task``, reporting progress; the answer, or why it failed.

    The run's failure is returned, not raised: raised inside the task group it
    would come out wrapped in an exception group.
    """
    send, receive = anyio.create_memory_object_stream[Event](math.inf)

    def on_event(event: Event) -> None:
        if isinstance(event, _PROGRESS):
            send.send_nowait(event)

    async def report() -> None:
        done = 0
        async with receive:
            async for event in receive:
                done += 1
                try:
                    await ctx.report_progress(done, None, f"{event.path}: {describe(event)}")
                except Exception:
                    # A client gone quiet must not take the run down with a notification.
                    _log.debug("progress notification not sent", exc_info=True)

    outcome: str | Exception
    async with anyio.create_task_group() as tg:
        tg.start_soon(report)
        try:
            handle = await rt.thread(agent, thread_id).start(task, on_event=on_event)
            # Cancelled here (the client's notifications/cancelled cancels this
            # handler): await_handle cancels the run and waits for its tree.
            result = await await_handle(handle)
            outcome = _answer(result)
        except Exception as exc:
            outcome = exc
        finally:
            send.close()
    return outcome


def _answer(result: AgentResult) -> str:
    if "__interrupt__" in result:
        return "The run stopped for a human decision, which this server cannot ask for."
    structured = result.get("structured_response")
    if structured is not None:
        dump = getattr(structured, "model_dump", None)
        return json.dumps(dump(mode="json") if dump else structured, default=str)
    return str(result["messages"][-1].text)


async def serve_mcp(
    agent: HasSpec,
    *,
    transport: Literal["stdio", "http"] = "stdio",
    host: str = "127.0.0.1",
    port: int = 8000,
    path: str = "/mcp",
    name: str | None = None,
    tool_name: str = "run",
    description: str | None = None,
) -> None:
    """Serve ``agent`` as an MCP server until cancelled (or stdin closes, for stdio).

    Over stdio the process's stdout carries the protocol: nothing else may
    print there (deepactors logs go to stderr). Over HTTP the endpoint is
    ``http://host:port/path`` (streamable HTTP), served by uvicorn on asyncio
    and by hypercorn on trio; it binds 127.0.0.1 unless told otherwise and
    checks the Host header against it (DNS rebinding).

    Args:
        agent: The agent (a ``DeepAgent``).
        transport: ``"stdio"`` or ``"http"``.
        host: Interface to listen on (http).
        port: Port to listen on (http).
        path: The endpoint's path (http).
        name: The MCP server's name.
        tool_name: The name of the tool that runs the agent.
        description: Its description.
    """
    await load_sdk()
    # The server half of the SDK (starlette, ...) is imported off the loop too.
    await anyio.to_thread.run_sync(importlib.import_module, "mcp.server.mcpserver")
    async with open_runtime() as rt:
        app = mcp_app(agent, rt, name=name, tool_name=tool_name, description=description)
        if transport == "stdio":
            await app.run_stdio_async()
            return
        asgi = app.streamable_http_app(streamable_http_path=path, host=host)
        await serve_here(asgi, host=host, port=port)
