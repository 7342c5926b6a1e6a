"""W7's clients: many streaming runs at once against a server, and what they saw.

Two clients of the same runs (stateless ``POST /runs/stream``, ``updates``): the
real ``langgraph-sdk`` async client (:func:`over_http`), and a lean one, a bare
socket per run with no HTTP library (:func:`over_raw`), whose own CPU is small
enough that what it measures is the server. Both reset the server's figures
(``/bench/reset``) before the runs and read them (``/bench/stats``) after.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from typing import Any

import httpx
from _common import StreamTimes

__all__ = ["BENCH_KEY", "over_http", "over_raw", "percentile"]

BENCH_KEY = "w7-bench-key-0123456789"
"""The API key of ``W7_AUTH=1`` runs."""


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))] if ordered else float("nan")


async def over_http(url: str, runs: int, deadline: float) -> dict[str, Any]:
    from langgraph_sdk.client import LangGraphClient

    transport = httpx.AsyncHTTPTransport(limits=httpx.Limits(max_connections=None))
    http = httpx.AsyncClient(
        base_url=url,
        transport=transport,
        timeout=httpx.Timeout(deadline),
        headers={"x-api-key": BENCH_KEY} if os.environ.get("W7_AUTH") == "1" else None,
    )
    times = StreamTimes()

    async def one() -> None:
        t0 = time.perf_counter()
        parts = client.runs.stream(
            None,
            "agent",
            input={"messages": [{"role": "user", "content": "go"}]},
            stream_mode="updates",
        )
        await times.follow(parts, t0)

    async with LangGraphClient(http) as client:
        started = [one() for _ in range(runs)]
        return await _run_all(url, started, deadline, times.first, times.first_state, times.errors)


async def _run_all(
    url: str,
    runs: list[Any],
    deadline: float,
    first: list[float],
    first_state: list[float],
    errors: list[str],
) -> dict[str, Any]:
    """Reset the server's figures, run ``runs`` at once, and gather both sides' figures."""
    # Connections of their own: a pooled one may have been closed by the server.
    async with httpx.AsyncClient() as side:
        await side.post(f"{url}/bench/reset")
    t0, c0 = time.perf_counter(), time.process_time()
    async with asyncio.timeout(deadline):
        await asyncio.gather(*runs)
    wall, client_cpu = time.perf_counter() - t0, time.process_time() - c0
    async with httpx.AsyncClient() as side:
        stats = (await side.get(f"{url}/bench/stats")).json()
    return {
        "first": first,
        "first_state": first_state,
        "wall": wall,
        "errors": errors,
        "client_cpu_s": client_cpu,
        **stats,
    }


def _stream_request(host: str, port: int) -> bytes:
    """The bytes of one ``POST /runs/stream`` as the SDK sends it (stateless, ``updates``)."""
    body = json.dumps(
        {
            "assistant_id": "agent",
            "input": {"messages": [{"role": "user", "content": "go"}]},
            "stream_mode": ["updates"],
        }
    ).encode()
    head = (
        f"POST /runs/stream HTTP/1.1\r\nHost: {host}:{port}\r\n"
        "Content-Type: application/json\r\nAccept: text/event-stream\r\n"
        + (f"Authorization: Bearer {BENCH_KEY}\r\n" if os.environ.get("W7_AUTH") == "1" else "")
        + f"Connection: close\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def _raw_run(host: str, port: int, request: bytes) -> tuple[float, float, str | None]:
    """One streaming run over a bare socket: (first event, first update, error or None).

    Reads until the chunked body's last chunk (or the server closes); looks for
    SSE event names in the raw bytes (chunk-size lines do not matter to a
    substring search).
    """
    t0 = time.perf_counter()
    first = first_update = float("nan")
    seen = bytearray()
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(request)
        while chunk := await reader.read(65536):
            start = max(0, len(seen) - 16)
            seen += chunk
            if first != first and seen.find(b"event: metadata", start) >= 0:
                first = time.perf_counter() - t0
            if first_update != first_update and seen.find(b"event: updates", start) >= 0:
                first_update = time.perf_counter() - t0
            if seen.endswith(b"\r\n0\r\n\r\n"):
                break  # the last chunk (a server may keep the connection open a while)
    finally:
        writer.close()
    if not seen.startswith(b"HTTP/1.1 200"):
        return first, first_update, bytes(seen[:64]).decode(errors="replace")
    if b"event: error" in seen or not seen.endswith(b"0\r\n\r\n"):
        return first, first_update, "error event or cut stream"
    return first, first_update, None


async def over_raw(url: str, runs: int, deadline: float) -> dict[str, Any]:
    """The same runs through a lean client: a bare socket per run, no HTTP library.

    The SDK's client spends several ms of CPU per run on the same cores as the
    server, so its time to first event is mostly its own queue; this one costs
    little, so what it measures is the server.
    """
    host, port = url.removeprefix("http://").split(":")
    request = _stream_request(host, int(port))
    first: list[float] = []
    first_state: list[float] = []
    errors: list[str] = []

    async def one() -> None:
        try:
            got, update, error = await _raw_run(host, int(port), request)
        except OSError as exc:
            errors.append(repr(exc))
            return
        first.append(got)
        first_state.append(update)
        if error is not None:
            errors.append(error)

    return await _run_all(url, [one() for _ in range(runs)], deadline, first, first_state, errors)
