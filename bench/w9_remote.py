"""W9 remote: W2's fan-out with its children on remote ``deepactors serve`` processes.

The tree of W2 (bench/w2_fanout.py): one main turn emits N ``task`` calls, each
child does 3 model turns (two calls of a trivial tool, then an answer) at 50 ms
simulated latency per model call, one final main turn. Three ways, in one run
of this script, alternating so that a change in the machine's load hits each:

- ``local``: W2 in-process (the children are local child actors);
- ``remote-1``: every child a run on one ``deepactors serve`` process
  (:class:`deepactors.remote.RemoteAgent`, the parent's process as the client);
- ``remote-2``: the children split between two server processes.

    python bench/w9_remote.py [--sizes 1000] [--loops asyncio trio] [--repeats 3]
                              [--server-loop asyncio] [--deadline 200] [--listen]
                              [--json PATH]

Every run's client is a fresh interpreter; the servers are started once per
loop and kept (in-memory threads, no caps per client). Printed
per (loop, N, way), the median of the repeats and their range:

- wall time, and children finished per second (how throughput grows from one
  server process to two);
- CPU ms per child in the client process (the parent's) and in the server
  processes (whole-process CPU from /proc, every thread), and their sum;
- HTTP overhead per child: the remote way's CPU per child (client and servers)
  less the local way's: what running a child over the Agent Protocol costs
  beyond running it in-process.

``--listen`` has someone listen to the parent's events (as a server's clients or
a tracer do), so each remote child streams its run (``events-lite``) and relays
its events, where by default nobody listens and it waits for its run's end.

``--deadline N`` adds one measurement: N children that never end on their own,
on two servers, and a parent whose deadline passes once all of them run; from
the deadline to the last remote run recorded as interrupted (the servers' own
``updated_at``), and to the parent's call returning.

Wall-clock figures on a shared machine are indicative (2 cores here, shared):
with the servers on the same cores as the client, a second server process adds
no CPU, only another event loop to spread the work over.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
import httpx

sys.path.insert(0, str(Path(__file__).parent))

from _common import emit_result, machine_info, measure, run_worker, write_json
from w2_fanout import CRITICAL_PATH, LATENCY, child_turn, lookup, our_work

from deepactors import AssistantMessage, ToolCall, create_deep_agent, open_runtime
from deepactors.events import CustomEvent, Event
from deepactors.models import FunctionModel, ModelRequest
from deepactors.remote import REMOTE_RUN

HERE = Path(__file__).parent
WAYS = ("local", "remote-1", "remote-2")

# What the servers serve: W2's child, as a deep agent of its own.
child_agent = create_deep_agent(
    FunctionModel(lambda r: child_turn(r.messages), latency=LATENCY), tools=[lookup]
)


def blocker_turn(request: ModelRequest) -> AssistantMessage:
    """A child that never ends by itself: it waits in a tool until cancelled."""
    return AssistantMessage(tool_calls=[ToolCall(name="wait_here", args={})])


async def wait_here() -> str:
    """Wait until cancelled."""
    await anyio.sleep_forever()
    return "never"


blocker_agent = create_deep_agent(FunctionModel(blocker_turn), tools=[wait_here])
served = {"child": child_agent, "blocker": blocker_agent}


def remote_parent(n: int, urls: list[str], graph_id: str = "child") -> Any:
    """W2's main agent, its children on the servers at ``urls`` (round robin)."""
    kinds = [f"r{i}" for i in range(len(urls))]

    def main_answer(request: ModelRequest) -> AssistantMessage:
        messages = request.messages
        if len(messages) == 1:
            return AssistantMessage(
                tool_calls=[
                    ToolCall(
                        name="task",
                        args={"description": f"topic {i}", "subagent_type": kinds[i % len(kinds)]},
                    )
                    for i in range(n)
                ]
            )
        return AssistantMessage(content=f"report from {len(messages) - 2} findings")

    return create_deep_agent(
        FunctionModel(main_answer, latency=LATENCY),
        tools=[lookup],
        subagents=[
            {"name": kind, "description": "researches one topic", "graph_id": graph_id, "url": url}
            for kind, url in zip(kinds, urls, strict=True)
        ],
        max_concurrent_subagents=None,
    )


# -- one run in a fresh process --------------------------------------------------------


def worker(way: str, backend: str, n: int, urls: list[str], listen: bool = False) -> None:
    if way == "local":
        make = our_work
    else:

        def make(size: int) -> Any:
            agent = remote_parent(size, urls)

            async def run() -> int:
                if not listen:
                    result = await agent.ainvoke("go")
                else:  # someone listens (as a server does): the children stream their events
                    async with open_runtime() as rt:
                        handle = await rt.start(agent, "go", on_event=lambda event: None)
                        result = await handle.result()
                text = result["messages"][-1].text
                failed = [m.text for m in result["messages"] if getattr(m, "status", "") == "error"]
                if failed:
                    raise RuntimeError(f"{len(failed)} children failed, e.g. {failed[0]}")
                return int(text.split()[2])

            return run

    anyio.run(make(10), backend=backend)  # warm-up: imports, connections, first-call caches
    m = anyio.run(measure, make(n), backend=backend)
    assert m.value == n, f"{way} returned {m.value} findings, expected {n}"
    emit_result(m)


def deadline_worker(backend: str, n: int, urls: list[str]) -> None:
    """N blocked children on ``urls``; the parent's deadline passes once all run."""
    agent = remote_parent(n, urls, graph_id="blocker")

    async def main() -> None:
        wheres: list[dict[str, str]] = []
        scope = anyio.CancelScope()
        returned = 0.0

        async def parent() -> None:
            nonlocal returned
            with scope:
                async for event in agent.astream("go"):
                    _collect(event, wheres)
            returned = time.time()

        async with anyio.create_task_group() as tg, httpx.AsyncClient() as http:
            tg.start_soon(parent)
            with anyio.fail_after(120):
                while True:
                    if len(wheres) == n and set(await _statuses(http, wheres)) == {"running"}:
                        break
                    await anyio.sleep(0.1)
            passed = time.time()
            scope.deadline = anyio.current_time()  # the parent's deadline passes now
        async with httpx.AsyncClient() as http:
            with anyio.fail_after(60):
                while True:
                    runs = await _runs(http, wheres)
                    if all(r["status"] not in ("pending", "running") for r in runs):
                        break
                    await anyio.sleep(0.05)
        ends = [datetime.fromisoformat(r["updated_at"]).timestamp() for r in runs]
        print(
            "RESULT "
            + json.dumps(
                {
                    "n": n,
                    "statuses": sorted({r["status"] for r in runs}),
                    "last_run_cancelled_s": max(ends) - passed,
                    "median_run_cancelled_s": statistics.median(ends) - passed,
                    "parent_returned_s": returned - passed,
                }
            ),
            flush=True,
        )

    anyio.run(main, backend=backend)


def _collect(event: Event, wheres: list[dict[str, str]]) -> None:
    if isinstance(event, CustomEvent) and isinstance(event.data, dict) and REMOTE_RUN in event.data:
        wheres.append(event.data[REMOTE_RUN])


async def _runs(http: httpx.AsyncClient, wheres: list[dict[str, str]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{}] * len(wheres)

    async def one(i: int, w: dict[str, str]) -> None:
        r = await http.get(f"{w['url']}/threads/{w['thread_id']}/runs/{w['run_id']}")
        out[i] = r.json()

    async with anyio.create_task_group() as tg:
        for i, w in enumerate(wheres):
            tg.start_soon(one, i, w)
    return out


async def _statuses(http: httpx.AsyncClient, wheres: list[dict[str, str]]) -> list[str]:
    return [r["status"] for r in await _runs(http, wheres)]


# -- the servers -----------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def servers(count: int, loop: str) -> Iterator[list[tuple[str, int]]]:
    """``count`` ``deepactors serve`` processes serving :data:`served`: (url, pid) each."""
    procs: list[subprocess.Popen[bytes]] = []
    out: list[tuple[str, int]] = []
    with tempfile.TemporaryDirectory() as logs:
        try:
            for _ in range(count):
                port = _free_port()
                args = ["w9_remote:served", "--loop", loop, "--port", str(port)]
                args += ["--max-streams-per-client", "0", "--max-runs-per-client", "0"]
                args += ["--log-level", "warning"]
                with open(Path(logs) / f"{port}.log", "wb") as log:
                    procs.append(
                        subprocess.Popen(
                            [sys.executable, "-m", "deepactors", "serve", *args],
                            cwd=HERE,
                            stdout=log,
                            stderr=subprocess.STDOUT,
                        )
                    )
                out.append((f"http://127.0.0.1:{port}", procs[-1].pid))
            for url, _ in out:
                deadline = time.monotonic() + 60
                while True:
                    try:
                        if httpx.get(f"{url}/ok").status_code == 200:
                            break
                    except httpx.TransportError:
                        pass
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"the server at {url} did not start")
                    time.sleep(0.1)
            yield out
        finally:
            for proc in procs:
                proc.send_signal(signal.SIGINT)
            for proc in procs:
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()


def cpu_seconds(pid: int) -> float:
    """A process's CPU time so far (user and system, every thread), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# -- the driver ------------------------------------------------------------------------


def _stats(values: list[float]) -> str:
    return f"{statistics.median(values):7.3f} [{min(values):.3f}-{max(values):.3f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000])
    parser.add_argument("--loops", nargs="+", default=["asyncio", "trio"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--server-loop", default="asyncio", choices=["asyncio", "trio"])
    parser.add_argument("--deadline", type=int, default=0, help="children for the deadline run")
    parser.add_argument(
        "--listen",
        action="store_true",
        help="the parent's events are listened to (as under a server): children stream",
    )
    parser.add_argument("--json", type=Path, help="write every run's figures here")
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        kind, backend, n, *urls = args.worker
        if kind == "deadline":
            deadline_worker(backend, int(n), urls)
        else:
            worker(kind.removesuffix("+listen"), backend, int(n), urls, kind.endswith("+listen"))
        return

    script = Path(__file__)
    print(f"W9 remote: W2 (N children x 3 model calls at {LATENCY * 1000:.0f} ms) with its")
    print("children in-process, on 1 and on 2 deepactors serve processes; median [range]")
    print(f"servers on {args.server_loop}; load average at start {os.getloadavg()}")
    results: dict[str, Any] = {"machine": machine_info(), "runs": []}
    with servers(2, args.server_loop) as fleet:
        pids = [pid for _, pid in fleet]
        for loop in args.loops:
            for n in args.sizes:
                runs: dict[str, list[dict[str, Any]]] = {w: [] for w in WAYS}
                for _ in range(args.repeats):
                    for way in WAYS:  # alternate, so load changes hit each way alike
                        urls = [] if way == "local" else [u for u, _ in fleet[: int(way[-1])]]
                        before = [cpu_seconds(p) for p in pids]
                        kind = way + ("+listen" if args.listen and way != "local" else "")
                        r = run_worker(script, ["--worker", kind, loop, str(n), *urls])
                        r["server_cpu"] = sum(cpu_seconds(p) for p in pids) - sum(before)
                        r.update(way=way, loop=loop, n=n)
                        runs[way].append(r)
                        results["runs"].append(r)
                print(f"\n{loop}, N={n} (critical path {CRITICAL_PATH:.2f} s):")
                local_cpu = statistics.median(r["cpu"] + r["server_cpu"] for r in runs["local"])
                for way in WAYS:
                    rs = runs[way]
                    walls = [r["wall"] for r in rs]
                    client = [r["cpu"] / n * 1000 for r in rs]
                    server = [r["server_cpu"] / n * 1000 for r in rs]
                    total = [c + s for c, s in zip(client, server, strict=True)]
                    line = (
                        f"  {way:9} wall {_stats(walls)} s, {n / statistics.median(walls):6.0f}"
                        f" children/s | CPU ms/child: client {_stats(client)}, "
                        f"servers {_stats(server)}, both {_stats(total)}"
                    )
                    if way != "local":
                        overhead = [t - local_cpu / n * 1000 for t in total]
                        line += f" | HTTP overhead {_stats(overhead)} ms/child"
                    print(line, flush=True)
        if args.deadline:
            for loop in args.loops:
                urls = [u for u, _ in fleet]
                d = run_worker(script, ["--worker", "deadline", loop, str(args.deadline), *urls])
                d.update(way="deadline", loop=loop)
                results["runs"].append(d)
                print(
                    f"\n{loop}: deadline of a parent with {args.deadline} remote children "
                    f"running on 2 servers: last run recorded {d['statuses']} "
                    f"{d['last_run_cancelled_s'] * 1000:.0f} ms after it (median "
                    f"{d['median_run_cancelled_s'] * 1000:.0f} ms); the parent's call "
                    f"returned after {d['parent_returned_s'] * 1000:.0f} ms"
                )
    results["machine"] = machine_info()
    print(f"\nload average at end {os.getloadavg()}")
    if args.json:
        write_json(args.json, results)


if __name__ == "__main__":
    main()
