"""A/B runner: one bench script, run alternately from a base commit and from this tree.

    python bench/ab.py --base 1423e1d [--new HEAD] [--reps 5] [--keep] \\
        [--metric NAME=REGEX ...] -- w1_agent_loop.py --turns 200 3000

Why: this machine's speed drifts (up to 2x hour to hour, 40% between 30 ms
slices), so a figure measured now cannot be compared with one measured an hour
ago. Each repetition runs the script once per side, back to back, the side that
goes first alternating (B N, N B, B N, ...), and the figure that counts is the
*paired ratio* new/base of one repetition: drift slower than a run cancels out.

The base side is a detached git worktree of ``--base`` under the temp folder
(one made by this run is removed at the end unless ``--keep``; one already
there at that commit, kept by an earlier run, is reused and left). The new
side is this working tree, or with ``--new REV`` a worktree of that commit (so
edits in progress elsewhere in the tree are not measured).
Every run is a fresh process whose PYTHONPATH is its tree's root, running that
tree's own copy of the script; before the first run, a tiny subprocess checks
that ``import deepactors`` resolves inside each tree, and the runner stops if not.

Measured per run: the whole process's CPU (user + system, from
``getrusage(RUSAGE_CHILDREN)`` deltas, so any subprocess the script waits for is
included) and its wall time; and with ``--metric NAME=REGEX`` (repeatable), one
number from the script's stdout: the regex's first group at its first match
(``re.M``; put ``(?s)`` first to let ``.`` cross lines). Without ``--metric``,
W1, W2 and W7 get their figures by default (:func:`preset`: each row's floor
and deepactors figures, at the sizes and loops the arguments ask for).
Reported per metric: the median of each side, and the median and quartiles of
the paired ratios.
The script's own floor, measured in the same process, is the drift check: its
ratio between trees should be ~1.0x.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def git(*args: str, cwd: Path = REPO) -> str:
    out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        sys.exit(f"ab: git {' '.join(args)} failed:\n{out.stderr}")
    return out.stdout.strip()


def worktree(rev: str) -> tuple[Path, bool]:
    """A detached worktree of ``rev`` under the temp folder; (path, made by this call)."""
    sha = git("rev-parse", "--verify", f"{rev}^{{commit}}")
    path = Path(tempfile.gettempdir()) / f"deepactors-ab-{sha[:12]}"
    if (path / ".git").exists():
        if git("rev-parse", "HEAD", cwd=path) != sha:
            sys.exit(f"ab: {path} exists but is not at {sha}; remove it")
        return path, False
    git("worktree", "prune")
    git("worktree", "add", "--detach", str(path), sha)
    return path, True


def check_import(root: Path) -> None:
    """Fail loudly unless ``import deepactors`` resolves inside ``root``."""
    out = subprocess.run(
        [sys.executable, "-c", "import deepactors; print(deepactors.__file__)"],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        check=False,
    )
    where = Path(out.stdout.strip() or "?").resolve()
    if out.returncode != 0 or not where.is_relative_to(root.resolve() / "deepactors"):
        sys.exit(f"ab: in {root}, deepactors resolves to {where}\n{out.stderr}")
    print(f"ab: {root} -> {where}", file=sys.stderr)


def run_once(
    root: Path, script: str, args: list[str], timeout: float | None
) -> tuple[dict[str, float], str]:
    """One fresh-process run of ``root/bench/script``: its CPU and wall seconds, its stdout."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, str(root / "bench" / script), *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.exit(f"ab: {script} in {root} failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"process CPU s": cpu, "wall s": wall}, proc.stdout


def parse_metrics(specs: list[str]) -> list[tuple[str, re.Pattern[str]]]:
    """``NAME=REGEX`` (NAME: words, spaces, ``./%-``; no ``=``), or a bare REGEX as its own name."""
    metrics = []
    for spec in specs:
        name, sep, pattern = spec.partition("=")
        if not sep or not re.fullmatch(r"[\w ./%-]+", name):
            name, pattern = spec, spec
        metrics.append((name, re.compile(pattern, re.M)))
    return metrics


def preset(script: str, args: list[str]) -> list[str]:
    """The default metrics of W1, W2 and W7, for the rows that ``args`` make them print."""

    def opt(name: str, default: list[str]) -> list[str]:
        if name not in args:
            return default
        rest = args[args.index(name) + 1 :]
        return rest[: next((i for i, a in enumerate(rest) if a[:1] == "-"), None)]

    num, plain, x = r"([\d.]+)", r"[\d.]+", r"\S+\s+"  # a figure, the same not taken, a skip
    specs = []
    if script.startswith("w1_"):
        turns = opt("--turns", ["200", "3000"])
        for loop in ("asyncio", "trio"):
            for k in turns:
                row = rf"^{loop}\s+{k}\s+1\s+"
                specs += [f"W1 {loop} K{k} floor ms/turn={row}{num}"]
                specs += [f"W1 {loop} K{k} ours ms/turn={row}{x}{num}"]
                specs += [f"W1 {loop} K{k} ours/floor={row}{x}{x}{num}x"]
            k = max(turns, key=int)
            specs += [f"W1 {loop} K{k} 3 calls ours ms/turn=^{loop}\\s+{k}\\s+3\\s+{x}{num}"]
    elif script.startswith("w2_"):
        for loop in opt("--loops", ["asyncio", "trio"]):
            for n in opt("--sizes", ["100", "1000", "3000", "10000"]):
                for impl in ("floor", "deepactors"):
                    row = rf"(?s){loop}, N={n}:.*?{impl}\s+wall"
                    # (The wall's range in brackets came later: optional, so any commit's
                    # copy of the script is read.)
                    wall = rf"{row}\s+{x}s(?: \([^)]*\))? =\s+{num}x path"
                    specs += [f"W2 {loop} N{n} {impl} wall/path={wall}"]
                    specs += [f"W2 {loop} N{n} {impl} CPU ms/sub={row}.*?CPU\\s+{num} ms/sub"]
    elif script.startswith("w7_"):
        client = opt("--client", ["both"])[0]
        sides = [*(("floor HTTP", "raw HTTP") if client != "sdk" else ())]
        sides += [*(("SDK HTTP",) if client != "raw" else ()), "in-process"]
        for side in sides:
            row = rf"^  {side}\s+first event p50\s+{num} ms p99\s+{num} ms.*?\| CPU\s+{num}"
            for i, what in enumerate(("p50 first ms", "p99 first ms", "CPU ms/run")):
                specs += [f"W7 {side} {what}={row.replace(num, plain, i)}"]
    return specs


def extract(stdout: str, metrics: list[tuple[str, re.Pattern[str]]]) -> dict[str, float]:
    got = {}
    for name, pattern in metrics:
        m = pattern.search(stdout)
        if m is None:
            sys.exit(f"ab: metric {name!r} ({pattern.pattern}) not in the output:\n{stdout}")
        got[name] = float(m.group(1) if m.groups() else m.group(0))
    return got


def quartiles(xs: list[float]) -> tuple[float, float, float]:
    if len(xs) < 2:
        return xs[0], xs[0], xs[0]
    q1, q2, q3 = statistics.quantiles(xs, n=4, method="inclusive")
    return q1, q2, q3


def report(samples: dict[str, list[dict[str, float]]]) -> None:
    names = list(samples["base"][0])
    width = max(len(n) for n in names)
    print(f"{'metric':{width}} {'base':>10} {'new':>10}  new/base paired: median [q1 q3]")
    for name in names:
        base = [s[name] for s in samples["base"]]
        new = [s[name] for s in samples["new"]]
        ratios = [n / b if b else float("nan") for n, b in zip(new, base, strict=True)]
        q1, q2, q3 = quartiles(ratios)
        print(
            f"{name:{width}} {statistics.median(base):10.4g} {statistics.median(new):10.4g}"
            f"  {q2:6.3f}x [{q1:.3f} {q3:.3f}]"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--base", required=True, help="the commit to compare against")
    parser.add_argument("--new", help="a commit for the new side (default: this working tree)")
    parser.add_argument("--reps", type=int, default=5, help="paired repetitions")
    parser.add_argument("--keep", action="store_true", help="keep the worktree(s) made")
    parser.add_argument("--metric", action="append", default=[], help="NAME=REGEX, repeatable")
    parser.add_argument("--timeout", type=float, help="seconds per run")
    parser.add_argument("--json", type=Path, help="write every sample here")
    parser.add_argument("-v", "--verbose", action="store_true", help="echo every run's stdout")
    parser.add_argument("script", help="a script in bench/, e.g. w1_agent_loop.py")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="the script's arguments, after --")
    opts = parser.parse_args()
    args = opts.args[1:] if opts.args[:1] == ["--"] else opts.args
    metrics = parse_metrics(opts.metric or preset(opts.script, args))
    made: list[Path] = []
    try:
        base, new_base = worktree(opts.base)
        made += [base] if new_base else []
        roots = {"base": base, "new": REPO}
        if opts.new:
            roots["new"], new_made = worktree(opts.new)
            made += [roots["new"]] if new_made else []
        for side, root in roots.items():
            if not (root / "bench" / opts.script).is_file():
                sys.exit(f"ab: no bench/{opts.script} in the {side} tree {root}")
            subprocess.run([sys.executable, "-m", "compileall", "-q", str(root / "deepactors")])
            check_import(root)
        print(
            f"ab: {opts.script} {' '.join(args)}; base {opts.base}; "
            f"new {opts.new or 'working tree'}; load {os.getloadavg()[0]:.2f}",
            file=sys.stderr,
        )
        samples: dict[str, list[dict[str, float]]] = {"base": [], "new": []}
        for rep in range(opts.reps):
            order = ("base", "new") if rep % 2 == 0 else ("new", "base")
            for side in order:
                figures, stdout = run_once(roots[side], opts.script, args, opts.timeout)
                figures.update(extract(stdout, metrics))
                samples[side].append(figures)
                shown = ", ".join(f"{k} {v:.4g}" for k, v in figures.items())
                print(f"ab: rep {rep + 1} {side:4}: {shown}", file=sys.stderr)
                if opts.verbose:
                    print(stdout, file=sys.stderr)
        print(f"ab: done; load {os.getloadavg()[0]:.2f}", file=sys.stderr)
        report(samples)
        if opts.json:
            opts.json.write_text(json.dumps(samples, indent=1))
    finally:
        for path in made if not opts.keep else []:
            git("worktree", "remove", "--force", str(path))


if __name__ == "__main__":
    main()
