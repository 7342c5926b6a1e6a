"""Finding, making and keeping threads: ids per owner, and metadata kept with the thread.

**Ids per owner.** With authentication, a thread id names one of the caller's own
threads: another user's thread of that id is answered exactly as an absent one
everywhere, creation included. ``POST /threads {"thread_id": "t1"}`` (or a run
with ``if_not_exists: "create"``) by a user who has no thread ``t1`` makes one,
whoever else has a ``t1``, so ids can be neither probed (a 409 said "someone has
it") nor squatted (a 409 kept the owner out of their own id). What the
checkpointer, the runs database and the sandboxes know a thread by (its *key*,
``ThreadRecord.thread_id``) is the id itself for the first owner of an id (and
for every thread of a server without authentication), else ``<owner>/<id>``,
which no client id can be (an id is one URL path segment: it has no ``/``).
Clients only ever see ids (``ThreadRecord.name``).

A caller's id resolves, on every endpoint (state, history, runs, join, stream,
cancel, update, delete, search by ids), to the caller's own thread of that id if
there is one; else to the first owner's, if a rule lets the caller reach it (an
administrator reading every thread); else to nothing (404). A user therefore has
at most one thread per id, and an administrator who made a thread of an id
reaches their own of it first.

**Metadata with the thread.** A thread's metadata (its owner among it) was kept
in memory alone: a restart of a single-process server made every thread
nobody's. With a SQLite checkpointer it is now kept in a table of the same file
(:class:`~deepactors.persistence.SqliteThreadMetadata`): written when the thread
is made, patched, or first run (its graph and assistant), deleted with it, and
read back when the server starts. With a runs database (``runs_db``, several
processes) the relay keeps it there instead; with a checkpointer in memory the
threads go with the process anyway.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import final

from starlette.exceptions import HTTPException

from ..actors import Runtime
from ..persistence import Checkpointer, SqliteCheckpointer, SqliteThreadMetadata
from ._authz import CALLER, OWNER_KEY, may_thread
from ._records import AssistantRecord, ThreadRecord
from ._thread_ttl import ThreadTTL
from ._wire_json import TTLStrategy
from .auth import Action
from .relay import RunRelay, SharedRuns

__all__ = ["ThreadLookup", "metadata_beside", "scoped_key"]


def scoped_key(owner: str, name: str) -> str:
    """The key of ``owner``'s thread ``name`` when another owner had that id first.

    One to one: ``name`` has no ``/``, so the last ``/`` splits owner from id.
    """
    return f"{owner}/{name}"


def metadata_beside(checkpointers: Iterable[Checkpointer]) -> SqliteThreadMetadata | None:
    """Where threads' metadata is kept: beside their checkpoints in the one SQLite
    file they all share, if they do (None: nowhere but in memory)."""
    distinct = {id(c): c for c in checkpointers}
    if len(distinct) != 1:
        return None
    (only,) = distinct.values()
    return SqliteThreadMetadata(only.path) if isinstance(only, SqliteCheckpointer) else None


def _owner(thread: ThreadRecord) -> str | None:
    owner = thread.metadata.get(OWNER_KEY)
    return owner if isinstance(owner, str) else None


@final
class ThreadLookup:
    """Threads by id, their making and their metadata: the run manager's part that
    finds threads (the manager holds one; see the module docstring).

    A thread's values are never kept here: they are read through its handle
    (``RunManager.saved``).

    Args:
        runtime: The app's runtime, whose thread handles read saved threads.
        relay: Shares threads with other server processes.
        shared: Adopts the threads (and runs) of other processes.
        assistants: The served agents by graph id (the manager's own mapping).
        threads: The known threads by key (the manager's own mapping, which
            this part adds to).
        deleting: Keys of threads being deleted (the manager's own set): a
            lookup meanwhile finds none of them.
        thread_metadata: Where threads' metadata is kept beside their
            checkpoints (None: in memory only).
        thread_ttl: The time to live a thread made without one takes.
    """

    __slots__ = (
        "_shared",
        "assistants",
        "deleting",
        "relay",
        "runtime",
        "thread_metadata",
        "thread_ttl",
        "threads",
    )

    def __init__(
        self,
        runtime: Runtime,
        relay: RunRelay,
        shared: SharedRuns,
        *,
        assistants: Mapping[str, AssistantRecord],
        threads: dict[str, ThreadRecord],
        deleting: set[str],
        thread_metadata: SqliteThreadMetadata | None,
        thread_ttl: ThreadTTL,
    ) -> None:
        self.runtime = runtime
        self.relay = relay
        self._shared = shared
        self.assistants = assistants
        self.threads = threads
        self.deleting = deleting
        self.thread_metadata = thread_metadata
        self.thread_ttl = thread_ttl

    # -- finding ----------------------------------------------------------------------

    async def thread(self, name: str, action: Action = "read") -> ThreadRecord:
        """The thread the caller names ``name`` and may ``action`` (404 if none).

        Known here, saved in the checkpointer, or run by another process.
        """
        found = await self.find_thread(name, action)
        if found is None:
            # Another's thread is answered as one that does not exist.
            raise HTTPException(404, f"thread {name!r} not found")
        return found

    async def find_thread(self, name: str, action: Action = "read") -> ThreadRecord | None:
        """The thread the caller names ``name``, if it may ``action`` it (see the
        module docstring); without authentication, the thread of that id."""
        found = CALLER.get()
        if found is None:
            return await self.find_key(name)
        who = found[1].id
        first = await self.find_key(name)
        thread = first if first is not None and _owner(first) == who else None
        if thread is None:
            scoped = await self.find_key(scoped_key(who, name))
            if scoped is not None and _owner(scoped) == who:
                thread = scoped
        if thread is None:
            thread = first  # another's: only if a rule lets the caller reach it
        if thread is None or not await may_thread(thread, action):
            return None
        return thread

    async def find_key(self, key: str) -> ThreadRecord | None:
        """The thread of a key, known or found (checkpointer, metadata, runs database),
        whoever owns it."""
        found = self.threads.get(key)
        if found is not None:
            if CALLER.get() is not None and OWNER_KEY not in found.metadata and self.relay.shared:
                # Known from the checkpointer alone (after a restart): its owner
                # is in the shared runs database, with the rest of its metadata.
                await self._shared.adopt_thread(key)
            return found
        if key in self.deleting:
            # Forgotten, its records or metadata not all deleted yet: found there,
            # it would come back (with no ttl: one that nothing deletes again).
            return None
        for assistant in self.assistants.values():
            agent = assistant.agent
            records = await self.runtime.thread(agent, key).history(path=agent.name)
            if records:
                # Saved before this server started: known again from now on.
                found = ThreadRecord(
                    thread_id=key,
                    graph_id=assistant.graph_id,
                    created_at=records[0].created_at,
                    updated_at=records[-1].created_at,
                )
                await self._read_metadata(found)
                self.threads[key] = found
                if self.relay.shared:
                    # Made or run by another process: its metadata (its owner
                    # among it) is in the shared runs database.
                    await self._shared.adopt_thread(key)
                return found
        if self.thread_metadata is not None:
            saved = await self.thread_metadata.get(key)
            if saved is not None:  # made, never run (by another process on the file)
                found = ThreadRecord(
                    thread_id=key,
                    created_at=saved.created_at,
                    ttl=saved.ttl,
                    ttl_strategy=saved.ttl_strategy,
                )
                self._known_by(found, saved.metadata)
                self.threads[key] = found
                return found
        if self.relay.shared and await self._shared.adopt_thread(key):
            return self.threads[key]  # a thread of runs in other processes
        return None

    async def _own(self, name: str) -> ThreadRecord | None:
        """The caller's own thread ``name`` (without authentication: the thread ``name``)."""
        found = CALLER.get()
        if found is None:
            return await self.find_key(name)
        who = found[1].id
        for key in (name, scoped_key(who, name)):
            thread = await self.find_key(key)
            if thread is not None and _owner(thread) == who:
                return thread
        return None

    # -- making -----------------------------------------------------------------------

    async def claim_thread(
        self,
        name: str,
        metadata: dict[str, object],
        graph_id: str | None = None,
        ttl: float | None = None,
        ttl_strategy: TTLStrategy = "delete",
    ) -> tuple[ThreadRecord, bool]:
        """The caller's thread ``name``: its own if it has one (False), else a new
        one (True, with ``ttl`` or the server's default), whoever else has a
        thread of that id.

        Raises:
            HTTPException: 422, an id with a ``/``.
        """
        if "/" in name:
            raise HTTPException(422, f"thread_id: one URL path segment, without '/', not {name!r}")
        for _ in range(2):
            own = await self._own(name)
            if own is not None:
                return own, False
            key = name
            found = CALLER.get()
            if found is not None and await self.find_key(name) is not None:
                key = scoped_key(found[1].id, name)  # the id is another's first
            if key in self.threads:
                continue  # made meanwhile (another request): look again
            thread = ThreadRecord(
                thread_id=key,
                metadata=metadata,
                graph_id=graph_id,
                ttl=ttl,
                ttl_strategy=ttl_strategy,
            )
            await self.add_thread(thread)
            return thread, True
        # Only a thread kept from before ids were per owner, with a '/' in its id.
        raise HTTPException(409, f"thread {name!r} cannot be made: its id is taken")

    async def add_thread(self, thread: ThreadRecord) -> None:
        """Know a new thread (and let other server processes know it, or keep its
        metadata beside its checkpoints); one made without a ``ttl`` takes the
        server's default."""
        self.threads[thread.thread_id] = thread
        if thread.temporary:
            return
        if thread.ttl is None:
            thread.ttl, thread.ttl_strategy = self.thread_ttl.seconds, self.thread_ttl.strategy
        try:
            if self.relay.shared:
                await self.relay.thread_created(thread.thread_id, thread.metadata)
            await self.save_metadata(thread)
        except BaseException:
            # Not made (the database is down): a client told to try again
            # must not find it half-made here, and no other process knows it.
            if self.threads.get(thread.thread_id) is thread:
                del self.threads[thread.thread_id]
            raise

    # -- metadata ---------------------------------------------------------------------

    async def save_metadata(self, thread: ThreadRecord) -> None:
        """Keep the thread's metadata beside its checkpoints (nothing without a place)."""
        if self.thread_metadata is not None and not thread.temporary:
            await self.thread_metadata.put(
                thread.thread_id,
                thread.metadata,
                created_at=thread.created_at,
                ttl=thread.ttl,
                ttl_strategy=thread.ttl_strategy,
            )

    async def forget_metadata(self, thread: ThreadRecord) -> None:
        """The thread is deleted: its metadata goes with it."""
        if self.thread_metadata is not None and not thread.temporary:
            await self.thread_metadata.delete(thread.thread_id)

    async def _read_metadata(self, thread: ThreadRecord) -> None:
        if self.thread_metadata is not None:
            saved = await self.thread_metadata.get(thread.thread_id)
            if saved is not None:
                thread.created_at = saved.created_at
                thread.ttl, thread.ttl_strategy = saved.ttl, saved.ttl_strategy
                self._known_by(thread, saved.metadata)

    async def last_change(self, thread: ThreadRecord) -> float | None:
        """When the thread's last checkpoint record was written, by any process
        (None: it has none)."""
        agent = self.thread_assistant(thread).agent
        records = await self.runtime.thread(agent, thread.thread_id).history(path=agent.name)
        return records[-1].created_at if records else None

    def thread_assistant(self, thread: ThreadRecord) -> AssistantRecord:
        """The assistant whose state a thread holds (its last run's, else the first)."""
        if thread.graph_id is not None and thread.graph_id in self.assistants:
            return self.assistants[thread.graph_id]
        return next(iter(self.assistants.values()))

    def _known_by(self, thread: ThreadRecord, metadata: Mapping[str, object]) -> None:
        """Take the thread's saved metadata (and the graph it names, if none is known)."""
        thread.metadata = dict(metadata)
        graph = metadata.get("graph_id")
        if thread.graph_id is None and isinstance(graph, str) and graph in self.assistants:
            thread.graph_id = graph

    async def load_saved(self) -> None:
        """Know the threads the checkpointers already hold, with the metadata kept
        beside them (after a restart)."""
        for assistant in self.assistants.values():
            checkpointer = assistant.agent.checkpointer
            sharing = [a for a in self.assistants.values() if a.agent.checkpointer is checkpointer]
            for info in await self.runtime.saved_threads(assistant.agent):
                if info.thread_id in self.threads:
                    continue
                self.threads[info.thread_id] = ThreadRecord(
                    thread_id=info.thread_id,
                    graph_id=sharing[0].graph_id if len(sharing) == 1 else None,
                    created_at=info.updated_at,
                    updated_at=info.updated_at,
                )
        if self.thread_metadata is None:
            return
        for saved in await self.thread_metadata.all():
            thread = self.threads.get(saved.thread_id)
            if thread is None:  # made, never run
                thread = ThreadRecord(thread_id=saved.thread_id, updated_at=saved.created_at)
                self.threads[saved.thread_id] = thread
            thread.created_at = saved.created_at
            thread.ttl, thread.ttl_strategy = saved.ttl, saved.ttl_strategy
            self._known_by(thread, saved.metadata)
