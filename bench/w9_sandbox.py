"""W9: what a sandboxed ``execute`` costs beside an unsandboxed one.

One ``execute("true")`` at a time, timed end to end (the workspace checked,
bubblewrap's namespaces set up, ``prlimit``, ``sh -c true``, every process
reaped). Beside it, in the same run and the same loop: the same call on
``LocalShellBackend`` (no isolation), and the floor, a bare
``anyio.run_process(["sh", "-c", "true"])``. Each repetition takes ``--n``
calls of each (interleaved: a burst of load on the machine hits all three);
printed are the medians over repetitions of each one's p50 and p99, and the
sandbox's p50 minus the local shell's (issue 31's goal: at most 30 ms added).

    python bench/w9_sandbox.py [--n 200] [--reps 3] [--loops asyncio trio]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable

import anyio

from deepactors.backends import BubblewrapSandbox, LocalShellBackend, SandboxKey, sandbox_scope


def quantile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def one_rep(n: int, base: str) -> dict[str, tuple[float, float]]:
    shell = LocalShellBackend(os.path.join(base, "shell"), timeout=30)
    async with BubblewrapSandbox(os.path.join(base, "ws"), timeout=30) as sandbox:
        floor = lambda: anyio.run_process(["sh", "-c", "true"])  # noqa: E731
        cases: dict[str, Callable[[], Awaitable[object]]] = {
            "subprocess (floor)": floor,
            "LocalShellBackend": lambda: shell.execute("true"),
            "BubblewrapSandbox": lambda: sandbox.execute("true"),
        }
        samples: dict[str, list[float]] = {name: [] for name in cases}
        with sandbox_scope(SandboxKey("bench")):
            for call in cases.values():  # warm up each once
                await call()
            for _ in range(n):
                for name, call in cases.items():
                    t0 = time.perf_counter()
                    await call()
                    samples[name].append(time.perf_counter() - t0)
    return {name: (quantile(s, 0.5), quantile(s, 0.99)) for name, s in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=200, help="calls of each kind per repetition")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--loops", nargs="+", default=["asyncio", "trio"])
    args = parser.parse_args()
    base = tempfile.mkdtemp(prefix="deepactors-w9-")
    os.chmod(base, 0o755)  # run as nobody when root: the workspace must be reachable
    try:
        print(f"W9 sandbox: execute('true'), n={args.n} per kind, reps={args.reps}, medians")
        for loop in args.loops:
            reps = [anyio.run(one_rep, args.n, base, backend=loop) for _ in range(args.reps)]
            print(f"\n  loop={loop}")
            print(f"  {'':22} {'p50 ms':>8} {'p99 ms':>8}")
            for name in reps[0]:
                p50 = statistics.median(r[name][0] for r in reps) * 1000
                p99 = statistics.median(r[name][1] for r in reps) * 1000
                print(f"  {name:22} {p50:8.2f} {p99:8.2f}")
            added = statistics.median(
                r["BubblewrapSandbox"][0] - r["LocalShellBackend"][0] for r in reps
            )
            print(f"  sandbox adds {added * 1000:.2f} ms at p50 over the local shell (goal <= 30)")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
