"""Authentication across ``deepactors serve --workers 2`` sharing one PostgreSQL database.

Issue 33, "the same against a ``--workers 2`` PostgreSQL server": two users with
API keys from a keys file; Alice's thread, runs and store items stay hers
whichever of the two worker processes a request reaches.

The two processes share one port, so the kernel hands each new connection to
one of them. The test tells which from ``/proc``: the worker whose file
descriptors hold the server end of the test's one open TCP connection. Every
check is one request on a fresh connection (a new ``langgraph-sdk`` client, or
a raw ``httpx`` one without a credential) that the health check opened first,
so the process answering it is known before it is sent (hypercorn may close a
connection after an error response, so one connection is not trusted with more
than one checked request); checks go on until each has been answered by both
processes. The process that has never seen Alice's thread is thus first asked
about it by a chosen request: one of its runs, by Bob (first test); the thread
itself, by its owner (second test, Carol's own thread). That process finds the
thread's state in the shared checkpoints before it knows its owner from the
relay. One server per loop serves the module's tests (a start costs seconds).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient

from tests.pgserver import PostgresServer, postgres_bindir

from .serve_process import serve_process

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path("/proc/net/tcp").is_file(), reason="needs Linux /proc"),
    pytest.mark.skipif(
        postgres_bindir() is None, reason="PostgreSQL is not installed (no initdb found)"
    ),
]

ALICE = "alice-key-0123456789abcdef"
BOB = "bob-key-0123456789abcdef00"
CAROL = "carol-key-0123456789abcdef0"
CONNECTIONS_PER_CHECK = 40
"""Fresh connections tried per check before giving up on reaching both processes (the
kernel hands a warm, idle server's connections to one worker often several times running)."""

AGENT_MODULE = """
import os

from deepactors import AssistantMessage, ToolCall, ToolRuntime, create_deep_agent
from deepactors.models import FunctionModel, ModelRequest


async def whoami(runtime: ToolRuntime) -> str:
    \"\"\"Say who the run acts for, and in which process.\"\"\"
    return f"acting for {runtime.identity.id} in {os.getpid()}"


def model(request: ModelRequest) -> AssistantMessage | str:
    if len(request.messages) == 1:
        return AssistantMessage(tool_calls=[ToolCall(name="whoami", args={})])
    return "done: " + request.messages[-1].text


agent = create_deep_agent(FunctionModel(model), tools=[whoami])
"""

# --- which worker holds a connection (/proc) ------------------------------------

ESTABLISHED = "01"


def _tcp() -> list[tuple[int, int, str, int]]:
    """IPv4 TCP sockets of this machine: (local port, remote port, state, inode)."""
    rows = []
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, remote = (int(f.rsplit(":", 1)[1], 16) for f in fields[1:3])
        rows.append((local, remote, fields[3], int(fields[9])))
    return rows


def _socket_inodes(pid: int) -> set[int]:
    inodes: set[int] = set()
    try:
        fds = list(Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return inodes
    for fd in fds:
        try:
            link = os.readlink(fd)
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(int(link[len("socket:[") : -1]))
    return inodes


def _descendants(root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(stat.parent.name))
    found, todo = set(), [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def serving_pid(server_pid: int, port: int) -> int:
    """The worker holding the server end of this process's one open connection to ``port``."""
    tcp = _tcp()
    mine = _socket_inodes(os.getpid())
    # A set: /proc/net/tcp is read page by page, and a socket table that changes
    # between two pages (other tests open and close connections) repeats rows.
    ours = {lp for lp, rp, st, inode in tcp if st == ESTABLISHED and rp == port and inode in mine}
    assert len(ours) == 1, f"expected one open connection to the server, found {sorted(ours)}"
    (local,) = ours
    theirs = {inode for lp, rp, st, inode in tcp if st == ESTABLISHED and (lp, rp) == (port, local)}
    holders = [pid for pid in _descendants(server_pid) if _socket_inodes(pid) & theirs]
    assert len(holders) == 1, f"not one worker holds the connection: {holders}"
    return holders[0]


# --- the server and its two workers ---------------------------------------------


class Workers:
    """The served URL, and which worker process a fresh connection reaches."""

    def __init__(self, url: str, server_pid: int) -> None:
        self.url = url
        self.port = int(url.rsplit(":", 1)[1])
        self.server_pid = server_pid
        self.seen: set[int] = set()

    def client(self, key: str) -> SyncLangGraphClient:
        return get_sync_client(url=self.url, api_key=key, timeout=20)

    def reached(self, http: Any) -> int:
        """Open ``http``'s connection with the health check; the worker it reached."""
        http.get("/ok")
        pid = serving_pid(self.server_pid, self.port)
        self.seen.add(pid)
        return pid

    def on(self, pid: int, key: str, call: Callable[[SyncLangGraphClient], Any]) -> Any:
        """``call`` on a fresh connection that reached worker ``pid``."""
        for _ in range(CONNECTIONS_PER_CHECK):
            with self.client(key) as client:
                if self.reached(client.http) == pid:
                    return call(client)
        pytest.fail(f"{CONNECTIONS_PER_CHECK} fresh connections never reached worker {pid}")

    def on_both(self, key: str | None, checks: dict[str, Callable[[Any], None]]) -> None:
        """Each check, in order, answered by both workers: one check per fresh
        connection, given the sdk client of ``key`` (a raw ``httpx`` client for
        None: no credential)."""
        left: dict[int, list[str]] = {}
        for _ in range(CONNECTIONS_PER_CHECK * len(checks)):
            with httpx.Client(base_url=self.url) if key is None else self.client(key) as client:
                http = client if key is None else client.http
                pid = self.reached(http)
                todo = left.setdefault(pid, list(checks))
                if todo:
                    name = todo.pop(0)
                    try:
                        checks[name](client)
                    except Exception as exc:
                        raise AssertionError(f"{name!r} through worker {pid}: {exc!r}") from exc
            if len(left) == 2 and not any(left.values()):
                return
        pytest.fail(f"checks left undone per worker: {left}")


@dataclass
class Alices:
    """What Alice made, all through one worker (``home``)."""

    home: int
    tid: str
    run_id: str
    values: dict[str, Any]


@pytest.fixture(scope="module", params=["asyncio", "trio"])
def server(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    postgres_server: PostgresServer,
) -> Iterator[tuple[str, int]]:
    """``deepactors serve --workers 2 --db <PostgreSQL> --auth keys-file:...`` on the
    loop, for the module (a start costs seconds): its URL and pid. The tests keep
    apart by user: each test's owner makes her own threads, and the other
    worker has never seen them."""
    folder = tmp_path_factory.mktemp("auth-workers")
    (folder / "auth_workers_agent.py").write_text(AGENT_MODULE)
    keys = folder / "keys.txt"
    keys.write_text(f"# key user\n{ALICE} alice\n{BOB} bob\n{CAROL} carol\n")
    dsn = postgres_server.new_database()
    args = ["auth_workers_agent:agent", "--db", dsn, "--loop", str(request.param)]
    args += ["--workers", "2", "--auth", f"keys-file:{keys}"]
    with serve_process(args, folder) as (url, process):
        yield url, process.pid


@pytest.fixture
def workers(server: tuple[str, int]) -> Workers:
    """The module's server, as this test reaches it (the workers it saw are its own)."""
    return Workers(*server)


def _input(text: str) -> dict[str, object]:
    return {"messages": [{"role": "user", "content": text}]}


def alice_makes_a_thread(workers: Workers, key: str = ALICE, user: str = "alice") -> Alices:
    """Alice (or the user of ``key``), through one worker only: a thread (she
    cannot name another owner), run once (its state is then in the shared
    checkpoints), and a store item."""
    with workers.client(key) as alice:
        home = workers.reached(alice.http)
    made = workers.on(home, key, lambda c: c.threads.create(metadata={"owner": "bob", "a": 1}))
    assert made["metadata"] == {"owner": user, "a": 1}
    tid = made["thread_id"]
    done = workers.on(home, key, lambda c: c.runs.wait(tid, "agent", input=_input("hi")))
    assert done["messages"][-1]["content"] == f"done: acting for {user} in {home}"
    runs = workers.on(home, key, lambda c: c.runs.list(tid))
    workers.on(home, key, lambda c: c.store.put_item([user, "notes"], "k", {"v": 1}))
    values = workers.on(home, key, lambda c: c.threads.get_state(tid))["values"]
    return Alices(home=home, tid=tid, run_id=runs[0]["run_id"], values=values)


def status_of(call: Callable[[], Any]) -> int:
    try:
        call()
    except httpx.HTTPStatusError as exc:
        return exc.response.status_code
    return 200


def answers(status: int, call: Callable[[SyncLangGraphClient], Any]) -> Callable[[Any], None]:
    """A check: ``call`` answers ``status``."""

    def check(client: SyncLangGraphClient) -> None:
        got = status_of(lambda: call(client))
        assert got == status, f"answered {got}, not {status}"

    return check


# --- the tests ------------------------------------------------------------------


def test_users_keep_apart_whichever_worker_answers(workers: Workers) -> None:
    made = alice_makes_a_thread(workers)
    tid, run_id = made.tid, made.run_id

    # Bob: Alice's thread does not exist for him, through either worker. Its run
    # first: the worker that never saw the thread learns of it by Bob asking.
    ns = ["alice", "notes"]
    workers.on_both(
        BOB,
        {
            "runs.get": answers(404, lambda b: b.runs.get(tid, run_id)),
            "runs.join": answers(404, lambda b: b.runs.join(tid, run_id)),
            "runs.cancel": answers(404, lambda b: b.runs.cancel(tid, run_id)),
            "runs.list": answers(404, lambda b: b.runs.list(tid)),
            "runs.wait": answers(404, lambda b: b.runs.wait(tid, "agent", input=_input("x"))),
            "threads.get": answers(404, lambda b: b.threads.get(tid)),
            "get_state": answers(404, lambda b: b.threads.get_state(tid)),
            "get_history": answers(404, lambda b: b.threads.get_history(tid)),
            "update_state": answers(404, lambda b: b.threads.update_state(tid, {"messages": []})),
            "threads.update": answers(404, lambda b: b.threads.update(tid, metadata={"x": 1})),
            "threads.delete": answers(404, lambda b: b.threads.delete(tid)),
            "store get": answers(403, lambda b: b.store.get_item(ns, "k")),
            "store put": answers(403, lambda b: b.store.put_item(ns, "k", {"v": 2})),
            "store delete": answers(403, lambda b: b.store.delete_item(ns, "k")),
            "store search": answers(403, lambda b: b.store.search_items(["alice"])),
            "threads.search": lambda b: _equal(b.threads.search(), []),
            "threads.count": lambda b: _equal(b.threads.count(), 0),
            "list_namespaces": lambda b: _equal(b.store.list_namespaces()["namespaces"], []),
        },
    )

    # Alice, through either worker: her thread, owned by her (the owner survived
    # the relay), its state, run and item as she left them.
    workers.on_both(
        ALICE,
        {
            "threads.get": lambda a: _equal(
                {k: a.threads.get(tid)["metadata"].get(k) for k in ("owner", "a")},
                {"owner": "alice", "a": 1},
            ),
            "get_state": lambda a: _equal(a.threads.get_state(tid)["values"], made.values),
            "runs.list": lambda a: _equal([r["run_id"] for r in a.runs.list(tid)], [run_id]),
            "runs.get": lambda a: _equal(a.runs.get(tid, run_id)["status"], "success"),
            "store get": lambda a: _equal(a.store.get_item(ns, "k")["value"], {"v": 1}),
            "threads.search": lambda a: _equal(
                [(t["thread_id"], t["metadata"]["owner"]) for t in a.threads.search()],
                [(tid, "alice")],
            ),
        },
    )

    # No credential, or a wrong one: 401 through either worker.
    unauthenticated: dict[str, Callable[[Any], None]] = {}
    for who, headers in (("no key", {}), ("bad key", {"x-api-key": "not-a-key-0123456789"})):
        for method, path, body in (
            ("GET", f"/threads/{tid}", None),
            ("GET", f"/threads/{tid}/runs/{run_id}", None),
            ("POST", "/threads/search", {}),
            ("POST", "/threads", {}),
            ("PUT", "/store/items", {"namespace": ns, "key": "k", "value": {}}),
        ):
            unauthenticated[f"{who} {method} {path}"] = _raw(401, method, path, body, headers)
    workers.on_both(None, unauthenticated)

    # All of it through the two workers of this server, Alice's home among them.
    assert len(workers.seen) == 2, workers.seen
    assert made.home in workers.seen
    assert workers.seen <= _descendants(workers.server_pid)


def test_the_owner_first_reaches_her_thread_through_the_other_worker(workers: Workers) -> None:
    # The worker that never saw the thread finds its state in the shared
    # checkpoints: it must know the thread is Alice's (its owner, from the relay)
    # on her very first request there, not only from her second one on. (Carol
    # here: the server is the module's, and the test above counts Alice's threads.)
    made = alice_makes_a_thread(workers, CAROL, "carol")
    workers.on_both(
        CAROL,
        {
            "threads.get": lambda c: _equal(c.threads.get(made.tid)["metadata"]["owner"], "carol"),
        },
    )


def _equal(got: Any, expected: Any) -> None:
    assert got == expected


def _raw(
    status: int, method: str, path: str, body: Any, headers: dict[str, str]
) -> Callable[[httpx.Client], None]:
    def check(http: httpx.Client) -> None:
        response = http.request(method, path, json=body, headers=headers)
        assert response.status_code == status, response.text

    return check
