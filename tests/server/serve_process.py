"""``deepactors serve`` as a real process on a free port, for the tests that need one."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from tests.waiting import http_ok, wait_until_serving

__all__ = ["serve_process", "serving"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def serve_process(args: list[str], cwd: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """Start ``deepactors serve *args`` in ``cwd``; yield its URL and process once it answers.

    On leaving, the server is shut down with Ctrl-C and must exit cleanly (0),
    unless the test killed it itself (SIGKILL).
    """
    port = _free_port()
    log = cwd / f"serve-{port}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "deepactors", "serve", *args, "--port", str(port)],
            cwd=cwd,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_serving(process, lambda: http_ok(f"{url}/ok"), log=log)
        yield url, process
    finally:
        killed_by_test = process.poll() == -signal.SIGKILL
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(20)
            finally:
                if process.poll() is None:
                    process.kill()
                    process.wait()
    # A clean shutdown, unless the test killed it.
    assert process.returncode == 0 or killed_by_test, log.read_text()


@contextlib.contextmanager
def serving(args: list[str], cwd: Path) -> Iterator[str]:
    """:func:`serve_process`, yielding the URL only."""
    with serve_process(args, cwd) as (url, _):
        yield url
