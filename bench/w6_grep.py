"""W6: grep over files in agent state, beside the floor of a plain per-line search.

The backend greps ``--mb`` MiB of text (``--files`` files of 80-character lines)
with a few patterns: a rare literal, a common literal (every tenth line), a
regex, and the catastrophic ``(a+)+$`` over one line of 50,000 ``a``. The
deepactors figure is ``StateBackend.grep`` (RE2, in a worker thread); the floor
is what the backend did before: Python's ``re`` searching line by line, called
directly (no backend, no thread). Printed per pattern: median wall and CPU of
``--reps`` runs (whole process, threads included) and the worst lateness of a
5 ms timer during the runs. The catastrophic pattern is given to the floor only
on a 26-character line (every further character doubles its time), and is
marked so.

Figures are indicative: the machine may be shared.

    python bench/w6_grep.py [--mb 8] [--files 20] [--reps 3] [--loops asyncio trio]
"""

from __future__ import annotations

import argparse
import re
import statistics

import anyio
from _common import Measured, measure

from deepactors.backends import StateBackend
from deepactors.state import State, default_channels

PATTERNS = {
    "rare literal": "needle-7f3a",
    "common literal": "every-tenth",
    "regex": r"def \w+\(\w*\)",
    "(a+)+$": "(a+)+$",
}


def corpus(mb: float, files: int) -> dict[str, str]:
    lines_per_file = int(mb * 1024 * 1024 / 81 / files)
    out: dict[str, str] = {}
    for f in range(files):
        lines = []
        for n in range(lines_per_file):
            if n % 10 == 0:
                body = f"def fn{n}(x) every-tenth line {n}"
            else:
                body = f"plain text line {n} of file {f}"
            lines.append(body.ljust(80, "."))
        if f == files // 2:
            lines[lines_per_file // 2] = "needle-7f3a".ljust(80, ".")
        out[f"/src/f{f}.txt"] = "\n".join(lines) + "\n"
    out["/long.txt"] = "a" * 50_000 + "!\n"
    return out


def floor_grep(files: dict[str, str], pattern: str) -> int:
    """Python's re, line by line (lines split as the backends split them)."""
    regex = re.compile(pattern)
    found = 0
    for text in files.values():
        lines = text.split("\n")
        if lines[-1] == "":
            lines.pop()
        found += sum(1 for line in lines if regex.search(line.removesuffix("\r")))
    return found


async def run(loop_name: str, mb: float, n_files: int, reps: int) -> None:
    files = corpus(mb, n_files)
    state = State(default_channels())
    backend = StateBackend().bind(state)
    for path, content in files.items():
        await backend.write(path, content)
    print(f"\n{loop_name}: {mb:g} MiB in {n_files} files + a 50,000-char line, {reps} reps")
    print(f"{'pattern':16} {'':11} {'wall s':>8} {'cpu s':>8} {'late ms':>8} {'lines':>6}")
    for name, pattern in PATTERNS.items():
        for side in ("deepactors", "floor"):
            runs: list[Measured] = []
            for _ in range(reps):
                if side == "deepactors":

                    async def work(p: str = pattern) -> int:
                        result = await backend.grep(p, max_matches=10**9)
                        return len(result.matches)

                else:
                    floor_files = files
                    if name == "(a+)+$":  # 50,000 chars would never finish
                        floor_files = {"/short.txt": "a" * 25 + "!\n"}

                    async def work(p: str = pattern, fs: dict[str, str] = floor_files) -> int:
                        return floor_grep(fs, p)

                runs.append(await measure(work))
            wall = statistics.median(r.wall for r in runs)
            cpu = statistics.median(r.cpu for r in runs)
            late = statistics.median(r.timer_late for r in runs) * 1000
            note = " (26 chars)" if side == "floor" and name == "(a+)+$" else ""
            print(f"{name:16} {side:11} {wall:8.3f} {cpu:8.3f} {late:8.1f} {runs[0].value:6}{note}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=float, default=8)
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--loops", nargs="+", default=["asyncio", "trio"])
    args = parser.parse_args()
    for loop_name in args.loops:
        anyio.run(run, loop_name, args.mb, args.files, args.reps, backend=loop_name)


if __name__ == "__main__":
    main()
