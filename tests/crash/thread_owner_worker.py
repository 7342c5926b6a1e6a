"""One of two processes acting on the same thread, for the thread-owner test (issue 24).

    python thread_owner_worker.py ROLE

ROLE is ``runner`` or ``operator``. The process runs one case after another,
each given as a line on stdin, a JSON list ``[DB, LOOP, WHEN_BUSY, LOG, STOP,
ROUNDS, SEED]``, until stdin ends (a start costs seconds: the test's cases share
a pair of processes). DB is a SQLite file or a ``postgresql://`` URL; LOOP
``asyncio`` or ``trio`` (each case its own ``anyio.run``); WHEN_BUSY the
checkpointer's ``when_busy``; LOG the JSON-lines file this case's events go to;
STOP a file the operator creates once it is done (the runner stops when it
appears); ROUNDS the operator's rounds; SEED its random seed.

For each case: prints ``ready``, waits for a line on stdin (so both start
together), works, prints ``done``. The runner loops runs on thread ``t`` through a
:class:`~deepactors.actors.ThreadHandle`: every fifth run calls a tool first,
so that it writes its records in several batches. The operator does ROUNDS
rounds of ``rollback`` (to a random ``seq`` at most the head it read through
``head()``), ``update_state`` and ``delete``.

The agent's checkpointer is the real one wrapped in :class:`LoggedCheckpointer`,
which forwards every call and logs, on the system-wide monotonic clock, when
this process took and gave back the thread's lease (with the lease's token and
head) and every write (put, delete) with the lease held at the time: the test
merges both processes' logs and checks them. Each line also names the order it
belongs to (``run-3``, ``op-7-delete``): each process gives one order at a time.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Any, Self, TextIO

import anyio
import anyio.to_thread

from deepactors import AssistantMessage, ToolCall, ToolMessage, create_deep_agent, tool
from deepactors.actors import ThreadHandle, open_runtime
from deepactors.errors import ThreadBusy, ThreadLeaseLost
from deepactors.models import FunctionModel, ModelRequest
from deepactors.persistence import (
    Checkpointer,
    CheckpointRecord,
    CheckpointWrite,
    ThreadInfo,
    ThreadLease,
    open_checkpointer,
)

THREAD = "t"
MAX_RUNS = 20_000  # the runner's bound, should the stop file never come
MAX_SECONDS = 150.0


class Log:
    """This process's events, one JSON object a line (flushed: a hang leaves a trace)."""

    def __init__(self, file: TextIO) -> None:
        self.file = file
        self.label = "setup"  # the order being given now

    def __call__(self, event: str, **fields: Any) -> None:
        line = {"ev": event, "pid": os.getpid(), "label": self.label, **fields}
        self.file.write(json.dumps(line) + "\n")
        self.file.flush()


class LoggedCheckpointer:
    """A checkpointer that forwards every call to ``inner`` and logs leases and writes.

    Times are ``time.monotonic()`` (``CLOCK_MONOTONIC``, one clock for every
    process on a Linux machine). A lease is logged as taken once the inner
    lease is held and as released before the inner one lets go, so the logged
    interval lies within the real one: if two logged intervals overlap, the real
    ones did.
    """

    def __init__(self, inner: Checkpointer, log: Log) -> None:
        self.inner = inner
        self.log = log
        self.holding: dict[str, str] = {}  # thread -> token of the lease held now
        self.last_take: dict[str, int] = {}  # label -> head its lease reported

    @property
    def location(self) -> str:
        return self.inner.location

    @asynccontextmanager
    async def lease(self, thread_id: str) -> AsyncIterator[ThreadLease]:
        taken = False
        try:
            async with self.inner.lease(thread_id) as lease:
                taken = True
                self.holding[thread_id] = lease.owner
                self.last_take[self.log.label] = lease.head
                now = time.monotonic()
                self.log("take", thread=thread_id, t=now, owner=lease.owner, head=lease.head)
                try:
                    yield lease
                finally:
                    self._released(thread_id, lease)
        except ThreadBusy:
            if not taken:
                self.log("busy", thread=thread_id, t=time.monotonic())
            raise

    def _released(self, thread_id: str, lease: ThreadLease) -> None:
        del self.holding[thread_id]
        self.log("release", thread=thread_id, t=time.monotonic(), owner=lease.owner)

    async def _write(self, event: str, thread_id: str, kinds: list[str], call: Any) -> None:
        owner = self.holding.get(thread_id)
        started = time.monotonic()
        error = None
        try:
            await call
        except BaseException as exc:
            error = type(exc).__name__
            raise
        finally:
            self.log(
                event,
                thread=thread_id,
                n=len(kinds),
                kinds=kinds,
                owner=owner,
                t0=started,
                t1=time.monotonic(),
                error=error,
                lost=error == ThreadLeaseLost.__name__,
            )

    async def put(self, thread_id: str, records: Sequence[CheckpointWrite]) -> None:
        await self._write(
            "put", thread_id, [r.kind for r in records], self.inner.put(thread_id, records)
        )

    async def delete_thread(self, thread_id: str) -> None:
        await self._write("delete", thread_id, [], self.inner.delete_thread(thread_id))

    async def read(
        self, thread_id: str, *, path: str | None = None, upto_seq: int | None = None
    ) -> list[CheckpointRecord]:
        return await self.inner.read(thread_id, path=path, upto_seq=upto_seq)

    async def threads(self) -> list[ThreadInfo]:
        return await self.inner.threads()

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def __aenter__(self) -> Self:
        await self.inner.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.inner.__aexit__(exc_type, exc, tb)


@tool
def note(text: str) -> str:
    """Take a note."""
    return f"noted {text}"


def counting(records: Sequence[CheckpointRecord]) -> list[int]:
    """The ``seq`` of the records that count: a rollback marker ``{"to": n}``
    makes the thread what it was right after record ``n`` (a snapshot per
    record, the plain way, to check the package's one-pass chain against)."""
    seqs: list[int] = []
    after: list[list[int]] = [[]]  # after[n]: what counted right after record n
    for record in records:
        if record.kind == "rollback":
            seqs = list(after[record.data["to"]])
        else:
            seqs = [*seqs, record.seq]
        after.append(seqs)
    return seqs


def counting_forward(records: Sequence[CheckpointRecord]) -> list[int]:
    """What counts if a marker only took back what counted after ``n`` (earlier
    rollbacks' removals staying removed): how often the two differ shows the
    test reaches rollbacks into a range an earlier rollback took back."""
    seqs: list[int] = []
    for record in records:
        if record.kind == "rollback":
            seqs = [seq for seq in seqs if seq <= record.data["to"]]
        else:
            seqs.append(record.seq)
    return seqs


def view(messages: Sequence[Any]) -> list[list[str]]:
    """Messages as ``[role, text]`` pairs, to compare and log."""
    return [[m.role, m.text] for m in messages]


class Worker:
    """One process's side: its log, its checkpointer and its thread handle."""

    def __init__(self, log: Log, saver: LoggedCheckpointer) -> None:
        self.log = log
        self.saver = saver
        self.agent = create_deep_agent(
            model=FunctionModel(self.answer), tools=[note], checkpointer=saver
        )
        self.handle: ThreadHandle | None = None

    async def answer(self, request: ModelRequest) -> AssistantMessage:
        """Answer ``run-<i>`` with ``answer-<i>`` (every fifth after a ``note`` call).

        Called while the run holds the thread's lease, after everything the run
        recorded is stored: the history the model is shown must be the thread's
        saved history, else the run works on a stale copy (a lost turn).
        """
        assert self.handle is not None
        saved = view((await self.handle.state())["messages"])
        seen = view(request.messages)
        if seen != saved:
            self.log("stale_view", seen=seen, saved=saved)
        label = next(m.text for m in reversed(request.messages) if m.role == "user")
        i = int(label.removeprefix("run-"))
        if i % 5 == 0 and not isinstance(request.messages[-1], ToolMessage):
            return AssistantMessage(tool_calls=[ToolCall(name="note", args={"text": label})])
        return AssistantMessage(content=f"answer-{i}")

    async def runner(self, h: ThreadHandle, stop: str) -> None:
        deadline = time.monotonic() + MAX_SECONDS
        for i in range(MAX_RUNS):
            if await anyio.Path(stop).exists() or time.monotonic() > deadline:
                break
            self.log.label = f"run-{i}"
            try:
                run = await h.start(f"run-{i}")
                result = await run.result()
            except ThreadBusy:
                self.log("run", i=i, outcome="busy")
                # Let the other process in before asking again.
                await anyio.sleep(0.001)
                continue
            except Exception as exc:
                self.log("run", i=i, outcome="error", error=repr(exc))
                continue
            messages = view(result["messages"])
            self.log(
                "run",
                i=i,
                outcome="ok",
                head_before=run.head_before,
                whole=messages[-1] == ["assistant", f"answer-{i}"],
            )

    async def operator(self, h: ThreadHandle, rounds: int, seed: int, stop: str) -> None:
        rng = random.Random(seed)
        try:
            for k in range(rounds):
                self.log.label = f"op-{k}-head"
                head = await self.busy_retried(h.head)
                to = rng.randint(0, head)
                await self.rollback(h, k, to)
                await self.update(h, k)
                self.log.label = f"op-{k}-delete"
                await self.attempt("delete", h.delete)
        finally:
            await anyio.Path(stop).touch()

    async def busy_retried(self, call: Any) -> Any:
        """``call()`` until it is not refused (each refusal logged)."""
        while True:
            try:
                return await call()
            except ThreadBusy:
                self.log("op", op="head", outcome="busy")
                await anyio.sleep(0.001)

    async def attempt(self, op: str, call: Any, **fields: Any) -> Any:
        """``call()`` once, its outcome logged; None when refused or failed."""
        try:
            result = await call()
        except ThreadBusy:
            self.log("op", op=op, outcome="busy", **fields)
            return None
        except Exception as exc:
            self.log("op", op=op, outcome="error", error=repr(exc), **fields)
            return None
        self.log("op", op=op, outcome="ok", **fields)
        return result

    async def rollback(self, h: ThreadHandle, k: int, to: int) -> None:
        self.log.label = label = f"op-{k}-rollback"
        after = await self.attempt("rollback", lambda: h.rollback(to), to=to)
        if after is None:
            return
        took = self.saver.last_take[label]
        if to >= took:
            self.log("rolled_back", to=to, head=after, took=took)
            return
        # Only this process deletes, so the records up to the marker stay as
        # they are while it reads them.
        records = await self.saver.read(THREAD, upto_seq=after)
        marker = records[-1]
        expected = counting(records[:to])
        history = [r.seq for r in await h.history() if r.seq <= after]
        self.log(
            "rolled_back",
            to=to,
            head=after,
            took=took,
            # Whether `to` lies in a range an earlier rollback took back: the
            # thread is again what it was right after record `to`, not merely
            # cut at `to`.
            into_taken_back=expected
            != [seq for seq in counting_forward(records[:-1]) if seq <= to],
        )
        if (marker.seq, marker.kind, marker.data) != (after, "rollback", {"to": to}) or (
            history != expected
        ):
            self.log("bad_rollback", to=to, history=history, expected=expected)

    async def update(self, h: ThreadHandle, k: int) -> None:
        self.log.label = label = f"op-{k}-update"
        text = f"upd-{k}"
        message = {"role": "user", "content": text}
        result = await self.attempt(
            "update", lambda: h.update_state({"messages": [message]}), text=text
        )
        if result is None:
            return
        after = view(result["messages"])
        # The update's one record follows the head its lease saw: the state it
        # returns must be the saved state up to that record (not a stale copy).
        saved = view((await h.state(upto_seq=self.saver.last_take[label] + 1))["messages"])
        if after != saved or after[-1] != ["user", text]:
            self.log("bad_update", after=after, saved=saved)


async def main(
    role: str, db: str, when_busy: str, file: TextIO, stop: str, rounds: int, seed: int
) -> None:
    log = Log(file)
    async with LoggedCheckpointer(open_checkpointer(db, when_busy=when_busy), log) as saver:
        worker = Worker(log, saver)
        async with open_runtime() as rt:
            h = worker.handle = rt.thread(worker.agent, THREAD)
            print("ready", flush=True)
            await anyio.to_thread.run_sync(sys.stdin.readline)
            if role == "runner":
                await worker.runner(h, stop)
            else:
                await worker.operator(h, rounds, seed, stop)
            log.label = "final"
            state = await h.state()
            history = await h.history()
            log("final", messages=len(state["messages"]), records=len(history))
    print("done", flush=True)


def serve(role: str) -> None:
    """The cases given on stdin, one after another, until it ends."""
    while line := sys.stdin.readline():
        db, loop, when_busy, log, stop, rounds, seed = json.loads(line)
        with open(log, "w") as log_file:
            anyio.run(main, role, db, when_busy, log_file, stop, rounds, seed, backend=loop)


if __name__ == "__main__":
    serve(sys.argv[1])
