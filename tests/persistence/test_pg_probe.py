"""The PostgreSQL probe's answers: shared by the tasks that wait on one question, never stale.

:class:`~deepactors.persistence.postgres._probe.Probe` asks the server for a
connection of its own when a pool hands none out, to tell an outage from a busy
pool. Its ``ask`` is the boundary (psycopg's connect), so here it is a function
that fails or succeeds as the test says: an answer the probe gave before a task
came must not be given to that task (a database back up was answered 503 by an
answer from before it came back), and tasks that came while one question was
being asked share its answer (an outage costs one connection attempt, not one
per waiting request).
"""

from __future__ import annotations

import anyio
import psycopg
import pytest

from deepactors.persistence.postgres._drive import Unreachable
from deepactors.persistence.postgres._probe import Probe


class _Server:
    """What a probe's ``ask`` finds: up or down, and how many times it was asked."""

    def __init__(self) -> None:
        self.up = False
        self.asked = 0
        self.hold: anyio.Event | None = None

    async def ask(self) -> None:
        self.asked += 1
        if self.hold is not None:
            await self.hold.wait()
        if not self.up:
            raise psycopg.OperationalError("connection refused")


async def test_a_database_back_up_is_seen_by_the_next_question_at_once() -> None:
    server = _Server()
    probe = Probe(server.ask)
    with pytest.raises(Unreachable, match="connection refused"):
        await probe()
    server.up = True
    await probe()  # no clock moved: an earlier answer is not given again
    assert server.asked == 2
    server.up = False
    with pytest.raises(Unreachable):
        await probe()


async def test_tasks_that_wait_on_one_question_share_its_answer() -> None:
    server = _Server()
    server.hold = anyio.Event()
    probe = Probe(server.ask)
    failures: list[str] = []

    async def one() -> None:
        try:
            await probe()
        except Unreachable as exc:
            failures.append(str(exc))

    async with anyio.create_task_group() as tg:
        for _ in range(5):
            tg.start_soon(one)
        await anyio.wait_all_tasks_blocked()
        server.hold.set()
    assert server.asked == 1
    assert failures == ["connection refused"] * 5


async def test_a_question_cancelled_unanswered_is_asked_again_by_the_next_waiter() -> None:
    server = _Server()
    server.up = True
    server.hold = anyio.Event()
    probe = Probe(server.ask)
    scope = anyio.CancelScope()
    answered = anyio.Event()

    async def first() -> None:
        with scope:
            await probe()

    async def second() -> None:
        await probe()
        answered.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(first)  # asks, and is held
        await anyio.wait_all_tasks_blocked()
        tg.start_soon(second)  # waits for that question's answer
        await anyio.wait_all_tasks_blocked()
        scope.cancel()
        await anyio.wait_all_tasks_blocked()
        # The first asker left before an answer came: the second asked itself.
        assert server.asked == 2
        server.hold.set()
    assert answered.is_set()
