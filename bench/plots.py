"""The benchmarks page's plots and tables, from the benchmarks' JSON output.

    python bench/plots.py [--results bench/results] [--out docs/img]

Reads ``w1.json`` and ``w2.json`` (written by ``bench/w1_agent_loop.py --json`` and
``bench/w2_fanout.py --json``) and writes, for docs/benchmarks.md:

- ``docs/img/bench-w2-wall.png``: W2 wall time over the critical path against N;
- ``docs/img/bench-w2-gc.png``: the longest garbage-collector pause against N;
- ``docs/img/bench-w2-timer.png``: how late a 5 ms timer fired, against N;
- ``docs/img/bench-w2-cpu.png``: CPU per subagent against N;
- ``docs/img/bench-w1-cpu.png``: W1 CPU per model turn;
- ``bench/results/w1.md`` and ``bench/results/w2.md``: the same figures as tables,
  which the page includes.

Every point is the median of the runs, and every bar or band their whole range
(the fastest to the slowest run): a shared machine's runs spread by 10-40%, and the
best run is not the figure to quote.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only, no display

import matplotlib.pyplot as plt

HERE = Path(__file__).parent
LOOPS = ("asyncio", "trio")
W2_IMPLS = {
    "floor": ("framework-free floor", "#7f7f7f", "s"),
    "deepactors": ("deepactors (as it comes: paced)", "#3f51b5", "o"),
    "defer_gc": ("deepactors, defer_gc=True", "#e67e22", "^"),
    "unpaced": ("deepactors, pacing=None", "#c0392b", "v"),
    "traced": ("deepactors, traced", "#27ae60", "D"),
}


def spread(values: Sequence[float]) -> tuple[float, float, float]:
    """The median, smallest and largest of ``values``."""
    return statistics.median(values), min(values), max(values)


def machine_line(data: dict[str, Any]) -> str:
    load = data.get("loadavg_at_end") or []
    load_text = f", load {load[0]:.1f} at the end" if load else ""
    return (
        f"{data['date'][:10]}, {data['system']}, {data['cpus']} cores (shared), "
        f"{data['implementation']} {data['python']}{load_text}"
    )


# -- W2 -----------------------------------------------------------------------------------


def w2_series(data: dict[str, Any], loop: str, impl: str, metric: str) -> dict[int, list[float]]:
    """Per N, the metric of every run of one implementation on one loop."""
    scale = {"wall": 1 / data["critical_path"], "cpu": None}
    out: dict[int, list[float]] = {}
    for row in data["results"]:
        if row["loop"] != loop or row["impl"] != impl:
            continue
        n = row["n"]
        values = []
        for run in row["runs"]:
            if metric == "wall":
                values.append(run["wall"] * scale["wall"])
            elif metric == "cpu":
                values.append(run["cpu"] / n * 1000)
            elif metric in ("gc_longest", "timer_late"):
                values.append(run[metric] * 1000)
            elif metric == "rss":
                values.append(run["rss_mb"] * 1024 / n)
            else:
                raise ValueError(metric)
        out[n] = values
    return dict(sorted(out.items()))


def w2_impls(data: dict[str, Any]) -> list[str]:
    present = {row["impl"] for row in data["results"]}
    return [impl for impl in W2_IMPLS if impl in present]


def plot_w2(data: dict[str, Any], metric: str, ylabel: str, title: str, path: Path) -> None:
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2), sharey=True)
    for ax, loop in zip(axes, LOOPS, strict=True):
        for impl in w2_impls(data):
            series = w2_series(data, loop, impl, metric)
            if not series:
                continue
            ns = list(series)
            med, lo, hi = zip(*(spread(v) for v in series.values()), strict=True)
            label, color, marker = W2_IMPLS[impl]
            ax.plot(ns, med, marker=marker, color=color, label=label)
            ax.fill_between(ns, lo, hi, color=color, alpha=0.18, linewidth=0)
        ax.set_xscale("log")
        if metric != "cpu":
            ax.set_yscale("log")
        ax.set_title(loop)
        ax.set_xlabel("subagents (N)")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel(ylabel)
    axes[0].legend(fontsize=8)
    fig.suptitle(title, fontsize=11)
    fig.text(
        0.5,
        0.005,
        f"Lines: median of {data['repeats']} fresh-process runs; bands: fastest to slowest run. "
        f"{machine_line(data)}.",
        ha="center",
        fontsize=7.5,
    )
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def w2_table(data: dict[str, Any]) -> str:
    metrics = (
        ("wall", "wall / critical path", "{:.2f}x"),
        ("cpu", "CPU ms per subagent", "{:.3f}"),
        ("gc_longest", "longest GC pause, ms", "{:.0f}"),
        ("timer_late", "5 ms timer late, ms", "{:.0f}"),
        ("rss", "RSS KiB per subagent", "{:.1f}"),
    )
    impls = w2_impls(data)
    lines = [
        f"*Medians of {data['repeats']} fresh-process runs, [fastest, slowest] in brackets; "
        f"{machine_line(data)}.*",
        "",
        "| loop, N | row | " + " | ".join(m[1] for m in metrics) + " |",
        "|---|---|" + "---|" * len(metrics),
    ]
    for loop in LOOPS:
        sizes = sorted({r["n"] for r in data["results"] if r["loop"] == loop})
        for n in sizes:
            for impl in impls:
                cells = []
                for metric, _, fmt in metrics:
                    values = w2_series(data, loop, impl, metric).get(n)
                    if values is None:
                        cells.append("")
                        continue
                    med, lo, hi = spread(values)
                    cells.append(f"{fmt.format(med)} [{fmt.format(lo)}, {fmt.format(hi)}]")
                lines.append(f"| {loop}, {n:,} | {impl} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


# -- W1 -----------------------------------------------------------------------------------


def plot_w1(data: dict[str, Any], path: Path) -> None:
    groups = sorted(
        {(r["calls"], r["loop"], r["turns"]) for r in data["results"]},
        key=lambda g: (g[0], LOOPS.index(g[1]), g[2]),
    )
    fig, ax = plt.subplots(figsize=(10, 4.2))
    width = 0.38
    for offset, impl, color in (
        (-width / 2, "floor", "#7f7f7f"),
        (width / 2, "deepactors", "#3f51b5"),
    ):
        meds, los, his = [], [], []
        for calls, loop, turns in groups:
            row = next(
                r
                for r in data["results"]
                if (r["calls"], r["loop"], r["turns"], r["impl"]) == (calls, loop, turns, impl)
            )
            med, lo, hi = spread(row["ms_per_turn"])
            meds.append(med)
            los.append(med - lo)
            his.append(hi - med)
        xs = [i + offset for i in range(len(groups))]
        label = "framework-free floor" if impl == "floor" else "deepactors (default middleware)"
        ax.bar(xs, meds, width, yerr=[los, his], capsize=3, color=color, label=label)
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels(
        [
            f"{loop}\n{calls} call{'s' if calls > 1 else ''}/turn\n{turns:,} turns"
            for calls, loop, turns in groups
        ],
        fontsize=8,
    )
    ax.set_ylabel("CPU ms per model turn")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    fig.suptitle(
        "W1: CPU per model turn of the agent loop (FunctionModel, no latency)", fontsize=11
    )
    fig.text(
        0.5,
        0.005,
        f"Bars: median of {data['repeats']} runs in one process (after a warm-up run); "
        f"whiskers: fastest to slowest. {machine_line(data)}.",
        ha="center",
        fontsize=7.5,
    )
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def w1_table(data: dict[str, Any]) -> str:
    lines = [
        f"*Medians of {data['repeats']} runs, [fastest, slowest] in brackets; "
        f"{machine_line(data)}.*",
        "",
        "| loop, tool calls per turn | turns | floor ms/turn | deepactors ms/turn "
        "| ratio of medians |",
        "|---|---|---|---|---|",
    ]
    keys = sorted(
        {(r["calls"], r["loop"], r["turns"]) for r in data["results"]},
        key=lambda g: (g[0], LOOPS.index(g[1]), g[2]),
    )
    for calls, loop, turns in keys:
        cells = {}
        for r in data["results"]:
            if (r["calls"], r["loop"], r["turns"]) == (calls, loop, turns):
                cells[r["impl"]] = spread(r["ms_per_turn"])
        (fm, flo, fhi), (dm, dlo, dhi) = cells["floor"], cells["deepactors"]
        lines.append(
            f"| {loop}, {calls} | {turns:,} | {fm:.3f} [{flo:.3f}, {fhi:.3f}] | "
            f"{dm:.3f} [{dlo:.3f}, {dhi:.3f}] | {dm / fm:.2f}x |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=HERE / "results")
    parser.add_argument("--out", type=Path, default=HERE.parent / "docs" / "img")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    w2_path = args.results / "w2.json"
    if w2_path.exists():
        w2 = json.loads(w2_path.read_text())
        figures = (
            (
                "wall",
                "wall time / critical path (250 ms)",
                "W2: N subagents, 3 model turns each at 50 ms: wall time",
                "bench-w2-wall.png",
            ),
            (
                "gc_longest",
                "longest GC pause (ms)",
                "W2: the longest pause of CPython's cyclic collector",
                "bench-w2-gc.png",
            ),
            (
                "timer_late",
                "5 ms timer, worst lateness (ms)",
                "W2: how late a 5 ms timer in the same loop fired",
                "bench-w2-timer.png",
            ),
            (
                "cpu",
                "CPU ms per subagent (whole process)",
                "W2: CPU per subagent",
                "bench-w2-cpu.png",
            ),
        )
        for metric, ylabel, title, name in figures:
            plot_w2(w2, metric, ylabel, title, args.out / name)
            written.append(args.out / name)
        (args.results / "w2.md").write_text(w2_table(w2))
        written.append(args.results / "w2.md")
    w1_path = args.results / "w1.json"
    if w1_path.exists():
        w1 = json.loads(w1_path.read_text())
        plot_w1(w1, args.out / "bench-w1-cpu.png")
        (args.results / "w1.md").write_text(w1_table(w1))
        written += [args.out / "bench-w1-cpu.png", args.results / "w1.md"]
    if not written:
        raise SystemExit(f"no w1.json or w2.json in {args.results}")
    for path in written:
        print(path)


if __name__ == "__main__":
    main()
