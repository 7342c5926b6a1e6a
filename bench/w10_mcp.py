"""W10: MCP tool calls through deepactors, beside the bare SDK's ``ClientSession.call_tool``.

One stdio MCP server (``bench/_mcp_echo_server.py``: one tool, ``echo``, written
with the mcp SDK), started by each run as its subprocess; N calls of
``echo({"text": ...})`` over one session, after a warm-up of 10 in the same
session. Rows, per loop:

* ``floor``: a bare ``mcp.ClientSession`` over ``stdio_client``, N calls one after
  another (``seq``), or in N/K rounds of K concurrent calls (``xK``).
* ``tool``: the same calls through deepactors' MCP layer alone: the ``MCPTool``
  objects the agent would get (``Connection`` + ``tools_of``; the semaphore, the
  session lookup, the mapping of the result to what the model reads), called
  directly, in the same two shapes.
* ``agent``: the same calls made by a deep agent whose deterministic model
  (``FunctionModel``) asks for them: turns of 1 (``seq``) or K parallel
  (``xK``) ``echo`` calls, ``--turns`` turns per run and then an answer, as many
  runs as it takes to make N calls, all under one ``open_runtime()`` (so one
  session, as a server's runs share it). The agent loop's own cost (a model
  call per turn, one more per run, messages, state) is in this row, not in
  ``tool``.

    python bench/w10_mcp.py [--n 2000] [--k 10] [--turns 10] [--loops asyncio trio]
                            [--repeats 3]

Every run is a fresh interpreter; floor and deepactors runs alternate. CPU is
``time.process_time`` of the client process only (every thread of it; not its
children: the server's CPU is not counted). Printed: medians of the repeats, CPU
µs per MCP call, its ratio to the floor of the same shape (the goal: at most
1.2x), and wall µs per call.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).parent))

from _common import emit_result, measure, run_worker

from deepactors import create_deep_agent, open_runtime
from deepactors.messages import AssistantMessage, ToolCall, ToolMessage
from deepactors.models import FunctionModel, ModelRequest

SERVER = Path(__file__).with_name("_mcp_echo_server.py")
WARM_UP = 10
ROWS = ("floor", "tool", "agent", "local")


def _text(i: int) -> str:
    return f"call {i}"


async def _rounds(n: int, k: int, one: Callable[[int], Awaitable[None]]) -> None:
    """``one(i)`` for i in range(n): one at a time (k == 1), or in rounds of k at once."""
    if k == 1:
        for i in range(n):
            await one(i)
        return
    for start in range(0, n, k):
        async with anyio.create_task_group() as tg:
            for i in range(start, min(n, start + k)):
                tg.start_soon(one, i)


# -- the floor: the bare SDK -----------------------------------------------------------


async def floor_run(n: int, k: int) -> Any:
    from mcp import ClientSession, StdioServerParameters, stdio_client
    from mcp_types import TextContent

    params = StdioServerParameters(command=sys.executable, args=[str(SERVER)])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        await session.list_tools()
        done = 0

        async def one(i: int) -> None:
            nonlocal done
            result = await session.call_tool("echo", {"text": _text(i)})
            item = result.content[0]  # type: ignore[union-attr]
            assert isinstance(item, TextContent), result
            assert item.text == _text(i), result
            done += 1

        await _rounds(WARM_UP, k, one)
        done = 0

        async def work() -> int:
            await _rounds(n, k, one)
            return done

        return await measure(work)


# -- deepactors: the MCP tool objects alone ---------------------------------------------


async def tool_run(n: int, k: int) -> Any:
    # Private modules: the public way in is an agent (the ``agent`` row); this
    # row takes the same tool objects the agent's middleware makes.
    from deepactors.mcp import MCPServer
    from deepactors.mcp._connection import load_sdk, open_connection
    from deepactors.mcp._tools import tools_of

    server = MCPServer.stdio(sys.executable, [str(SERVER)], name="echo")
    await load_sdk()
    async with open_connection(server) as connection:
        (echo,) = tools_of(server, connection, await connection.tools())
        done = 0

        async def one(i: int) -> None:
            nonlocal done
            answer = await echo.call({"text": _text(i)})
            assert answer == _text(i), answer
            done += 1

        await _rounds(WARM_UP, k, one)
        done = 0

        async def work() -> int:
            await _rounds(n, k, one)
            return done

        return await measure(work)


# -- deepactors: a deep agent ------------------------------------------------------------


def _model(k: int, turns: int) -> FunctionModel:
    def answer(request: ModelRequest) -> AssistantMessage:
        made = sum(1 for m in request.messages if isinstance(m, AssistantMessage) and m.tool_calls)
        if made >= turns:
            return AssistantMessage(content="done")
        return AssistantMessage(
            tool_calls=[ToolCall(name="echo", args={"text": _text(made * k + j)}) for j in range(k)]
        )

    return FunctionModel(answer)


async def echo(text: str) -> str:
    """Say the text back.

    Args:
        text: The text.
    """
    return text


async def agent_run(n: int, k: int, turns: int, *, local: bool = False) -> Any:
    from deepactors.mcp import MCPServer

    server = MCPServer.stdio(sys.executable, [str(SERVER)], name="echo")
    per_run = k * turns
    agent = create_deep_agent(_model(k, turns), tools=[echo if local else server])

    async with open_runtime() as rt:

        async def runs(count: int) -> int:
            calls = 0
            for _ in range(count):
                state = await rt.thread(agent).ainvoke("go")
                answers = [m for m in state["messages"] if isinstance(m, ToolMessage)]
                assert all(m.status != "error" for m in answers), answers
                assert state["messages"][-1].text == "done"
                calls += len(answers)
            return calls

        await runs(max(1, WARM_UP // per_run))
        return await measure(lambda: runs(n // per_run))


# -- the driver ------------------------------------------------------------------------


def worker(row: str, backend: str, n: int, k: int, turns: int) -> None:
    work: Callable[[], Awaitable[Any]]
    if row == "floor":
        work = lambda: floor_run(n, k)  # noqa: E731
    elif row == "tool":
        work = lambda: tool_run(n, k)  # noqa: E731
    elif row == "agent":
        work = lambda: agent_run(n, k, turns)  # noqa: E731
    else:
        work = lambda: agent_run(n, k, turns, local=True)  # noqa: E731
    m = anyio.run(work, backend=backend)
    assert m.value == n, f"{row} made {m.value} calls, expected {n}"
    emit_result(m)


def _median(runs: list[dict[str, Any]], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000, help="MCP calls per run")
    parser.add_argument("--k", type=int, default=10, help="concurrent calls per round / turn")
    parser.add_argument("--turns", type=int, default=10, help="agent turns per run")
    parser.add_argument("--loops", nargs="+", default=["asyncio", "trio"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--worker", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        row, backend, n, k, turns = args.worker
        worker(row, backend, int(n), int(k), int(turns))
        return
    if args.n % (args.k * args.turns):
        parser.error("--n must be a multiple of --k x --turns")
    script = Path(__file__)
    print(
        f"W10: {args.n} calls of a stdio MCP echo tool; client process CPU only; "
        f"medians of {args.repeats} fresh-process runs; agent: {args.turns} turns per run"
    )
    for backend in args.loops:
        print(f"{backend}:")
        for k in (1, args.k):
            shape = "seq" if k == 1 else f"x{k}"
            runs: dict[str, list[dict[str, Any]]] = {row: [] for row in ROWS}
            for _ in range(args.repeats):
                for row in ROWS:
                    worker_args = ["--worker", row, backend, str(args.n), str(k), str(args.turns)]
                    runs[row].append(run_worker(script, worker_args))
            floor = _median(runs["floor"], "cpu")
            for row in ROWS:
                cpu = _median(runs[row], "cpu")
                wall = _median(runs[row], "wall")
                low = min(r["cpu"] for r in runs[row]) / args.n * 1e6
                high = max(r["cpu"] for r in runs[row]) / args.n * 1e6
                print(
                    f"  {row:5} {shape:4} | CPU {cpu / args.n * 1e6:6.0f} us/call"
                    f" ({cpu / floor:5.2f}x floor; runs {low:.0f}-{high:.0f})"
                    f" | wall {wall / args.n * 1e6:6.0f} us/call"
                )
            mcp = _median(runs["agent"], "cpu") - _median(runs["local"], "cpu")
            print(
                f"  agent - local {shape:4}: CPU {mcp / args.n * 1e6:6.0f} us/call"
                f" ({mcp / floor:5.2f}x floor): what MCP costs inside the agent"
            )


if __name__ == "__main__":
    main()
