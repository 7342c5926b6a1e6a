"""One agent run whose MCP call answers past ``max_answer_bytes``, measured (a test runs it).

    python -m tests.mcp.answer_probe stdio|URL LOOP CAP MEGABYTES LOG

Prints one JSON object: the process's peak resident set size before the big
call (after a small one, so the code and the session are loaded) and after it,
in bytes, and what the model read. A process of its own: its peak is the run's.
"""

from __future__ import annotations

import json
import resource
import sys
from pathlib import Path

import anyio

from deepactors import AssistantMessage, ToolCall, ToolMessage, create_deep_agent
from deepactors.mcp import MCPServer
from deepactors.models import FunctionModel, ModelRequest
from tests.mcp.servers import app_server


def peak() -> int:
    """This process's peak RSS so far, in bytes (Linux gives KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def main() -> None:
    where, loop, cap, megabytes, log = sys.argv[1:6]
    options = {"max_answer_bytes": int(cap)}
    server = (
        app_server(Path(log), **options)
        if where == "stdio"
        else MCPServer.http(where, name="app", **options)  # type: ignore[arg-type]
    )
    seen: dict[str, object] = {}

    def answer(request: ModelRequest) -> AssistantMessage:
        results = [m for m in request.messages if isinstance(m, ToolMessage)]
        if not results:
            return AssistantMessage(tool_calls=[ToolCall(name="big", args={"megabytes": 0.001})])
        if len(results) == 1:
            seen["before"] = peak()
            size = float(megabytes)
            return AssistantMessage(tool_calls=[ToolCall(name="big", args={"megabytes": size})])
        seen["after"] = peak()
        seen["text"] = results[-1].text
        seen["status"] = results[-1].status
        return AssistantMessage(content="done")

    agent = create_deep_agent(FunctionModel(answer), tools=[server])
    anyio.run(agent.ainvoke, "go", backend=loop)
    print(json.dumps(seen))


if __name__ == "__main__":
    main()
