"""``deepactors serve`` as a real process on a free port, for the tests that need one."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.waiting import http_ok, wait_until_serving

__all__ = ["serve_process", "serve_processes", "serving"]

START_WITHIN = 30.0
"""Seconds a server process has to answer, once started (a loaded machine is slow)."""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True, slots=True)
class _Started:
    url: str
    process: subprocess.Popen[bytes]
    log: Path


def _start(args: list[str], cwd: Path) -> _Started:
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
    return _Started(f"http://127.0.0.1:{port}", process, log)


def _await_answer(started: _Started, deadline: float) -> None:
    # Another process: polled until it answers, failing at once if it ends.
    wait_until_serving(
        started.process,
        lambda: http_ok(f"{started.url}/ok"),
        log=started.log,
        timeout=max(deadline - time.monotonic(), 0.1),
    )


def _interrupt(started: _Started) -> bool:
    """Ctrl-C, unless the test killed it itself; whether it did."""
    killed_by_test = started.process.poll() == -signal.SIGKILL
    if started.process.poll() is None:
        started.process.send_signal(signal.SIGINT)
    return killed_by_test


def _reap(started: _Started) -> None:
    try:
        started.process.wait(20)
    finally:
        if started.process.poll() is None:
            started.process.kill()
            started.process.wait()


@contextlib.contextmanager
def serve_processes(
    runs: Sequence[list[str]], cwd: Path
) -> Iterator[list[tuple[str, subprocess.Popen[bytes]]]]:
    """Start ``deepactors serve *args`` in ``cwd`` for each of ``runs``, all at once
    (their start-ups overlap); yield each one's URL and process once all answer.

    On leaving, the servers are shut down with Ctrl-C, all at once, and each must
    exit cleanly (0), unless the test killed it itself (SIGKILL).
    """
    started: list[_Started] = []
    killed_by_test: list[bool] = []
    try:
        for args in runs:
            started.append(_start(args, cwd))
        deadline = time.monotonic() + START_WITHIN * len(runs)
        for one in started:
            _await_answer(one, deadline)
        yield [(one.url, one.process) for one in started]
    finally:
        killed_by_test = [_interrupt(one) for one in started]
        failed: list[BaseException] = []
        for one in started:  # each reaped, whichever failed to exit in time
            try:
                _reap(one)
            except BaseException as exc:
                failed.append(exc)
        if failed:
            raise failed[0]
    # A clean shutdown, unless the test killed it.
    for one, killed in zip(started, killed_by_test, strict=True):
        assert one.process.returncode == 0 or killed, one.log.read_text()


@contextlib.contextmanager
def serve_process(args: list[str], cwd: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """Start ``deepactors serve *args`` in ``cwd``; yield its URL and process once it answers.

    On leaving, the server is shut down with Ctrl-C and must exit cleanly (0),
    unless the test killed it itself (SIGKILL).
    """
    with serve_processes([args], cwd) as ((url, process),):
        yield url, process


@contextlib.contextmanager
def serving(args: list[str], cwd: Path) -> Iterator[str]:
    """:func:`serve_process`, yielding the URL only."""
    with serve_process(args, cwd) as (url, _):
        yield url
