"""The order CI's two xdist workers take the suite's files in (``-n 2 --dist loadfile``).

pytest-xdist's ``loadfile`` hands out one file at a time, by default the files
with the most tests first. On this suite that sent the heaviest files last: the
multi-process ones (Ray, several ``deepactors serve`` processes, PostgreSQL) have
few tests of many seconds each, so one worker was left with a minute of them
while the other had finished. It also spread ``tests/placement``'s files over
both workers between other packages' files, and each time a worker came back
to the package its package-scoped Ray cluster (``tests/placement/conftest.py``)
started again: ~10 s a start, once per file instead of once per worker.

:class:`HeaviestFirst` keeps ``loadfile``'s rule (a file's tests on one worker:
module fixtures start once; a sandbox test's two loops never count each other's
processes) and changes two things:

- the packages in :data:`ONE_UNIT` are one unit of work each, so one worker runs
  them back to back under one package fixture;
- units go out heaviest first, by the seconds in ``tests/scope_seconds.json``
  (a unit it does not name weighs its number of tests times
  :data:`SECONDS_PER_UNKNOWN_TEST`), so the last units handed out are the small
  ones and the two workers end together (longest-processing-time-first).

The summary at the end of a run names the units that took the most worker
seconds, and ``--scope-seconds-out=PATH`` writes all of them as JSON in the
form of ``tests/scope_seconds.json``, to refresh it when the suite's weights move
(CI writes it beside its logs). Only the order matters, not the figures' scale:
the first table was put together from past CI logs' slowest tests and from runs
of parts of the suite on a loaded machine (halved), not from one quiet full run.
Only the order changes: every test still runs, each file on one worker.
"""

from __future__ import annotations

import json
from collections import OrderedDict, defaultdict
from pathlib import Path
from typing import Any

import pytest
from xdist.scheduler import LoadFileScheduling
from xdist.workermanage import WorkerController

SCOPE_SECONDS = Path(__file__).with_name("scope_seconds.json")

# Packages whose files share a package-scoped fixture worth keeping up between them.
ONE_UNIT = ("tests/placement/",)

# Most files the table does not name are quick in-process tests.
SECONDS_PER_UNKNOWN_TEST = 0.05

# How many units the end-of-run summary names.
SUMMARY_UNITS = 15


def unit_of(nodeid: str) -> str:
    """The unit of work a test belongs to: its package in :data:`ONE_UNIT`, else its file."""
    for package in ONE_UNIT:
        if nodeid.startswith(package):
            return package
    return nodeid.split("::", 1)[0]


def load_weights(path: Path = SCOPE_SECONDS) -> dict[str, float]:
    """The seconds each unit took in a past run (an empty table if there is no file)."""
    try:
        table = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    return {str(unit): float(seconds) for unit, seconds in table.items()}


class HeaviestFirst(LoadFileScheduling):
    """``loadfile`` with :data:`ONE_UNIT`'s packages as one unit, heaviest units first."""

    def __init__(self, config: pytest.Config, log: Any = None) -> None:
        super().__init__(config, log)
        self._weights = load_weights()
        self._ordered = False

    def _split_scope(self, nodeid: str) -> str:
        return unit_of(nodeid)

    def _weight(self, unit: str) -> float:
        known = self._weights.get(unit)
        if known is not None:
            return known
        return len(self.workqueue[unit]) * SECONDS_PER_UNKNOWN_TEST

    def _assign_work_unit(self, node: WorkerController) -> None:
        # The queue is built in schedule() (by xdist, in its own order) and first
        # drawn from here: order it once, before the first unit goes out.
        if not self._ordered:
            heaviest_first = sorted(self.workqueue, key=self._weight, reverse=True)
            self.workqueue = OrderedDict((unit, self.workqueue[unit]) for unit in heaviest_first)
            self._ordered = True
        super()._assign_work_unit(node)


class UnitSeconds:
    """Adds up each unit's worker seconds (setup, call, teardown) as reports arrive."""

    def __init__(self, out: str | None) -> None:
        self.seconds: defaultdict[str, float] = defaultdict(float)
        self.out = out

    @pytest.hookimpl
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> HeaviestFirst | None:
        if config.getvalue("dist") != "loadfile":
            return None
        return HeaviestFirst(config, log)

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.seconds[unit_of(report.nodeid)] += report.duration

    @pytest.hookimpl
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.seconds:
            return
        ranked = sorted(self.seconds.items(), key=lambda item: item[1], reverse=True)
        terminalreporter.write_sep("=", f"heaviest {SUMMARY_UNITS} units of work (worker seconds)")
        for unit, seconds in ranked[:SUMMARY_UNITS]:
            terminalreporter.write_line(f"{seconds:8.1f}s {unit}")
        if self.out:
            table = {unit: round(seconds, 1) for unit, seconds in ranked}
            Path(self.out).write_text(json.dumps(table, indent=1) + "\n")
            terminalreporter.write_line(f"all {len(table)} units written to {self.out}")


def register(config: pytest.Config) -> None:
    """Order the workers' units and count their seconds, in an xdist run's controller."""
    if hasattr(config, "workerinput") or config.getoption("dist", "no") == "no":
        return
    out = config.getoption("scope_seconds_out")
    config.pluginmanager.register(UnitSeconds(out), "deepactors-unit-seconds")
