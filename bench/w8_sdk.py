"""W8: a fan-out over the real anthropic and openai SDKs and real HTTP, beside the bare SDK.

One main turn emits N ``task`` calls; each child makes 3 model calls (two
``lookup`` tool calls one at a time, then an answer); one final main turn: 3N + 2
calls to a model server on 127.0.0.1 (``bench/_w8_server.py``, its own process,
so the figures below are the client's alone). The floor makes the same calls
with the bare SDK in plain coroutines: the same client (made the same way, handed
to the model with ``client=``), the same server, the same concurrency limit, and
requests of the same shape (the system prompt and tools deepactors sent, read back
from the server after a warm-up run; the floor passes them as the SDK's keyword
arguments, the way a user calls it).

    python bench/w8_sdk.py [--n 1000] [--sdks anthropic openai] [--loops asyncio trio]
                           [--repeats 3] [--concurrency 64] [--profile]

Every run is a fresh interpreter (after a warm-up run of 10 in it); floor and
deepactors runs alternate. Printed per (SDK, loop), medians of the repeats:
whole-process CPU per model call (``time.process_time``), deepactors' over the
floor's (the goal: at most 1.15x), wall time, and p50/p99 latency of a model call
under the fan-out (from asking to the parsed answer, the wait for a request slot
included, in both). ``--profile`` adds one profiled deepactors run per (SDK,
loop): the share of CPU spent in the SDK, in HTTP (httpx2, httpcore2, h11, the
event loop's sockets), in deepactors and in the rest (pydantic, json, the loop).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import pstats
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).parent))

from _common import emit_result, measure, run_worker

from deepactors import create_deep_agent
from deepactors.messages import AssistantMessage
from deepactors.models import ChatModel, ModelRequest

IMPLS = ("floor", "deepactors")
WARM_UP = 10
# Seconds per request, connecting included: on a loaded machine the server's
# accept loop can be slower than the SDKs' default 5 s connect timeout.
TIMEOUT = 600.0


async def lookup(key: str) -> str:
    """Look a key up (trivially).

    Args:
        key: The key.
    """
    return f"value of {key}"


class Timed:
    """A model that times each call of the model it wraps (every other attribute is its)."""

    def __init__(self, inner: ChatModel, latencies: list[float]) -> None:
        self.inner = inner
        self.latencies = latencies

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    @property
    def model_name(self) -> str:
        return self.inner.model_name

    async def generate(self, request: ModelRequest) -> AssistantMessage:
        t0 = time.perf_counter()
        try:
            return await self.inner.generate(request)
        finally:
            self.latencies.append(time.perf_counter() - t0)

    def stream(self, request: ModelRequest) -> Any:
        return self.inner.stream(request)


# -- clients, made the same way for both -----------------------------------------------


def make_client(sdk: str, port: int, n: int) -> Any:
    headers = {"x-fanout": str(n)}
    if sdk == "anthropic":
        import anthropic

        return anthropic.AsyncAnthropic(
            api_key="k",
            base_url=f"http://127.0.0.1:{port}",
            max_retries=0,
            default_headers=headers,
            timeout=TIMEOUT,
        )
    import openai

    return openai.AsyncOpenAI(
        api_key="k",
        base_url=f"http://127.0.0.1:{port}/v1",
        max_retries=0,
        default_headers=headers,
        timeout=TIMEOUT,
    )


# -- the floor: plain coroutines over the bare SDK -------------------------------------


async def floor_run(
    sdk: str, port: int, n: int, concurrency: int, templates: dict[str, Any], lat: list[float]
) -> int:
    client = make_client(sdk, port, n)
    limiter = anyio.CapacityLimiter(concurrency)
    main_t, child_t = templates["main"], templates["child"]

    async def ask(template: dict[str, Any], messages: list[Any]) -> Any:
        t0 = time.perf_counter()
        async with limiter:
            if sdk == "anthropic":
                fixed = {k: v for k, v in template.items() if k != "messages"}
                answer = await client.messages.create(**fixed, messages=messages)
            else:
                fixed = {k: v for k, v in template.items() if k != "messages"}
                answer = await client.chat.completions.create(**fixed, messages=messages)
        lat.append(time.perf_counter() - t0)
        return answer

    def opening(template: dict[str, Any], text: str) -> list[Any]:
        if sdk == "anthropic":
            return [{"role": "user", "content": [{"type": "text", "text": text}]}]
        return [template["messages"][0], {"role": "user", "content": text}]

    def calls_of(answer: Any) -> list[tuple[str, str, dict[str, Any]]]:
        if sdk == "anthropic":
            return [(b.id, b.name, b.input) for b in answer.content if b.type == "tool_use"]
        message = answer.choices[0].message
        return [
            (c.id, c.function.name, json.loads(c.function.arguments))
            for c in message.tool_calls or ()
        ]

    def text_of(answer: Any) -> str:
        if sdk == "anthropic":
            return "".join(b.text for b in answer.content if b.type == "text")
        return str(answer.choices[0].message.content or "")

    def turn(calls: list[tuple[str, str, dict[str, Any]]], results: list[str]) -> list[Any]:
        if sdk == "anthropic":
            return [
                {
                    "role": "assistant",
                    "content": [
                        {"type": "tool_use", "id": i, "name": name, "input": args}
                        for i, name, args in calls
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": i, "content": r}
                        for (i, _, _), r in zip(calls, results, strict=True)
                    ],
                },
            ]
        return [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": i,
                        "type": "function",
                        "function": {"name": name, "arguments": json.dumps(args)},
                    }
                    for i, name, args in calls
                ],
            },
            *(
                {"role": "tool", "tool_call_id": i, "content": r}
                for (i, _, _), r in zip(calls, results, strict=True)
            ),
        ]

    async def child(description: str) -> str:
        messages = opening(child_t, description)
        while True:
            answer = await ask(child_t, messages)
            calls = calls_of(answer)
            if not calls:
                return text_of(answer)
            results = [await lookup(**args) for _, _, args in calls]
            messages += turn(calls, results)

    async with client:
        messages = opening(main_t, "go")
        answer = await ask(main_t, messages)
        tasks = calls_of(answer)
        results = [""] * len(tasks)

        async def run(i: int, description: str) -> None:
            results[i] = await child(description)

        async with anyio.create_task_group() as tg:
            for i, (_, _, args) in enumerate(tasks):
                tg.start_soon(run, i, args["description"])
        messages += turn(tasks, results)
        final = await ask(main_t, messages)
    return int(text_of(final).split()[2])


# -- deepactors ------------------------------------------------------------------------


async def our_run(sdk: str, port: int, n: int, concurrency: int, lat: list[float]) -> int:
    client = make_client(sdk, port, n)
    model: ChatModel
    if sdk == "anthropic":
        from deepactors.models.anthropic import AnthropicModel

        model = AnthropicModel(
            "claude-sonnet-5-5", client=client, max_concurrent_requests=concurrency
        )
    else:
        from deepactors.models.openai import OpenAIModel

        model = OpenAIModel("gpt-5.5", client=client, max_concurrent_requests=concurrency)
    timed = Timed(model, lat)
    child = {
        "name": "r",
        "description": "researches one topic",
        "system_prompt": "Research the topic.",
        "tools": [lookup],
    }
    agent = create_deep_agent(
        timed,  # type: ignore[arg-type]
        tools=[lookup],
        subagents=[child],
        max_concurrent_subagents=None,
    )
    async with client:
        result = await agent.ainvoke("go")
    return int(result["messages"][-1].text.split()[2])


def work_for(
    impl: str, sdk: str, port: int, n: int, concurrency: int, templates: dict[str, Any]
) -> tuple[Callable[[], Awaitable[int]], list[float]]:
    lat: list[float] = []
    if impl == "floor":
        return (lambda: floor_run(sdk, port, n, concurrency, templates, lat)), lat
    return (lambda: our_run(sdk, port, n, concurrency, lat)), lat


def worker(
    impl: str,
    sdk: str,
    backend: str,
    n: int,
    port: int,
    concurrency: int,
    profile: bool,
    freeze: bool,
) -> None:
    templates = {kind: _get(port, f"{sdk}/{kind}") for kind in ("main", "child")}
    warm, _ = work_for(impl, sdk, port, WARM_UP, concurrency, templates)
    anyio.run(warm, backend=backend)
    work, lat = work_for(impl, sdk, port, n, concurrency, templates)
    if freeze:
        # What open_runtime(freeze_heap=True) does when a server starts: the
        # SDKs' modules are never walked by the collector again.
        gc.collect()
        gc.freeze()
    if profile:
        profiler = cProfile.Profile(time.process_time)
        profiler.enable()
        value = anyio.run(work, backend=backend)
        profiler.disable()
        assert value == n
        print("RESULT " + json.dumps(_shares(profiler)), flush=True)
        return
    m = anyio.run(measure, work, backend=backend)
    assert m.value == n, f"{impl} returned {m.value}, expected {n}"
    lat.sort()
    emit_result(
        m,
        calls=len(lat),
        p50=lat[len(lat) // 2],
        p99=lat[min(len(lat) - 1, int(len(lat) * 0.99))],
    )


def _shares(profiler: cProfile.Profile) -> dict[str, float]:
    groups = {
        "sdk": ("/anthropic/", "/openai/"),
        "http": ("/httpx2/", "/httpcore2/", "/httpx/", "/httpcore/", "/h11/", "/anyio/streams/"),
        "deepactors": ("/deepactors/",),
    }
    totals = dict.fromkeys([*groups, "other"], 0.0)
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    for (filename, _, _), (_, _, tottime, _, _) in stats.items():
        for group, marks in groups.items():
            if any(mark in filename for mark in marks):
                totals[group] += tottime
                break
        else:
            totals["other"] += tottime
    whole = sum(totals.values()) or 1.0
    return {group: value / whole for group, value in totals.items()}


def _get(port: int, kind: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/first/{kind}") as answer:
        return json.loads(answer.read())  # type: ignore[no-any-return]


# -- the driver ------------------------------------------------------------------------


def _median(runs: list[dict[str, Any]], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000, help="subagents")
    parser.add_argument("--sdks", nargs="+", default=["anthropic", "openai"])
    parser.add_argument("--loops", nargs="+", default=["asyncio", "trio"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=64, help="requests in flight at most")
    parser.add_argument("--profile", action="store_true", help="CPU shares from a profiled run")
    parser.add_argument(
        "--freeze", action="store_true", help="gc.freeze() before each run (both alike)"
    )
    parser.add_argument("--worker", nargs=6, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        impl, sdk, backend, n, port, concurrency = args.worker
        worker(impl, sdk, backend, int(n), int(port), int(concurrency), args.profile, args.freeze)
        return
    server = subprocess.Popen(
        [sys.executable, str(Path(__file__).parent / "_w8_server.py"), str(args.n)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline().split()[1])
        _drive(args, port)
    finally:
        server.terminate()
        server.wait(timeout=10)


def _drive(args: argparse.Namespace, port: int) -> None:
    script = Path(__file__)
    print(
        f"W8: {args.n} subagents x 3 model calls over the real SDKs and HTTP on 127.0.0.1, "
        f"{args.concurrency} requests in flight at most; medians of {args.repeats} "
        "fresh-process runs" + (" (gc.freeze() before each)" if args.freeze else "")
    )
    for sdk in args.sdks:
        # A warm-up run of deepactors records the request shapes the floor sends.
        anyio.run(our_run, sdk, port, WARM_UP, args.concurrency, [])
        for backend in args.loops:
            runs: dict[str, list[dict[str, Any]]] = {impl: [] for impl in IMPLS}
            for _ in range(args.repeats):
                for impl in IMPLS:
                    worker_args = [
                        "--worker",
                        impl,
                        sdk,
                        backend,
                        str(args.n),
                        str(port),
                        str(args.concurrency),
                        *(["--freeze"] if args.freeze else []),
                    ]
                    runs[impl].append(run_worker(script, worker_args))
            print(f"{sdk}, {backend}:")
            for impl in IMPLS:
                r = runs[impl]
                calls = _median(r, "calls")
                print(
                    f"  {impl:10} {calls:5.0f} calls | CPU {_median(r, 'cpu') / calls * 1e6:7.0f}"
                    f" us/call (GC {_median(r, 'gc_time') / calls * 1e6:5.0f}, "
                    f"{_median(r, 'gc_full'):3.0f} full) | wall {_median(r, 'wall'):6.2f} s | p50 "
                    f"{_median(r, 'p50') * 1000:6.1f} ms, p99 {_median(r, 'p99') * 1000:6.1f} ms"
                )
            ratio = (_median(runs["deepactors"], "cpu") / _median(runs["deepactors"], "calls")) / (
                _median(runs["floor"], "cpu") / _median(runs["floor"], "calls")
            )
            print(f"  deepactors/floor CPU per call: {ratio:.3f}x (goal <= 1.15x)")
            if args.profile:
                shares = run_worker(
                    script,
                    [
                        "--worker",
                        "deepactors",
                        sdk,
                        backend,
                        str(args.n),
                        str(port),
                        str(args.concurrency),
                        "--profile",
                    ],
                )
                print(
                    "  profiled CPU shares: "
                    + ", ".join(f"{k} {v * 100:.0f}%" for k, v in shares.items())
                )


if __name__ == "__main__":
    main()
