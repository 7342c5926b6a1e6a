"""Authentication and per-user authorization, over real sockets with ``langgraph-sdk``.

Two users with their own API keys share one server: neither can list, read,
stream, join, cancel, update, delete or resume the other's threads and runs, nor
read the other's store items; a request without a valid credential gets 401
everywhere but the health check; the caller's identity reaches the run's tools.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from langgraph_sdk.client import SyncLangGraphClient
from starlette.routing import Mount, Route, WebSocketRoute

from deepactors import AssistantMessage, ToolCall, ToolRuntime, create_deep_agent
from deepactors.models import FunctionModel, ModelRequest
from deepactors.persistence import MemoryStore
from deepactors.server import create_app
from deepactors.server.auth import Auth, AuthRequest, Identity, RuleContext, api_keys
from deepactors.server.v3 import refuse_websocket

from .conftest import Served

ALICE = "alice-key-0123456789abcdef"
BOB = "bob-key-0123456789abcdef00"
ROOT = "root-key-0123456789abcdef0"


class Calls:
    """Model calls the served agent made (from the server's thread)."""

    def __init__(self) -> None:
        self.n = 0


def whoami_agent(calls: Calls) -> Any:
    async def whoami(runtime: ToolRuntime) -> str:
        """Say who the run acts for."""
        return f"acting for {runtime.identity.id}"

    def model(request: ModelRequest) -> AssistantMessage | str:
        calls.n += 1
        if len(request.messages) == 1:
            return AssistantMessage(tool_calls=[ToolCall(name="whoami", args={})])
        return f"done: {request.messages[-1].text}"

    return create_deep_agent(FunctionModel(model), tools=[whoami], name="agent")


def keyed_auth() -> Auth:
    auth = api_keys({ALICE: "alice", BOB: "bob", ROOT: Identity(id="root", permissions={"admin"})})

    @auth.on("threads")
    async def admins_see_all(ctx: RuleContext) -> bool | None:
        return True if "admin" in ctx.identity.permissions else None

    return auth


@pytest.fixture
def served(serve: Callable[..., Served]) -> tuple[Served, Calls]:
    calls = Calls()
    app = create_app(whoami_agent(calls), store=MemoryStore(), auth=keyed_auth())
    return serve(app), calls


def client(served: Served, key: str) -> SyncLangGraphClient:
    return served.client(api_key=key)


def status_of(call: Callable[[], Any]) -> int:
    try:
        call()
    except httpx.HTTPStatusError as exc:
        return exc.response.status_code
    return 200


def test_users_cannot_touch_each_others_threads_runs_or_store(
    served: tuple[Served, Calls],
) -> None:
    server, calls = served
    alice, bob = client(server, ALICE), client(server, BOB)
    thread = alice.threads.create(metadata={"owner": "bob", "topic": "mine"})
    assert thread["metadata"]["owner"] == "alice"  # a client cannot choose the owner
    tid = thread["thread_id"]
    result = alice.runs.wait(tid, "agent", input={"messages": [{"role": "user", "content": "hi"}]})
    assert "acting for alice" in json.dumps(result)
    run = alice.runs.list(tid)[0]
    alice.store.put_item(["alice", "notes"], "k", {"v": 1})
    before = (alice.threads.get_state(tid), calls.n)

    refused = {
        "get": lambda: bob.threads.get(tid),
        "state": lambda: bob.threads.get_state(tid),
        "history": lambda: bob.threads.get_history(tid),
        "update": lambda: bob.threads.update_state(tid, {"messages": []}),
        "patch": lambda: bob.threads.update(tid, metadata={"owner": "bob"}),
        "delete": lambda: bob.threads.delete(tid),
        "runs": lambda: bob.runs.list(tid),
        "run": lambda: bob.runs.get(tid, run["run_id"]),
        "join": lambda: bob.runs.join(tid, run["run_id"]),
        "cancel": lambda: bob.runs.cancel(tid, run["run_id"]),
        "resume": lambda: bob.runs.wait(tid, "agent", input=None),
        "new run": lambda: bob.runs.wait(tid, "agent", input={"messages": "x"}),
        "stream": lambda: list(bob.runs.stream(tid, "agent", input={"messages": "x"})),
    }
    for name, call in refused.items():
        assert status_of(call) == 404, name
    for name, call in {
        "store get": lambda: bob.store.get_item(["alice", "notes"], "k"),
        "store put": lambda: bob.store.put_item(["alice", "notes"], "k", {"v": 2}),
        "store delete": lambda: bob.store.delete_item(["alice", "notes"], "k"),
        "store search": lambda: bob.store.search_items(["alice"]),
    }.items():
        assert status_of(call) == 403, name
    assert bob.threads.search() == []
    assert bob.threads.count() == 0
    assert bob.store.list_namespaces()["namespaces"] == []
    bob.runs.cancel_many(status="all")  # cancels nothing of Alice's
    # Alice's thread, runs and items are as they were, and nothing ran for Bob.
    assert (alice.threads.get_state(tid), calls.n) == before
    assert alice.threads.get(tid)["metadata"]["owner"] == "alice"
    assert alice.store.get_item(["alice", "notes"], "k")["value"] == {"v": 1}
    assert [t["thread_id"] for t in alice.threads.search()] == [tid]
    # A rule lets an admin read every thread.
    assert client(server, ROOT).threads.get(tid)["thread_id"] == tid


def test_no_or_a_bad_credential_is_401_everywhere_but_the_health_check(
    served: tuple[Served, Calls],
) -> None:
    server, calls = served
    app = server.app
    with httpx.Client(base_url=server.url) as http:
        for route in app.routes:
            if isinstance(route, Mount):
                # The built-in page's static files: open (no secrets; its API calls are checked).
                assert route.path == "/ui"
                for name in ("/ui/", "/ui/app.js", "/ui/stream.js"):
                    assert http.get(name).status_code == 200, name
                assert http.get("/ui/secrets.txt").status_code == 401  # only those are open
                continue
            if isinstance(route, WebSocketRoute):
                # The one WebSocket route refuses every connection, saying why (the
                # v3 session's WebSocket transport is not served): nothing to guard.
                assert route.endpoint is refuse_websocket
                continue
            assert isinstance(route, Route)
            path = route.path.replace("{thread_id}", "t").replace("{run_id}", "r")
            for field in ("assistant_id", "checkpoint_id"):
                path = path.replace("{" + field + "}", "x")
            for method in sorted(route.methods or ()):
                if method == "HEAD":
                    continue
                for headers in ({}, {"authorization": "Bearer nope-nope-nope-nope"}):
                    response = http.request(
                        method, path, headers={**headers, "content-type": "application/json"}
                    )
                    expected = 200 if path in ("/", "/ok", "/ready") else 401
                    assert response.status_code == expected, (method, path, headers)
        assert calls.n == 0


def test_a_streamed_run_acts_for_its_caller(served: tuple[Served, Calls]) -> None:
    server, _ = served
    alice = client(server, ALICE)
    parts = list(
        alice.runs.stream(None, "agent", input={"messages": [{"role": "user", "content": "hi"}]})
    )
    assert "acting for alice" in json.dumps([p.data for p in parts])


# Ids as identity providers hand them out (e-mail ``sub`` claims), and their labels.
ODD_IDS = {
    "alice.smith@example.com": "alice%2Esmith@example%2Ecom",
    "team/ops": "team/ops",
    "zoë.müller": "zoë%2Emüller",
    "50%.off": "50%25%2Eoff",
    "%2E": "%252E",
}


def test_any_user_id_can_use_the_store(serve: Callable[..., Served]) -> None:
    """A user id with a ``.`` (which namespace labels never hold) starts its
    namespaces written as a label; slashes and any letter stay as they are."""
    keys = {f"key-{n:02d}-0123456789abcdef": who for n, who in enumerate(ODD_IDS)}

    async def remember(runtime: ToolRuntime) -> str:
        """Note who asked, in the asker's store."""
        assert runtime.store is not None
        namespace = (runtime.identity.namespace_label, "notes")
        await runtime.store.put(namespace, "from-run", {"by": runtime.identity.id})
        return "noted"

    def model(request: ModelRequest) -> AssistantMessage | str:
        if len(request.messages) == 1:
            return AssistantMessage(tool_calls=[ToolCall(name="remember", args={})])
        return "done"

    agent = create_deep_agent(FunctionModel(model), tools=[remember], name="agent")
    server = serve(create_app(agent, store=MemoryStore(), auth=api_keys(keys)))
    users = {who: client(server, key) for key, who in keys.items()}
    for who, label in ODD_IDS.items():
        user = users[who]
        user.store.put_item([label, "notes"], "k", {"who": who})
        assert user.store.get_item([label, "notes"], "k")["value"] == {"who": who}
        user.runs.wait(None, "agent", input={"messages": [{"role": "user", "content": "hi"}]})
        # What the run wrote is the user's, under the same label.
        assert user.store.get_item([label, "notes"], "from-run")["value"] == {"by": who}
        found = user.store.search_items([label])["items"]
        assert sorted(i["key"] for i in found) == ["from-run", "k"]
        assert [i["namespace"] for i in found] == [[label, "notes"]] * 2
        assert user.store.list_namespaces()["namespaces"] == [[label, "notes"]]
        assert len(user.store.search_items([])["items"]) == 2  # its own, and only those
    # Each label is its user's alone, however near another's it is spelt.
    alice = users["alice.smith@example.com"]
    for other in ("team/ops", "alice%2esmith@example%2ecom", "alice%2Esmith@example%2Ecom%"):
        assert status_of(lambda o=other: alice.store.put_item([o, "x"], "k", {})) == 403, other
    assert status_of(lambda: alice.store.get_item(["%2E", "notes"], "k")) == 403
    # The id as it is, with its '.': refused with the way to write it.
    with httpx.Client(base_url=server.url) as http:
        raw = http.put(
            "/store/items",
            json={"namespace": ["alice.smith@example.com"], "key": "k", "value": {}},
            headers={"x-api-key": next(iter(keys))},
        )
    assert raw.status_code == 422
    assert "%2E" in raw.text
    for who in ODD_IDS:
        users[who].store.delete_item([ODD_IDS[who], "notes"], "k")
        assert users[who].store.get_item([ODD_IDS[who], "notes"], "k") is None


# --- JWT ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def rsa_key() -> Any:
    from cryptography.hazmat.primitives.asymmetric import rsa

    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture
def jwks_url(rsa_key: Any) -> Iterator[str]:
    """A JWKS endpoint on 127.0.0.1 (an identity provider's key set)."""
    import jwt

    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(rsa_key.public_key()))
    body = json.dumps({"keys": [{**jwk, "kid": "k1", "use": "sig", "alg": "RS256"}]}).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/jwks.json"
    server.shutdown()
    server.server_close()


def token(key: Any, **claims: Any) -> str:
    import jwt

    base = {"iss": "https://idp.test", "aud": "deepactors", "exp": time.time() + 60}
    return jwt.encode({**base, **claims}, key, algorithm="RS256", headers={"kid": "k1"})


def test_jwt_bearer_tokens_from_a_jwks(
    serve: Callable[..., Served], rsa_key: Any, jwks_url: str
) -> None:
    from deepactors.server.auth import jwt_bearer

    auth = jwt_bearer(issuer="https://idp.test", audience="deepactors", jwks_url=jwks_url)
    server = serve(create_app(whoami_agent(Calls()), auth=auth))
    good = token(rsa_key, sub="carol", scope="read write")
    with httpx.Client(base_url=server.url) as http:
        made = http.post("/threads", json={}, headers={"authorization": f"Bearer {good}"})
        assert made.status_code == 200
        assert made.json()["metadata"]["owner"] == "carol"
        for bad in (
            token(rsa_key, sub="carol", exp=time.time() - 120),  # expired
            token(rsa_key, sub="carol", aud="someone-else"),
            token(rsa_key, sub="carol", iss="https://evil.test"),
            good[:-4] + "AAAA",  # signature broken
        ):
            refused = http.post("/threads", json={}, headers={"authorization": f"Bearer {bad}"})
            assert refused.status_code == 401


async def test_an_authenticator_sees_the_request() -> None:
    seen: list[AuthRequest] = []

    async def who(request: AuthRequest) -> Identity | None:
        seen.append(request)
        return Identity(id="x") if request.token == "t" * 20 else None

    auth = Auth(who)
    request = AuthRequest(method="GET", path="/threads", headers={"x-api-key": "t" * 20})
    assert (await auth.identify(request)).id == "x"
    assert seen[0].path == "/threads"
