"""Issue 24: two processes own one thread in turns, on PostgreSQL and on SQLite.

One process loops runs on thread ``t`` while the other rolls it back, updates
its state and deletes it, 200 times (``thread_owner_worker.py``), on asyncio
and on trio, with a checkpointer that waits for the thread and with one that
refuses (``ThreadBusy``). Every operation happens whole and in order, or is
refused with ``ThreadBusy``; no record is written without the lease; no turn
is lost.

The workers' checkpointer is the real one behind a forwarding proxy that logs
every lease taken and given back (on the machine-wide monotonic clock, with
the lease's token and the head it reported) and every put and delete. The test
merges both logs and replays them: the leases never overlap, every write falls
inside a lease its own process holds and none is refused as stale, and each
lease finds the head the previous holder left (its head, plus the records it
put, or 0 after its delete): a write or a turn lost would show as a head that
does not follow. In the runner, the model also compares the history it is
shown with the thread's saved history (a run on a stale copy loses a turn);
the operator reads back what each rollback and update left.

The last test covers a lost turn the operator above cannot reach: a delete
numbers a thread from 1 again, so its head can come back, and only the lease's
origin (when the thread's first record was stored) tells the new thread from
the old.
"""

from __future__ import annotations

import itertools
import json
import select
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import anyio
import pytest

from deepactors import create_deep_agent, open_runtime
from deepactors.models import FunctionModel, ModelRequest
from deepactors.persistence import SqliteCheckpointer, open_checkpointer
from tests.pgserver import postgres_bindir

WORKER = Path(__file__).with_name("thread_owner_worker.py")
ROUNDS = 200
SEED = 24
TIMEOUT = 180  # seconds per case, far above what one takes


@dataclass
class Lease:
    """One holding of thread ``t``, as the logs tell it."""

    take: dict[str, Any]
    release: dict[str, Any] | None = None
    writes: list[dict[str, Any]] = field(default_factory=list)

    @property
    def label(self) -> str:
        return str(self.take["label"])

    def head_left(self) -> int:
        """The head this holding left: its head, plus its puts, 0 after a delete."""
        head = int(self.take["head"])
        for write in self.writes:
            if write["error"] is None:
                head = 0 if write["ev"] == "delete" else head + write["n"]
        return head


def read_log(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


class Workers:
    """The runner and the operator processes, kept for the module's cases (each
    start costs seconds); started again after a case that failed."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.procs: dict[str, subprocess.Popen[str]] = {}

    def process(self, role: str) -> subprocess.Popen[str]:
        proc = self.procs.get(role)
        if proc is None or proc.poll() is not None:
            with (self.folder / f"{role}.err").open("a") as err:
                proc = self.procs[role] = subprocess.Popen(
                    [sys.executable, str(WORKER), role],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=err,
                    text=True,
                )
        return proc

    def stderr(self, role: str) -> str:
        return (self.folder / f"{role}.err").read_text()

    def close(self) -> None:
        for proc in self.procs.values():
            proc.kill()
            proc.communicate()  # reaped, its pipes closed
        self.procs.clear()


def _line(stdout: IO[str], deadline: float) -> str:
    """The process's next line, or "" if none came by ``deadline``."""
    ready, _, _ = select.select([stdout], [], [], max(0.0, deadline - time.monotonic()))
    return stdout.readline().strip() if ready else ""


def _send(proc: subprocess.Popen[str], line: str) -> None:
    assert proc.stdin is not None
    proc.stdin.write(line + "\n")
    proc.stdin.flush()


def run_both(
    workers: Workers, db: str, loop: str, when_busy: str, tmp_path: Path
) -> tuple[list[Any], list[Any]]:
    """Give the runner and the operator a case, let them go at once, wait for both."""
    stop = tmp_path / "stop"
    logs = {role: tmp_path / f"{role}.jsonl" for role in ("runner", "operator")}
    procs = {role: workers.process(role) for role in logs}
    deadline = time.monotonic() + TIMEOUT
    try:
        for role, proc in procs.items():
            _send(proc, json.dumps([db, loop, when_busy, str(logs[role]), str(stop), ROUNDS, SEED]))
        for role, proc in procs.items():
            assert proc.stdout is not None
            assert _line(proc.stdout, deadline) == "ready", workers.stderr(role)
        for proc in procs.values():  # both at once
            _send(proc, "go")
        for role, proc in procs.items():
            assert proc.stdout is not None
            assert _line(proc.stdout, deadline) == "done", workers.stderr(role)
    except BaseException:
        workers.close()  # the next case starts afresh
        raise
    return read_log(logs["runner"]), read_log(logs["operator"])


def leases_of(events: list[dict[str, Any]]) -> list[Lease]:
    """Both processes' holdings of thread ``t``, in the order they were taken.

    Also checks each holding's own story: given back by its process, and every
    write made while it was held, by its holder, inside the logged interval.
    """
    leases: list[Lease] = []
    open_by_pid: dict[int, Lease] = {}
    for event in events:  # one process's events are in its order
        if event.get("thread") != "t":
            continue
        pid = event["pid"]
        if event["ev"] == "take":
            assert pid not in open_by_pid, f"a lease taken twice by one process: {event}"
            open_by_pid[pid] = lease = Lease(take=event)
            leases.append(lease)
        elif event["ev"] == "release":
            lease = open_by_pid.pop(pid)
            assert event["owner"] == lease.take["owner"]
            lease.release = event
        elif event["ev"] in ("put", "delete"):
            held = open_by_pid.get(pid)
            # A write without the lease, or under another holding's token: stale.
            assert held is not None, f"a write without the lease: {event}"
            assert event["owner"] == held.take["owner"], f"a write under another lease: {event}"
            assert held.take["t"] <= event["t0"] <= event["t1"], event
            held.writes.append(event)
    assert not open_by_pid, "a lease never given back"
    leases.sort(key=lambda lease: lease.take["t"])
    return leases


def check(
    runner: list[dict[str, Any]], operator: list[dict[str, Any]], when_busy: str
) -> Counter[str]:
    """Every check of the module docstring; returns the counts it saw."""
    counts: Counter[str] = Counter()
    leases = leases_of(runner) + leases_of(operator)
    leases.sort(key=lambda lease: lease.take["t"])
    writes = [w for lease in leases for w in lease.writes]
    for lease in leases:
        assert lease.release is not None
        for write in lease.writes:
            assert write["t1"] <= lease.release["t"], f"a write after the lease: {write}"

    # Fencing: no write refused as stale (nor failed otherwise).
    counts["stale writes"] = sum(1 for w in writes if w["lost"])
    assert counts["stale writes"] == 0
    assert [w for w in writes if w["error"] is not None] == []

    # One holder at a time, and each finds the head the previous one left.
    for before, after in itertools.pairwise(leases):
        assert before.release is not None
        assert before.release["t"] <= after.take["t"], (
            f"leases overlap: {before.take} / {after.take}"
        )
        assert after.take["head"] == before.head_left(), (
            f"{after.label} found head {after.take['head']}, "
            f"{before.label} left {before.head_left()}"
        )
    counts["lease takes"] = len(leases)

    # Runs: each ended whole (or was refused), under one lease of its own.
    by_label: defaultdict[str, list[Lease]] = defaultdict(list)
    for lease in leases:
        by_label[lease.label].append(lease)
    runs = [e for e in runner if e["ev"] == "run"]
    outcomes = Counter(e["outcome"] for e in runs)
    allowed = {"ok", "busy"} if when_busy == "raise" else {"ok"}
    assert set(outcomes) <= allowed, [e for e in runs if e["outcome"] not in allowed]
    assert outcomes["ok"] > 0
    for run in runs:
        held = by_label[f"run-{run['i']}"]
        if run["outcome"] == "busy":
            assert held == [], f"a refused run took the thread: {run}"
            continue
        assert run["whole"], run
        (lease,) = held
        assert run["head_before"] == lease.take["head"]
        # Its user message and its answer; a tool call adds the call and its
        # result. (More when a rollback left a tool call unanswered: the run
        # answers it first.)
        stored = sum(w["n"] for w in lease.writes)
        assert stored >= (4 if run["i"] % 5 == 0 else 2), (run, lease.writes)
    counts["runs"] = outcomes["ok"]
    counts["runs refused"] = outcomes["busy"]

    # Operations: each ended whole (or was refused), under one lease of its own.
    ops = [e for e in operator if e["ev"] == "op"]
    assert {e["outcome"] for e in ops} <= {"ok", "busy"}, [e for e in ops if e["outcome"] != "ok"]
    if when_busy == "wait":
        assert all(e["outcome"] == "ok" for e in ops)
    for name, n_writes in (("rollback", None), ("update", 1), ("delete", 0)):
        done = [e for e in ops if e["op"] == name]
        assert len(done) == ROUNDS
        for k, op in enumerate(done):
            held = by_label[f"op-{k}-{name}"]
            if op["outcome"] == "busy":
                assert held == [], f"a refused {name} took the thread: {op}"
                continue
            (lease,) = held
            if name == "delete":
                assert [w["ev"] for w in lease.writes] == ["delete"]
            elif name == "update":
                assert [(w["ev"], w["n"]) for w in lease.writes] == [("put", n_writes)]
        counts[f"{name}s"] = sum(1 for e in done if e["outcome"] == "ok")
    for event in (e for e in operator if e["ev"] == "rolled_back"):
        # A marker when it goes back, nothing when it would not.
        lease = by_label[event["label"]][0]
        assert event["took"] == lease.take["head"]
        back = event["to"] < event["took"]
        assert event["head"] == event["took"] + back
        assert [w["n"] for w in lease.writes] == ([1] if back else [])
    counts["rollbacks into a taken-back range"] = sum(
        1 for e in operator if e["ev"] == "rolled_back" and e.get("into_taken_back")
    )
    refused = Counter(e["op"] for e in ops if e["outcome"] == "busy")
    counts["ops refused"] = refused.total() - refused["head"]
    counts["head reads refused (then retried)"] = refused["head"]
    counts["head reads"] = sum(1 for label in by_label if label.endswith("-head"))

    # No stale copy: every model call was shown the saved history; every
    # rollback and update read back as it returned.
    assert [e for e in runner + operator if e["ev"].startswith(("stale_", "bad_"))] == []
    # Both read the thread at the end without CheckpointCorrupt.
    assert {e["label"] for e in runner + operator if e["ev"] == "final"} == {"final"}
    assert sum(1 for e in runner + operator if e["ev"] == "final") == 2
    counts["final head"] = leases[-1].head_left()
    return counts


async def final_head(db: str) -> tuple[int, int]:
    """The thread's head and its live records, read afresh (CheckpointCorrupt if damaged)."""
    async with open_checkpointer(db) as saver, open_runtime() as rt:
        agent = create_deep_agent(FunctionModel(lambda r: "unused"), checkpointer=saver)
        h = rt.thread(agent, "t")
        await h.state()
        history = await h.history()
        records = await saver.read("t")
    return (records[-1].seq if records else 0), len(history)


@pytest.fixture(scope="module")
def workers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workers]:
    kept = Workers(tmp_path_factory.mktemp("thread-owner-workers"))
    try:
        yield kept
    finally:
        kept.close()


def run_case(workers: Workers, db: str, loop: str, when_busy: str, tmp_path: Path) -> None:
    runner, operator = run_both(workers, db, loop, when_busy, tmp_path)
    counts = check(runner, operator, when_busy)
    head, _ = anyio.run(final_head, db)
    assert head == counts["final head"]
    print(f"\n{loop} {when_busy}: {dict(counts)}")


needs_postgres = pytest.mark.skipif(
    postgres_bindir() is None, reason="PostgreSQL is not installed (no initdb found)"
)


@pytest.mark.slow
@pytest.mark.parametrize("when_busy", ["wait", "raise"])
@pytest.mark.parametrize("loop", ["asyncio", "trio"])
def test_two_processes_own_a_sqlite_thread_in_turns(
    workers: Workers, tmp_path: Path, loop: str, when_busy: str
) -> None:
    run_case(workers, str(tmp_path / "threads.db"), loop, when_busy, tmp_path)


@pytest.mark.slow
@needs_postgres
@pytest.mark.parametrize("when_busy", ["wait", "raise"])
@pytest.mark.parametrize("loop", ["asyncio", "trio"])
def test_two_processes_own_a_postgres_thread_in_turns(
    workers: Workers, postgres_dsn: str, tmp_path: Path, loop: str, when_busy: str
) -> None:
    run_case(workers, postgres_dsn, loop, when_busy, tmp_path)


async def test_a_run_after_another_owner_deleted_and_rewrote_the_thread_sees_its_history(
    tmp_path: Path,
) -> None:
    """Two owners of one thread (two runtimes, as two processes would be).

    The first one's run leaves the thread at head 2 and keeps its state in
    memory. The other deletes the thread and writes two records: the head is 2
    again, and the first one's next run must still be shown the saved history.
    The operator of the test above never writes two records between a delete
    and the runner's next turn, so it cannot reach this case.
    """
    seen: list[list[list[str]]] = []

    def answer(request: ModelRequest) -> str:
        seen.append([[m.role, m.text] for m in request.messages])
        return f"answer-{len(seen)}"

    async with (
        SqliteCheckpointer(tmp_path / "threads.db") as saver,
        open_runtime() as one,
        open_runtime() as other,
    ):
        agent = create_deep_agent(FunctionModel(answer), checkpointer=saver)
        mine, theirs = one.thread(agent, "t"), other.thread(agent, "t")
        await (await mine.start("first")).result()
        assert await mine.head() == 2
        await theirs.delete()
        for k in (1, 2):
            await theirs.update_state({"messages": [{"role": "user", "content": f"upd-{k}"}]})
        assert await theirs.head() == 2
        await (await mine.start("second")).result()
        saved = (await mine.state())["messages"]
    assert seen[-1] == [["user", "upd-1"], ["user", "upd-2"], ["user", "second"]]
    assert [[m.role, m.text] for m in saved][:-1] == seen[-1]
