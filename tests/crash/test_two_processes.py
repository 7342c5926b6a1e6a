"""Two processes run one thread (of one SQLite file, or one PostgreSQL database):
their runs take turns.

Without the thread lease their records interleaved into one history (two user
messages in a row, a run answering on a history that missed the other's run).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from deepactors import create_deep_agent
from deepactors.models import FunctionModel
from deepactors.persistence import open_checkpointer

AGENT = Path(__file__).with_name("turns_agent.py")
RUNS = 25
PG_RUNS = 50


async def history(db: str) -> list[object]:
    async with open_checkpointer(db) as saver:
        agent = create_deep_agent(FunctionModel(lambda r: "unused"), checkpointer=saver)
        state = await agent.aget_state("t")
    return list(state["messages"])


def run_both(db: str, loops: tuple[str, str], runs: int) -> None:
    """Start both processes, let them go at once, wait for both to finish."""
    procs = [
        subprocess.Popen(
            [sys.executable, str(AGENT), who, db, loop, str(runs)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for who, loop in zip("ab", loops, strict=True)
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "ready"
        for proc in procs:  # both at once
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        for proc in procs:
            out, err = proc.communicate(timeout=300)
            assert proc.returncode == 0, err
            assert out.strip() == "done"
    finally:
        for proc in procs:
            proc.kill()
            with proc:  # its pipes closed (communicate did not, if it was not reached), reaped
                pass


def check_history(messages: list[object], runs: int) -> None:
    assert len(messages) == 4 * 2 * runs
    labels = []
    for k in range(2 * runs):
        user, call, result, final = messages[4 * k : 4 * k + 4]
        label = user.text  # type: ignore[attr-defined]
        labels.append(label)
        # One run, whole: its call, its tool's result, and an answer given on the
        # whole history before it (4 messages per earlier run, then its own 3).
        assert [m.role for m in (user, call, result, final)] == [  # type: ignore[attr-defined]
            "user",
            "assistant",
            "tool",
            "assistant",
        ], f"run {k} is interleaved"
        assert call.tool_calls[0].args == {"text": label}  # type: ignore[attr-defined]
        assert result.text == f"noted {label}"  # type: ignore[attr-defined]
        assert final.text == f"{label} done after {4 * k + 3}"  # type: ignore[attr-defined]
    for who in "ab":
        assert [x for x in labels if x.startswith(who)] == [f"{who} {i}" for i in range(runs)]


@pytest.mark.slow
@pytest.mark.parametrize("loops", [("asyncio", "trio"), ("trio", "trio"), ("asyncio", "asyncio")])
def test_two_processes_on_one_thread_never_interleave_their_runs(
    tmp_path: Path, loops: tuple[str, str]
) -> None:
    db = str(tmp_path / "threads.db")
    run_both(db, loops, RUNS)
    check_history(anyio.run(history, db), RUNS)


@pytest.mark.slow
@pytest.mark.parametrize("loops", [("asyncio", "trio"), ("trio", "trio"), ("asyncio", "asyncio")])
def test_two_processes_on_one_postgres_thread_never_interleave_their_runs(
    postgres_dsn: str, loops: tuple[str, str]
) -> None:
    run_both(postgres_dsn, loops, PG_RUNS)
    check_history(anyio.run(history, postgres_dsn), PG_RUNS)
