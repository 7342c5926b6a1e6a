"""What a web page the user opens can do to a server on their machine: nothing.

Cross-site requests (a foreign ``Origin``, a form or ``text/plain`` body, a
re-bound DNS name in ``Host``) are refused before anything runs, on the stream
endpoints' direct path and the routed one alike; origins allowed for CORS get
its headers and work. On uvicorn (asyncio) and hypercorn (trio), in a thread.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from deepactors.server import create_app

from .agents import Probe, blocking_agent
from .conftest import Served

Serve = Callable[..., Served]
EVIL = "https://evil.example"
UI = "http://ui.example"


def say(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def _run_body(text: str = "hi") -> str:
    return json.dumps({"assistant_id": "echo", "input": say(text)})


def _paths(thread_id: str) -> list[str]:
    # The direct path (the two stream endpoints) and routed ones.
    return [
        "/runs/wait",
        "/runs/stream",
        "/runs",
        f"/threads/{thread_id}/runs/wait",
        f"/threads/{thread_id}/runs/stream",
    ]


def test_a_cross_site_request_runs_nothing(serve: Serve) -> None:
    probe = Probe()
    served = serve(create_app({"echo": blocking_agent(probe)}))
    thread_id = served.client().threads.create()["thread_id"]
    body = _run_body()
    with httpx.Client(base_url=served.url) as http:
        for path in _paths(thread_id):
            # What a page on another site may send without a preflight.
            for kind in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data"):
                with_origin = http.post(
                    path, content=body, headers={"Content-Type": kind, "Origin": EVIL}
                )
                assert with_origin.status_code == 403, (path, kind, with_origin.text)
                assert "evil.example" in with_origin.json()["detail"]
                assert "access-control-allow-origin" not in with_origin.headers
                # Even from a browser that sends no Origin: the body is not JSON.
                bare = http.post(path, content=body, headers={"Content-Type": kind})
                assert bare.status_code == 415, (path, kind, bare.text)
                assert "application/json" in bare.json()["detail"]
            # JSON from another site (which needs a preflight CORS never grants).
            for origin in (EVIL, "null", "http://127.0.0.1:1"):
                refused = http.post(
                    path,
                    content=body,
                    headers={"Content-Type": "application/json", "Origin": origin},
                )
                assert refused.status_code == 403, (path, origin, refused.text)
        # An empty form too (it would create a thread).
        assert http.post("/threads", headers={"Content-Type": "text/plain"}).status_code == 415
        # Reading is refused too: a page learns nothing of the threads.
        assert http.get(f"/threads/{thread_id}", headers={"Origin": EVIL}).status_code == 403
        assert probe.calls == 0  # no model was called
        assert list(served.runs.runs) == []  # no run was even created
        assert list(served.runs.threads) == [thread_id]  # nor a thread
        # The same request as JSON, from no page, runs.
        answer = http.post("/runs/wait", content=body, headers={"Content-Type": "application/json"})
        assert answer.status_code == 200
        assert answer.json()["messages"][-1]["content"] == "echo: hi"
    assert probe.calls == 1


def test_a_page_re_bound_to_127_0_0_1_is_refused(serve: Serve) -> None:
    """DNS rebinding: the page's own name, resolved to this machine, is in ``Host``."""
    probe = Probe()
    served = serve(create_app({"echo": blocking_agent(probe)}))
    port = urlsplit(served.url).port
    body = {"assistant_id": "echo", "input": say("hi")}
    with httpx.Client(base_url=served.url) as http:
        for path in ("/runs/wait", "/runs/stream", "/ok", "/threads/search"):
            for host in (f"evil.example:{port}", "evil.example", f"127.0.0.1.evil.example:{port}"):
                refused = http.post(path, json=body, headers={"Host": host})
                assert refused.status_code == 421, (path, host, refused.text)
                # Answered before its body was read: the connection is not reused.
                assert refused.headers["connection"] == "close"
                assert "does not answer to Host" in refused.json()["detail"]
                assert "allowed-host" in refused.json()["detail"]
        assert probe.calls == 0
        for host in (f"localhost:{port}", f"LocalHost:{port}", f"[::1]:{port}", "127.0.0.1"):
            assert http.get("/ok", headers={"Host": host}).status_code == 200, host
        assert http.post("/runs/wait", json=body).status_code == 200


def test_allowed_hosts_are_what_the_host_header_may_name(serve: Serve) -> None:
    served = serve(
        create_app(
            {"echo": blocking_agent(Probe())}, allowed_hosts=("api.example", "b.example:8443")
        )
    )
    with httpx.Client(base_url=served.url) as http:
        for host, status in [
            ("api.example", 200),
            ("api.example:1234", 200),  # a name alone: any port
            ("b.example:8443", 200),
            ("b.example", 421),  # a name with a port: that port only
            ("b.example:8444", 421),
            ("localhost", 421),  # the defaults are replaced
        ]:
            assert http.get("/ok", headers={"Host": host}).status_code == status, host
    anywhere = serve(create_app({"echo": blocking_agent(Probe())}, allowed_hosts=("*",)))
    assert httpx.get(f"{anywhere.url}/ok", headers={"Host": "any.example"}).status_code == 200


def test_allowed_origins_get_cors_headers_and_work(serve: Serve) -> None:
    probe = Probe()
    served = serve(create_app({"echo": blocking_agent(probe)}, cors_origins=(UI + "/",)))
    thread_id = served.client().threads.create()["thread_id"]
    body = {"assistant_id": "echo", "input": say("hi"), "stream_mode": "values"}
    with httpx.Client(base_url=served.url) as http:
        for path in _paths(thread_id):
            preflight = http.options(
                path,
                headers={
                    "Origin": UI,
                    "Access-Control-Request-Method": "POST",
                    "Access-Control-Request-Headers": "content-type",
                },
            )
            assert preflight.status_code == 200, (path, preflight.text)
            assert preflight.headers["access-control-allow-origin"] == UI
            answer = http.post(path, json=body, headers={"Origin": UI})
            assert answer.status_code == 200, (path, answer.text)
            assert answer.headers["access-control-allow-origin"] == UI
            assert "echo: hi" in answer.text or path.endswith("/runs")
            # Another origin, even asking first, is refused.
            other = http.options(
                path, headers={"Origin": EVIL, "Access-Control-Request-Method": "POST"}
            )
            assert other.status_code == 403
            assert http.post(path, json=body, headers={"Origin": EVIL}).status_code == 403
        # A refusal an allowed page gets carries CORS headers, so it can read why.
        wrong = http.post(
            "/runs/wait", content=b"{}", headers={"Origin": UI, "Content-Type": "text/plain"}
        )
        assert wrong.status_code == 415
        assert wrong.headers["access-control-allow-origin"] == UI
        # The server's own origin needs no CORS.
        own = http.post("/runs/wait", json=body, headers={"Origin": served.url})
        assert own.status_code == 200
    anyone = serve(create_app({"echo": blocking_agent(Probe())}, cors_origins=("*",)))
    answer = httpx.post(f"{anyone.url}/runs/wait", json=body, headers={"Origin": EVIL})
    assert answer.status_code == 200
    assert answer.headers["access-control-allow-origin"] == "*"


def test_a_refused_page_is_named_once_in_the_log_with_the_fix(
    serve: Serve, caplog: pytest.LogCaptureFixture
) -> None:
    """A browser shows its user nothing of a refused preflight: the server's log says
    which origin was refused and the option that lets it call, once per origin."""
    served = serve(create_app({"echo": blocking_agent(Probe())}))
    preflight = {"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "x"}
    with caplog.at_level(logging.WARNING, logger="deepactors"), httpx.Client() as http:
        for _ in range(3):
            for path in ("/threads/search", "/runs/stream"):
                answer = http.options(f"{served.url}{path}", headers={"Origin": UI, **preflight})
                assert answer.status_code == 403
        told = [r.getMessage() for r in caplog.records if r.name.startswith("deepactors")]
        assert len(told) == 1, told
        assert f"--cors-origin {UI}" in told[0]
        # Each origin once, and only the first few: a page cannot fill the log.
        for n in range(40):
            origin = f"http://page{n}.example"
            http.post(f"{served.url}/threads", json={}, headers={"Origin": origin})
        told = [r.getMessage() for r in caplog.records if r.name.startswith("deepactors")]
        assert len(told) == 8
        assert len(set(told)) == 8
        # The server's own origin is not refused, nor logged.
        caplog.clear()
        http.post(f"{served.url}/threads", json={}, headers={"Origin": served.url})
        assert caplog.records == []
