"""Checkpoints: the ``Checkpointer`` protocol, its records, and the in-memory form.

A checkpointer is an append-only log per conversation thread. The runtime decides
what a record means (a step's messages, a file diff, a finished tool result...);
the checkpointer only keeps records in order, atomically per batch, and gives
them back. Each record's ``data`` is a JSON-compatible dict, stored as compact
JSON text, so the bytes on disk follow the size of what changed.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Protocol, Self, final, runtime_checkable

import anyio
import anyio.lowlevel
from anyio.abc import AsyncResource

from ._json import check_text, decode_object, encode_object
from ._lease import LocalTurns, ThreadLease, WhenBusy

__all__ = [
    "CheckpointRecord",
    "CheckpointWrite",
    "Checkpointer",
    "EncodedPut",
    "EncodedWrite",
    "MemoryCheckpointer",
    "Rewritable",
    "ThreadInfo",
    "check_thread_id",
    "encode_writes",
    "encoded_put",
]


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class CheckpointWrite:
    """One record to append to a thread.

    Attributes:
        path: The actor path it belongs to (``"main"``, ``"main/task-2:researcher"``).
        step: The actor's step number when it was written.
        kind: What the record holds, in the runtime's vocabulary (``"messages"``,
            ``"files"``, ``"tool_result"``...). The checkpointer does not interpret it.
        data: A JSON-compatible dict with string keys. It is encoded when ``put`` is called, so
            changing it afterwards changes nothing stored.
    """

    path: str
    step: int
    kind: str
    data: dict[str, Any]


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class CheckpointRecord:
    """A stored record, as read back.

    Attributes:
        thread_id: The thread it belongs to.
        seq: Its position in the thread: 1 for the first record ever put, then
            +1 per record, with no gaps (until the thread is deleted).
        path: See :class:`CheckpointWrite`.
        step: See :class:`CheckpointWrite`.
        kind: See :class:`CheckpointWrite`.
        data: A fresh dict decoded from the stored JSON; the caller may keep or
            change it.
        created_at: When its batch was put, seconds since the epoch.
    """

    thread_id: str
    seq: int
    path: str
    step: int
    kind: str
    data: dict[str, Any] = field(repr=False)
    created_at: float


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class ThreadInfo:
    """A summary of one stored thread.

    Attributes:
        thread_id: The thread.
        records: How many records it holds.
        last_seq: The ``seq`` of its newest record.
        updated_at: When its newest record was put, seconds since the epoch.
    """

    thread_id: str
    records: int
    last_seq: int
    updated_at: float


@runtime_checkable
class Checkpointer(Protocol):
    """Append-only, per-thread storage of checkpoint records.

    Implementations are async context managers; leaving the ``async with`` block
    calls :meth:`aclose`.
    """

    @property
    def location(self) -> str:
        """Where the records are kept, for messages: a file, ``"memory"``..."""
        ...

    def lease(self, thread_id: str) -> AbstractAsyncContextManager[ThreadLease]:
        """Hold the thread for one run: ``async with checkpointer.lease(t) as lease:``.

        One holder per thread at a time, across tasks, event loops, threads and
        (for a shared database) processes; the others wait in line, or, for a
        checkpointer made with ``when_busy="raise"``, get :class:`ThreadBusy`.
        A durable checkpointer's lease expires unless renewed, so a process that
        dies does not hold its threads for ever; while it is held, its holder's
        :meth:`put` and :meth:`delete_thread` calls on the thread are refused
        once another run has taken the thread
        (:class:`~deepactors.errors.ThreadLeaseLost`).

        Raises:
            ThreadBusy: The thread is held and the checkpointer does not wait.
        """
        ...

    async def put(self, thread_id: str, records: Sequence[CheckpointWrite]) -> None:
        """Append ``records`` to the thread, all or none (one transaction).

        The records get consecutive ``seq`` numbers after the thread's last one,
        in the order given, and one shared ``created_at``. An empty batch does
        nothing. Concurrent calls are serialised; each batch stays contiguous.

        ``data`` must be a dict with string keys all the way down; strings may
        hold lone surrogates (they round-trip), but not a surrogate pair split
        into two code points.

        Raises:
            TypeError: A record's ``data`` is not a JSON-compatible dict, or holds
                a key that is not a string (JSON would silently turn it into one).
            ValueError: ``thread_id`` is empty; or a string in ``data`` would not
                read back the same; or an identifier holds a lone surrogate.
            CheckpointError: The storage failed; nothing of the batch was stored.
        """
        ...

    async def read(
        self, thread_id: str, *, path: str | None = None, upto_seq: int | None = None
    ) -> list[CheckpointRecord]:
        """The thread's records in ``seq`` order (empty for an unknown thread).

        Args:
            thread_id: The thread.
            path: Only the records of this actor path.
            upto_seq: Only records with ``seq <= upto_seq``: the thread as it was
                then.

        Raises:
            CheckpointCorrupt: A stored record cannot be decoded, or the
                thread's ``seq`` numbers are not 1, 2, 3... (a record is
                missing). The message names the place, thread and ``seq``, never
                the stored data.
        """
        ...

    async def threads(self) -> list[ThreadInfo]:
        """Every thread holding at least one record, sorted by ``thread_id``."""
        ...

    async def delete_thread(self, thread_id: str) -> None:
        """Remove every record of the thread; nothing happens when there is none.

        While the caller holds the thread's lease through this checkpointer, the
        delete is fenced as :meth:`put` is: it happens only if the lease is still
        the caller's, checked in the same transaction. The lease stays held, and
        the holder's next :meth:`put` numbers the thread from ``seq`` 1 again.

        Raises:
            ThreadLeaseLost: The caller holds the thread's lease through this
                checkpointer, and another run has taken the thread (or, for
                PostgreSQL, the lease connection dropped): nothing was deleted.
        """
        ...

    async def aclose(self) -> None:
        """Release the checkpointer's resources (idempotent)."""
        ...

    async def __aenter__(self) -> Self: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


@runtime_checkable
class Rewritable(Protocol):
    """A checkpointer that can replace a thread's records in one transaction.

    What compacting a thread's history takes (``ThreadHandle.keep_latest``, the
    server's ``threads.prune(strategy="keep_latest")``): every checkpointer of
    this package has it; one of your own may add it.
    """

    async def replace(self, thread_id: str, records: Sequence[CheckpointWrite]) -> None:
        """Make ``records`` the thread's records, ``seq`` 1..n, all or none.

        Fenced as :meth:`Checkpointer.delete_thread` is while the caller holds
        the thread's lease; the records get one new ``created_at``, so the
        thread's origin changes (a reader that remembered the thread sees news).

        Raises:
            ThreadLeaseLost: The caller's lease was taken by another run:
                nothing was changed.
        """
        ...


EncodedWrite = tuple[str, int, str, str]
"""A record as every checkpointer of this package stores it: ``(path, step, kind, text)``,
``text`` its ``data`` as compact JSON (what ``put`` makes of a :class:`CheckpointWrite`)."""


@runtime_checkable
class EncodedPut(Protocol):
    """A checkpointer that also takes records already encoded: every one of this package.

    The runtime's journal encodes a state change as it happens (a message through
    pydantic's own JSON serializer, not a dict and then ``json``): the same stored
    JSON, for less work per step. A checkpointer of your own needs only
    :meth:`Checkpointer.put`; a subclass of one of ours that overrides ``put``
    gets every record through its ``put`` (see :func:`encoded_put`).
    """

    async def put_encoded(self, thread_id: str, rows: Sequence[EncodedWrite]) -> None:
        """:meth:`Checkpointer.put` for records already encoded.

        Each row is an :data:`EncodedWrite`: its ``text`` the compact JSON object
        :meth:`Checkpointer.put` would make of the record's data (or made with the
        same guarantees: string keys, lone surrogates escaped). The identifiers
        are checked as :meth:`Checkpointer.put` checks them.
        """
        ...


def check_thread_id(thread_id: str) -> None:
    """Raise unless ``thread_id`` is a non-empty string that can be stored.

    Raises:
        TypeError: It is not a string.
        ValueError: It is empty, or holds a lone surrogate.
    """
    if not isinstance(thread_id, str):
        raise TypeError(f"a thread_id is a non-empty string, not {type(thread_id).__name__}")
    if not thread_id:
        raise ValueError("a thread_id is a non-empty string, not ''")
    check_text(thread_id, what="thread_id")


def encoded_put(
    checkpointer: object,
) -> Callable[[str, Sequence[EncodedWrite]], Awaitable[None]] | None:
    """``checkpointer.put_encoded`` where it stands for the checkpointer's own ``put``; else None.

    A class that overrides ``put`` below the class that gave it ``put_encoded``
    (a subclass of ours adding its own checks, say) is given records through
    ``put``, as a checkpointer of a user's own is.
    """
    if not isinstance(checkpointer, EncodedPut):
        return None
    for base in type(checkpointer).__mro__:
        if "put_encoded" in vars(base):
            return checkpointer.put_encoded
        if "put" in vars(base):
            return None  # overridden below the encoded road
    return None  # pragma: no cover - an EncodedPut defines put_encoded somewhere


def encode_writes(records: Sequence[CheckpointWrite]) -> list[EncodedWrite]:
    """Encode a batch as compact JSON, before anything is stored.

    Encoding the whole batch first is what keeps a batch atomic when one of its
    records cannot be stored, and it snapshots the caller's dicts at call time.
    The encoding (see ``deepactors.persistence._json``) is shared by every
    checkpointer, so they accept and refuse exactly the same data.

    Raises:
        TypeError: A record's ``data`` is not a JSON-compatible dict with string keys.
        ValueError: A record's ``data`` holds a string that cannot round-trip,
            or its ``path`` or ``kind`` holds a lone surrogate.
    """
    out: list[EncodedWrite] = []
    for i, record in enumerate(records):
        what = f"checkpoint data (record {i} of the batch, kind {record.kind!r})"
        text = encode_object(record.data, what=what)
        _check_ids(record.path, record.kind)
        out.append((record.path, record.step, record.kind, text))
    return out


def _check_ids(path: str, kind: str) -> None:
    check_text(path, what="a record's path")
    check_text(kind, what="a record's kind")


def check_rows(rows: Sequence[EncodedWrite]) -> list[EncodedWrite]:
    """``rows`` as a list, once their identifiers are checked as ``encode_writes`` does.

    Raises:
        ValueError: A record's ``path`` or ``kind`` holds a lone surrogate.
    """
    for path, _, kind, _ in rows:
        _check_ids(path, kind)
    return list(rows)


@dataclass(frozen=True, slots=True)
class _Stored:
    seq: int
    path: str
    step: int
    kind: str
    text: str
    created_at: float


class MemoryCheckpointer(AsyncResource):
    """A :class:`Checkpointer` in a dict, for tests and single-process use.

    Records are kept as the same JSON text SQLite would store, and decoded afresh
    on every read, so it behaves exactly like :class:`SqliteCheckpointer`: nothing
    the caller does to a dict after ``put`` or after ``read`` changes what is stored.
    Its leases serialize the runs of one thread within the process (across event
    loops and threads too); they never expire, as their holder cannot die alone.

    Args:
        when_busy: ``"wait"`` (the default) to wait for a held thread,
            ``"raise"`` to fail with :class:`~deepactors.errors.ThreadBusy`.
        clock: The time recorded with each batch (``time.time`` by default).
    """

    def __init__(
        self, *, when_busy: WhenBusy = "wait", clock: Callable[[], float] = time.time
    ) -> None:
        self._threads: dict[str, list[_Stored]] = {}
        self._turns = LocalTurns()
        self._when_busy = when_busy
        self._clock = clock

    def __repr__(self) -> str:
        return f"MemoryCheckpointer(threads={len(self._threads)})"

    @property
    def location(self) -> str:
        """See :attr:`Checkpointer.location`."""
        return "memory"

    @asynccontextmanager
    async def lease(self, thread_id: str) -> AsyncIterator[ThreadLease]:
        """See :meth:`Checkpointer.lease`."""
        check_thread_id(thread_id)
        started = anyio.current_time()
        async with self._turns.hold(thread_id, wait=self._when_busy == "wait"):
            log = self._threads.get(thread_id)
            yield ThreadLease(
                thread_id=thread_id,
                owner=uuid.uuid4().hex,
                head=log[-1].seq if log else 0,
                waited=anyio.current_time() - started,
                origin=log[0].created_at if log else None,
            )

    async def put(self, thread_id: str, records: Sequence[CheckpointWrite]) -> None:
        """See :meth:`Checkpointer.put`."""
        check_thread_id(thread_id)
        await self._append(thread_id, encode_writes(records))

    async def put_encoded(self, thread_id: str, rows: Sequence[EncodedWrite]) -> None:
        """See :meth:`EncodedPut.put_encoded`."""
        check_thread_id(thread_id)
        await self._append(thread_id, check_rows(rows))

    async def _append(self, thread_id: str, encoded: list[EncodedWrite]) -> None:
        await anyio.lowlevel.checkpoint()
        if not encoded:
            return
        now = self._clock()
        log = self._threads.setdefault(thread_id, [])
        last = log[-1].seq if log else 0
        log.extend(
            _Stored(last + i, path, step, kind, text, now)
            for i, (path, step, kind, text) in enumerate(encoded, 1)
        )

    async def read(
        self, thread_id: str, *, path: str | None = None, upto_seq: int | None = None
    ) -> list[CheckpointRecord]:
        """See :meth:`Checkpointer.read`."""
        check_thread_id(thread_id)
        if path is not None:
            check_text(path, what="a record's path")
        await anyio.lowlevel.checkpoint()
        return [
            CheckpointRecord(
                thread_id=thread_id,
                seq=s.seq,
                path=s.path,
                step=s.step,
                kind=s.kind,
                data=decode_object(s.text),
                created_at=s.created_at,
            )
            for s in self._threads.get(thread_id, ())
            if (path is None or s.path == path) and (upto_seq is None or s.seq <= upto_seq)
        ]

    async def threads(self) -> list[ThreadInfo]:
        """See :meth:`Checkpointer.threads`."""
        await anyio.lowlevel.checkpoint()
        return [
            ThreadInfo(
                thread_id=thread_id,
                records=len(log),
                last_seq=log[-1].seq,
                updated_at=log[-1].created_at,
            )
            for thread_id, log in sorted(self._threads.items())
        ]

    async def delete_thread(self, thread_id: str) -> None:
        """See :meth:`Checkpointer.delete_thread`."""
        check_thread_id(thread_id)
        await anyio.lowlevel.checkpoint()
        self._threads.pop(thread_id, None)

    async def replace(self, thread_id: str, records: Sequence[CheckpointWrite]) -> None:
        """See :meth:`Rewritable.replace`."""
        check_thread_id(thread_id)
        encoded = encode_writes(records)
        await anyio.lowlevel.checkpoint()
        now = self._clock()
        if not encoded:
            self._threads.pop(thread_id, None)
            return
        self._threads[thread_id] = [
            _Stored(i, path, step, kind, text, now)
            for i, (path, step, kind, text) in enumerate(encoded, 1)
        ]

    async def aclose(self) -> None:
        """Nothing to release; the records stay readable."""
        await anyio.lowlevel.checkpoint()
