"""Helpers for the MCP tests: our test server's configuration and what it wrote."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from deepactors.mcp import MCPServer
from tests.waiting import port_open, wait_until_serving

# The SDK's streamable HTTP client leaves httpx2's SSE generators to the garbage
# collector (it returns from inside ``async for``); on trio, the collector's
# finalizer closes them and says so with a ResourceWarning. Nothing deepactors
# holds: for the tests over HTTP, that warning is not an error.
SDK_HTTP_ON_TRIO = pytest.mark.filterwarnings(
    r"ignore:Async generator '(httpx2|httpcore2)\.:ResourceWarning"
)

ROOT = Path(__file__).resolve().parents[2]
APP = Path(__file__).with_name("mcp_app.py")
NODE = ROOT / ".ci" / "node"


def app_server(log: Path, **options: object) -> MCPServer:
    """Our test server over stdio, writing its events to ``log``."""
    return MCPServer.stdio(
        sys.executable,
        [str(APP), "stdio"],
        name="app",
        env={"MCP_APP_LOG": str(log)},
        **options,  # type: ignore[arg-type]
    )


def events(log: Path) -> list[str]:
    """The lines the test server wrote to ``log`` so far."""
    return log.read_text().splitlines() if log.exists() else []


def alive(pid: int) -> bool:
    """Whether ``pid`` exists at all (a zombie counts: it was not reaped)."""
    return Path(f"/proc/{pid}").exists()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_http_app(port: int, log: Path, mode: str = "http") -> subprocess.Popen[bytes]:
    """Our test server over streamable HTTP on ``port``, once it accepts connections.

    ``mode="http-json"``: it answers requests as plain JSON, not event streams.
    """
    proc = subprocess.Popen(
        [sys.executable, str(APP), mode, str(port)],
        env={**os.environ, "MCP_APP_LOG": str(log)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until_serving(
            proc, lambda: port_open(port), what="the test MCP server over HTTP started"
        )
    except BaseException:
        proc.kill()
        proc.wait()  # reaped: not left for the collector to find still running
        raise
    return proc
