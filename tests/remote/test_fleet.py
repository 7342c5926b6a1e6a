"""A tree whose subagents run on two ``deepactors serve --workers 2`` processes over one
PostgreSQL database (all on 127.0.0.1), on both loops: every child's answer and file
arrive and merge; the parent's deadline cancels every remote run."""

from __future__ import annotations

import pytest

from .conftest import (
    answers,
    parent,
    remote,
    remote_runs_in,
    run_collecting,
    say,
    settled,
    statuses,
)

pytestmark = pytest.mark.slow

FANOUT = 200


async def test_200_remote_children_all_answer_and_their_files_merge(
    fleet: tuple[str, str],
) -> None:
    a, b = fleet
    agent = parent([remote("a", a, keep_threads=True), remote("b", b, keep_threads=True)])
    orders = [("ab"[i % 2], f"write /out/{i}.txt child {i}") for i in range(FANOUT)]
    result, events = await run_collecting(agent, say(orders), timeout=300)
    assert isinstance(result, dict), result
    results = answers(result)
    assert len(results) == FANOUT
    for i, (status, text) in enumerate(results):
        assert status == "success", text
        assert text.startswith(f"wrote /out/{i}.txt")
    files = result["files"]
    assert {p: r.content for p, r in files.items()} == {
        f"/out/{i}.txt": f"child {i}" for i in range(FANOUT)
    }
    runs = remote_runs_in(events)
    assert len(runs) == FANOUT
    assert {r["url"] for r in runs} == {a, b}
    assert set(await statuses(runs)) == {"success"}


async def test_the_parents_deadline_cancels_every_remote_run(fleet: tuple[str, str]) -> None:
    a, b = fleet
    agent = parent([remote("a", a, keep_threads=True), remote("b", b, keep_threads=True)])
    count = 20
    # Children that never end on their own: the parent's deadline ends them. It
    # must find all 20 remote runs started; 8 s leaves room for that on a loaded
    # machine (the 200 children above start and answer in about that), and the
    # test waits it out on both loops (15 s was 31 s of CI's run).
    result, events = await run_collecting(
        agent, say([("ab"[i % 2], "block") for i in range(count)]), timeout=8
    )
    assert isinstance(result, TimeoutError), result
    runs = remote_runs_in(events)
    assert len(runs) == count
    # Each cancel was sent (and answered) before the parent's run ended; a
    # server records it as the run's actor stops, a moment later.
    found = await settled(runs)
    assert set(found) <= {"interrupted", "timeout"}, found
