"""W1 and W2 in instructions: CPU work the machine's load cannot change.

Runs a benchmark's worker (a warm-up, then one run) under ``valgrind
--tool=callgrind`` and subtracts a run of another size, so start-up and imports
cancel out. ``PYTHONHASHSEED=0`` keeps runs repeatable. Slow (a minute or two
per run on a busy machine); needs valgrind.

    python bench/instructions.py w2 [--sizes 100 500] [--loops asyncio trio] [--no-gc] [--budget]
                                    [--traced]
    python bench/instructions.py w1 [--sizes 200 3000] [--loops asyncio trio] [--calls 1]
    python bench/instructions.py w5 [--sizes 50 250] [--loops asyncio trio]

- ``w2``: instructions per subagent, (I(N2) - I(N1)) / (N2 - N1): the floor, deepactors,
  and deepactors with ``pacing=None`` (what pacing costs in instructions).
- ``w1``: instructions per turn at each K, (I(K) - I(1)) / (K - 1), floor and
  deepactors, and how deepactors' figure grows from the smallest K to the largest.
- ``w5``: the journal's instructions per turn (``bench/w5_checkpoint.py``): the
  async journal floor's, and what ``SqliteCheckpointer`` adds to the W1 agent's
  (its turns with the checkpointer less its turns without), every thread counted.

With ``--no-gc`` the collector is off in the worker, which separates the
framework's own work from the collector's (the collector's share at large N is
better read from ``w2_fanout.py --census``: objects per subagent).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).parent
IMPLS = ("floor", "deepactors")
_NO_GC = (
    "import gc, runpy, sys; gc.disable(); sys.argv = sys.argv[1:]; "
    "runpy.run_path(sys.argv[0], run_name='__main__')"
)


def instructions(script: str, worker: list[str], gc_on: bool) -> int:
    """Instructions of one worker process of ``script``."""
    args = [str(HERE / script), "--worker", *worker]
    python = [sys.executable, *args] if gc_on else [sys.executable, "-c", _NO_GC, *args]
    with tempfile.TemporaryDirectory() as tmp:
        cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={tmp}/out", *python]
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    found = re.search(r"Collected : (\d+)", proc.stderr)
    if proc.returncode != 0 or found is None:
        raise RuntimeError(f"{cmd} failed:\n{proc.stderr[-3000:]}")
    return int(found.group(1))


def w2(
    loops: list[str], sizes: list[int], gc_on: bool, budget: bool = False, traced: bool = False
) -> None:
    small, large = sizes
    print(f"W2 instructions per subagent (N={large} minus N={small}, collector {_on(gc_on)})")
    for backend in loops:
        per = {}
        extra = (
            *(("budget",) if budget else ()),
            *(("traced", "trace_noop", "floor_traced") if traced else ()),
        )
        for impl in (*IMPLS, "unpaced", *extra):
            a, b = (
                instructions("w2_fanout.py", [impl, backend, str(n), "--mode", "plain"], gc_on)
                for n in (small, large)
            )
            per[impl] = (b - a) / (large - small)
        print(
            f"  {backend:8} floor {per['floor'] / 1e3:8.0f} k | deepactors "
            f"{per['deepactors'] / 1e3:8.0f} k | ratio {per['deepactors'] / per['floor']:.2f}x"
            f" | unpaced {per['unpaced'] / 1e3:8.0f} k"
            f" ({per['unpaced'] / per['floor']:.2f}x: pacing costs "
            f"{per['deepactors'] / per['unpaced']:.2f}x)"
        )
        if budget:
            print(
                f"  {backend:8} under an unreachable Budget {per['budget'] / 1e3:8.0f} k"
                f" ({per['budget'] / per['deepactors']:.3f}x without one; goal <= 1.1x)"
            )
        if traced:
            print(
                f"  {backend:8} traced (SDK, batch processor, in-memory) "
                f"{per['traced'] / 1e3:8.0f} k ({per['traced'] / per['deepactors']:.2f}x) | "
                f"no-op provider {per['trace_noop'] / 1e3:8.0f} k "
                f"({per['trace_noop'] / per['deepactors']:.2f}x)"
            )
            sdk = per["floor_traced"] - per["floor"]
            ours = per["traced"] - per["deepactors"]
            print(
                f"  {backend:8} floor traced by hand {per['floor_traced'] / 1e3:8.0f} k "
                f"({per['floor_traced'] / per['floor']:.2f}x the floor) | tracing adds "
                f"{sdk / 1e3:.0f} k to the floor, {ours / 1e3:.0f} k to deepactors "
                f"({ours / sdk:.2f}x)"
            )


def w1(loops: list[str], sizes: list[int], calls: int, gc_on: bool) -> None:
    print(f"W1 instructions per turn, {calls} tool call(s) per turn (collector {_on(gc_on)})")
    for backend in loops:
        ours = {}
        for impl in IMPLS:
            # A run of one turn as the base: the agent's set-up and the run's
            # fixed costs cancel, and what remains is what each further turn costs.
            base = instructions("w1_agent_loop.py", [impl, backend, "1", str(calls)], gc_on)
            for k in sizes:
                total = instructions("w1_agent_loop.py", [impl, backend, str(k), str(calls)], gc_on)
                per_turn = (total - base) / (k - 1)
                if impl == "deepactors":
                    ours[k] = per_turn
                print(f"  {backend:8} {impl:10} K={k:5}: {per_turn / 1e3:7.1f} k per turn")
        lo, hi = min(sizes), max(sizes)
        print(f"  {backend:8} deepactors per turn at K={hi} / K={lo}: {ours[hi] / ours[lo]:.3f}x")


def w5(loops: list[str], sizes: list[int], gc_on: bool) -> None:
    small, large = sizes
    print(f"W5 journal instructions per turn (K={large} minus K={small}, collector {_on(gc_on)})")
    for backend in loops:
        per = {}
        for impl in ("floor", "plain", "sqlite"):
            a, b = (
                instructions("w5_checkpoint.py", [impl, backend, str(k)], gc_on)
                for k in (small, large)
            )
            per[impl] = (b - a) / (large - small)
        added = per["sqlite"] - per["plain"]
        print(
            f"  {backend:8} floor {per['floor'] / 1e3:7.1f} k | deepactors adds "
            f"{added / 1e3:7.1f} k (turn {per['plain'] / 1e3:.1f} k without a checkpointer) | "
            f"ratio {added / per['floor']:.2f}x"
        )


def _on(gc_on: bool) -> str:
    return "on" if gc_on else "off"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workload", choices=["w1", "w2", "w5"])
    parser.add_argument("--sizes", type=int, nargs="+", help="N (w2: two sizes) or K (w1)")
    parser.add_argument("--loops", nargs="+", default=["asyncio", "trio"])
    parser.add_argument("--calls", type=int, default=1, help="w1: tool calls per turn")
    parser.add_argument("--no-gc", action="store_true", help="collector off in the worker")
    parser.add_argument(
        "--budget", action="store_true", help="w2: also under an unreachable Budget (issue 12)"
    )
    parser.add_argument(
        "--traced",
        action="store_true",
        help="w2: also traced (OpenTelemetry SDK) and through the API's no-op provider (issue 30)",
    )
    args = parser.parse_args()
    if args.workload == "w2":
        w2(args.loops, args.sizes or [100, 500], not args.no_gc, args.budget, args.traced)
    elif args.workload == "w5":
        w5(args.loops, args.sizes or [50, 250], not args.no_gc)
    else:
        w1(args.loops, args.sizes or [200, 3000], args.calls, not args.no_gc)


if __name__ == "__main__":
    main()
