"""Background tasks under ``deepactors serve``, driven by the real langgraph-sdk client."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from langgraph_sdk import get_sync_client

from tests.server.serve_process import serving
from tests.waiting import wait_until_sync

APP = Path(__file__).with_name("served_app.py")
TOPICS = ["alpha", "beta", "gamma"]


@pytest.mark.parametrize("loop", ["asyncio", "trio"])
def test_a_served_thread_answers_while_its_tasks_run_and_keeps_their_results(
    loop: str, tmp_path: Path
) -> None:
    shutil.copy(APP, tmp_path / "served_app.py")
    args = ["served_app:agent", "--db", "threads.db", "--loop", loop]
    with serving(args, tmp_path) as url, get_sync_client(url=url) as client:
        thread_id = client.threads.create()["thread_id"]
        first: Any = client.runs.wait(thread_id, "agent", input={"messages": "research"})
        assert {t["status"] for t in first["async_tasks"].values()} == {"running"}
        # The run ended; the tasks work on (their gates are shut) and the
        # thread answers another run meanwhile.
        second: Any = client.runs.wait(thread_id, "agent", input={"messages": "status?"})
        assert second["messages"][-1]["content"].count("status: running") == 3

        for topic in TOPICS:
            (tmp_path / f"open-{topic}").touch()

        def all_done() -> Any:
            # Another process: poll its state, as a client would.
            values: Any = client.threads.get_state(thread_id)["values"]
            return {t["status"] for t in values["async_tasks"].values()} == {"success"} and values

        values = wait_until_sync(all_done, what="every task a success", timeout=30)
        assert sorted(values["files"]) == sorted(f"/notes/{t}.md" for t in TOPICS)
        results = sorted(t["result"] for t in values["async_tasks"].values())
        assert results == sorted(f"report on {t}" for t in TOPICS)
