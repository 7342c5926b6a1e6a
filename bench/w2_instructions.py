"""W2 in instructions: CPU work per subagent that the machine's load cannot change.

Runs the W2 worker (``bench/w2_fanout.py``: warm-up, then one fan-out) under
``valgrind --tool=callgrind`` at two sizes, for the floor and deepactors, and
prints the difference over the difference in N: instructions per subagent, with
start-up and imports cancelled out. ``PYTHONHASHSEED=0`` keeps runs repeatable.
Slow (a minute or two per run); needs valgrind.

    python bench/w2_instructions.py [--sizes 100 500] [--loops asyncio trio] [--no-gc]

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

SCRIPT = Path(__file__).with_name("w2_fanout.py")
IMPLS = ("floor", "deepactors")


_NO_GC = (
    "import gc, runpy, sys; gc.disable(); sys.argv = sys.argv[1:]; "
    "runpy.run_path(sys.argv[0], run_name='__main__')"
)


def instructions(impl: str, backend: str, n: int, gc_on: bool) -> int:
    """Instructions of one worker run (start-up, warm-up and a fan-out of ``n``)."""
    worker = [str(SCRIPT), "--worker", impl, backend, str(n), "--mode", "plain"]
    python = [sys.executable, *worker] if gc_on else [sys.executable, "-c", _NO_GC, *worker]
    with tempfile.TemporaryDirectory() as tmp:
        cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={tmp}/out", *python]
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    found = re.search(r"Collected : (\d+)", proc.stderr)
    if proc.returncode != 0 or found is None:
        raise RuntimeError(f"{cmd} failed:\n{proc.stderr[-3000:]}")
    return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs=2, default=[100, 500])
    parser.add_argument("--loops", nargs="+", default=["asyncio", "trio"])
    parser.add_argument("--no-gc", action="store_true", help="collector off in the worker")
    args = parser.parse_args()
    small, large = args.sizes
    gc_on = not args.no_gc
    print(
        f"W2 instructions per subagent (callgrind, N={large} minus N={small}, "
        f"collector {'on' if gc_on else 'off'})"
    )
    for backend in args.loops:
        per: dict[str, float] = {}
        for impl in IMPLS:
            a = instructions(impl, backend, small, gc_on)
            b = instructions(impl, backend, large, gc_on)
            per[impl] = (b - a) / (large - small)
        print(
            f"  {backend:8} floor {per['floor'] / 1e3:8.0f} k | deepactors "
            f"{per['deepactors'] / 1e3:8.0f} k | ratio {per['deepactors'] / per['floor']:.2f}x"
        )


if __name__ == "__main__":
    main()
