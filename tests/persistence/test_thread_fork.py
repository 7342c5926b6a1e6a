"""A thread forked at a checkpoint (``ThreadHandle.fork``): the head is left as it
is, an older record becomes the head with the later ones kept readable, and the
decision is taken in the thread's turn, after the runs queued before it.

Over every kind of checkpointer, on both loops (the server's runs and state
updates with a ``checkpoint`` go through it: ``server/_checkpoints.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import pytest

from deepactors import create_deep_agent, open_runtime
from deepactors.errors import InputError
from deepactors.messages import UserMessage
from deepactors.models import FunctionModel, ModelRequest
from deepactors.persistence import Checkpointer

pytestmark = pytest.mark.anyio


def echo(request: ModelRequest) -> str:
    last = [m for m in request.messages if isinstance(m, UserMessage)][-1]
    return f"re: {last.text}"


def said(values: dict[str, Any] | Any) -> list[str]:
    return [m.text for m in values["messages"]]


async def test_fork_keeps_the_head_and_goes_back_to_any_record(
    make_checkpointer: Callable[..., Checkpointer],
) -> None:
    async with make_checkpointer() as cp:
        agent = create_deep_agent(FunctionModel(echo), checkpointer=cp)
        async with open_runtime() as rt:
            t = rt.thread(agent, "t")
            await (await t.start("one")).result()
            one = (await t.state()).seq
            await (await t.start("two")).result()
            two = (await t.state()).seq
            assert one is not None
            assert two is not None
            head = await t.head()
            assert await t.fork(two) == head  # the head already: nothing written

            await t.fork(one)
            assert said(await t.state()) == ["one", "re: one"]
            await (await t.start("again")).result()
            assert said(await t.state()) == ["one", "re: one", "again", "re: again"]
            # The superseded branch is still in the log, and readable as it was.
            every = [r.seq for r in await t.history(superseded=True)]
            assert two in every
            assert two not in [r.seq for r in await t.history()]
            assert said(await t.state(upto_seq=two)) == ["one", "re: one", "two", "re: two"]
            assert [r.seq for r in await t.history(upto_seq=two)][-1] == two
            # And the thread can be forked back onto it.
            await t.fork(two)
            assert said(await t.state()) == ["one", "re: one", "two", "re: two"]
            with pytest.raises(InputError):
                await t.fork(0)


async def test_fork_is_decided_in_turn_after_the_runs_queued_before_it(
    make_checkpointer: Callable[..., Checkpointer],
) -> None:
    gate = anyio.Event()

    async def held(request: ModelRequest) -> str:
        if said({"messages": request.messages})[-1] == "two":
            await gate.wait()
        return echo(request)

    async with make_checkpointer() as cp:
        agent = create_deep_agent(FunctionModel(held), checkpointer=cp)
        async with open_runtime() as rt:
            t = rt.thread(agent, "t")
            await (await t.start("one")).result()
            one = (await t.state()).seq
            assert one is not None
            second = await t.start("two")
            async with anyio.create_task_group() as tg:
                # The head now, but not when its turn comes: the run ahead of it
                # moves the head, and the fork goes back over it.
                tg.start_soon(t.fork, one)
                await anyio.wait_all_tasks_blocked()
                gate.set()
            assert said(await second.result())[-1] == "re: two"
            assert said(await t.state()) == ["one", "re: one"]
