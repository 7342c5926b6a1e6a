"""Which Python processes a test run starts, and the CPU and wall time each one costs.

Runs ``python -m pytest ARGS`` with a ``sitecustomize`` on ``PYTHONPATH`` that
makes every Python process of the run (pytest and its xdist workers, and every
``deepactors serve``/``run``, MCP server, crash child, server worker or Ray
worker they start, as long as it inherits the environment) append one JSON line
when it exits: its command line, its CPU seconds (its own, and its waited-for
children's), its wall seconds, whether it imported deepactors, and the test that
was running in the process that started it (``PYTEST_CURRENT_TEST`` is in the
environment a test's subprocess inherits). Then it sums the lines by command and
by test file, heaviest first::

    python bench/process_census.py [--out census.jsonl] -- tests/server -p no:cacheprovider

A process killed by a signal it does not handle (``SIGKILL``, a default
``SIGTERM``) writes no line of its own; its CPU still shows in its parent's
children's CPU when the parent waited for it, and the census counts the starts
it saw (a line at start too) that never ended, by command.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

# Stdlib only: it runs in every Python process of the run, whatever its environment.
_SITECUSTOMIZE = r"""
import atexit, json, os, resource, sys, time

_path = os.environ.get("DA_CENSUS_FILE")
if _path:
    _started = time.monotonic()
    _test = os.environ.get("PYTEST_CURRENT_TEST", "")

    def _write(record):
        line = (json.dumps(record) + "\n").encode()
        fd = os.open(_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)

    def _argv():
        argv = list(getattr(sys, "orig_argv", None) or sys.argv)
        return [str(a)[:200] for a in argv[:12]]

    _write({"event": "start", "pid": os.getpid(), "ppid": os.getppid(), "test": _test})

    @atexit.register
    def _census_exit():
        own = resource.getrusage(resource.RUSAGE_SELF)
        kids = resource.getrusage(resource.RUSAGE_CHILDREN)
        _write({
            "event": "exit",
            "pid": os.getpid(),
            "ppid": os.getppid(),
            "argv": _argv(),
            "test": _test,
            "cpu": own.ru_utime + own.ru_stime,
            "children_cpu": kids.ru_utime + kids.ru_stime,
            "wall": time.monotonic() - _started,
            "deepactors": "deepactors" in sys.modules,
        })
"""


def command_of(argv: list[str]) -> str:
    """A short name for a process's command line, to sum processes by."""
    args = list(argv[1:])
    while args and args[0].startswith("-") and args[0] not in ("-m", "-c"):
        # The interpreter's own options (-X importtime, -W error, -u...) before the command.
        del args[: 2 if args[0] in ("-X", "-W") else 1]
    if not args:
        return Path(argv[0]).name if argv else "?"
    if args[0] == "-m" and len(args) > 1:
        rest = [a for a in args[2:] if not a.startswith("-") and not a.isdigit()][:1]
        return " ".join(["-m", args[1], *rest])
    if args[0] == "-c":
        code = args[1] if len(args) > 1 else ""
        if "multiprocessing" in code:
            return "-c multiprocessing child"
        return "-c " + code.strip().splitlines()[0][:60] if code.strip() else "-c"
    head = Path(args[0]).name
    if head == "__main__.py":  # python -m package, as the process sees its argv
        rest = [a for a in args[1:] if not a.startswith("-")][:1]
        return " ".join([Path(args[0]).parent.name, *rest])
    return head


def file_of(test: str) -> str:
    """The test file of a ``PYTEST_CURRENT_TEST`` value (empty: not started by a test)."""
    return test.split("::", 1)[0] if test else "(no test)"


def summarise(lines: list[dict[str, Any]], top: int) -> str:
    """Sums of CPU and wall by command and by test file, heaviest first."""
    exits = [r for r in lines if r["event"] == "exit"]
    ended = {r["pid"] for r in exits}
    unended = [r for r in lines if r["event"] == "start" and r["pid"] not in ended]
    by_cmd: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0, 0.0, 0.0])
    by_file: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0, 0.0])
    for r in exits:
        name = command_of(r["argv"])
        if r["deepactors"]:
            name += " [deepactors]"
        row = by_cmd[name]
        row[0] += 1
        row[1] += r["cpu"]
        row[2] += r["children_cpu"]
        row[3] += r["wall"]
        if r["test"]:  # pytest's own processes carry no test
            frow = by_file[file_of(r["test"])]
            frow[0] += 1
            frow[1] += r["cpu"]
            frow[2] += r["wall"]
    out = [f"{len(exits)} processes ended with a line, {len(unended)} started without one"]
    out.append(f"\n{'processes':>9} {'cpu s':>8} {'kids cpu':>9} {'wall s':>8}  command")
    for name, (n, cpu, kids, wall) in sorted(by_cmd.items(), key=lambda kv: -kv[1][1])[:top]:
        out.append(f"{int(n):>9} {cpu:>8.1f} {kids:>9.1f} {wall:>8.1f}  {name}")
    head = f"\n{'processes':>9} {'cpu s':>8} {'wall s':>8}"
    out.append(f"{head}  test file (the processes its tests started)")
    for name, (n, cpu, wall) in sorted(by_file.items(), key=lambda kv: -kv[1][1])[:top]:
        out.append(f"{int(n):>9} {cpu:>8.1f} {wall:>8.1f}  {name}")
    missing = collections.Counter(file_of(r["test"]) for r in unended)
    if missing:
        out.append("\nstarted, no line at exit (killed), by test file:")
        for name, n in missing.most_common(top):
            out.append(f"{n:>9}  {name}")
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="keep the JSON lines here (default: a temporary file)")
    parser.add_argument("--top", type=int, default=25, help="rows per table")
    parser.add_argument("--summarise", metavar="JSONL", help="only sum an earlier run's lines")
    parser.add_argument("pytest_args", nargs="*", help="arguments to pytest (after --)")
    args = parser.parse_args()
    if args.summarise:
        lines = [json.loads(x) for x in Path(args.summarise).read_text().splitlines() if x]
        print(summarise(lines, args.top))
        return 0
    with tempfile.TemporaryDirectory(prefix="census-") as site:
        Path(site, "sitecustomize.py").write_text(_SITECUSTOMIZE)
        out = Path(args.out) if args.out else Path(site, "census.jsonl")
        out.unlink(missing_ok=True)
        env = dict(os.environ)
        path = env.get("PYTHONPATH")
        env["PYTHONPATH"] = site + (os.pathsep + path if path else os.pathsep + os.getcwd())
        env["DA_CENSUS_FILE"] = str(out.resolve())
        status = subprocess.call([sys.executable, "-m", "pytest", *args.pytest_args], env=env)
        lines = [json.loads(x) for x in out.read_text().splitlines() if x]
        print(summarise(lines, args.top))
    return status


if __name__ == "__main__":
    sys.exit(main())
