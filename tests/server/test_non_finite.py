"""Non-finite numbers in request bodies (issue 34): refused with 422, nothing kept.

Python's json and pydantic-core both read ``NaN``, ``Infinity`` and ``-Infinity``
(and ``1e999`` overflows to infinity), but JSON has no such numbers: one stored
in thread metadata or a store item made every later response holding it a 500.
Each JSON body of the server refuses them with a 422 naming the field, before
anything is created or stored, on uvicorn (asyncio) and hypercorn (trio).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from deepactors import (
    AssistantMessage,
    Command,
    ToolCall,
    ToolMessage,
    create_deep_agent,
    tool,
)
from deepactors.models import FunctionModel, ModelRequest
from deepactors.persistence import MemoryStore, SqliteCheckpointer, SqliteStore
from deepactors.server import create_app

from .agents import Probe, blocking_agent
from .conftest import Served

Serve = Callable[..., Served]
JSON = {"Content-Type": "application/json"}
NON_FINITE = ["NaN", "Infinity", "-Infinity", "1e999", "-1E+400"]


def _send(http: httpx.Client, method: str, path: str, body: str) -> httpx.Response:
    # Raw text: httpx's own json= would refuse to encode the NaN.
    return http.request(method, path, content=body.encode(), headers=JSON)


def _refused(answer: httpx.Response, field: str) -> None:
    assert answer.status_code == 422, answer.text
    detail = answer.json()["detail"]
    assert detail.startswith(f"{field}: "), detail
    assert "not a finite number" in detail, detail


def _searches_work(http: httpx.Client) -> list[dict[str, Any]]:
    found = http.post("/threads/search", json={})
    assert found.status_code == 200, found.text
    assert http.post("/threads/count", json={}).status_code == 200
    result: list[dict[str, Any]] = found.json()
    return result


def test_a_thread_created_with_nan_metadata_is_refused_and_not_created(serve: Serve) -> None:
    served = serve(create_app({"echo": blocking_agent(Probe())}))
    with httpx.Client(base_url=served.url) as http:
        for number in NON_FINITE:
            body = f'{{"thread_id": "t-bad", "metadata": {{"ok": 1, "a": {number}}}}}'
            _refused(_send(http, "POST", "/threads", body), "metadata.a")
            assert http.get("/threads/t-bad").status_code == 404
        assert _searches_work(http) == []
        # A string that merely spells NaN is a string, kept as it is.
        created = _send(http, "POST", "/threads", '{"metadata": {"a": "NaN", "b": 1e308}}')
        assert created.status_code == 200, created.text
        assert created.json()["metadata"]["a"] == "NaN"
        assert created.json()["metadata"]["b"] == 1e308
        assert len(_searches_work(http)) == 1


def test_a_patch_with_infinity_is_refused_and_leaves_the_thread_as_it_was(
    serve: Serve,
) -> None:
    served = serve(create_app({"echo": blocking_agent(Probe())}))
    with httpx.Client(base_url=served.url) as http:
        created = http.post("/threads", json={"metadata": {"keep": 1.5}})
        thread_id = created.json()["thread_id"]
        for number in NON_FINITE:
            body = f'{{"metadata": {{"list": [1, {{"deep": {number}}}]}}}}'
            _refused(_send(http, "PATCH", f"/threads/{thread_id}", body), "metadata.list.1.deep")
        thread = http.get(f"/threads/{thread_id}")
        assert thread.status_code == 200, thread.text
        assert thread.json()["metadata"] == created.json()["metadata"]
        assert [t["thread_id"] for t in _searches_work(http)] == [thread_id]
        patched = http.patch(f"/threads/{thread_id}", json={"metadata": {"more": 2}})
        assert patched.status_code == 200, patched.text


def test_a_store_value_with_nan_is_not_stored_even_across_a_restart(
    serve: Serve, tmp_path: Path
) -> None:
    path = tmp_path / "store.db"
    served = serve(create_app({"echo": blocking_agent(Probe())}, store=SqliteStore(path)))
    with httpx.Client(base_url=served.url) as http:
        for number in NON_FINITE:
            body = f'{{"namespace": ["m"], "key": "k", "value": {{"x": {{"y": {number}}}}}}}'
            _refused(_send(http, "PUT", "/store/items", body), "value.x.y")
        _refused(_send(http, "POST", "/store/items/search", '{"filter": {"x": NaN}}'), "filter.x")
    served.stop()
    # After a restart on the same file: nothing was stored, and reads work.
    served = serve(create_app({"echo": blocking_agent(Probe())}, store=SqliteStore(path)))
    with httpx.Client(base_url=served.url) as http:
        item = http.get("/store/items", params={"namespace": "m", "key": "k"})
        assert item.status_code == 200, item.text
        assert item.json() is None
        found = http.post("/store/items/search", json={"namespace_prefix": ["m"]})
        assert found.status_code == 200, found.text
        assert found.json()["items"] == []
        assert http.put(
            "/store/items", json={"namespace": ["m"], "key": "k", "value": {"x": 1}}
        ).status_code in (200, 204)
        found = http.post("/store/items/search", json={"filter": {"x": 1}})
        assert [i["key"] for i in found.json()["items"]] == ["k"]


def _every_json_body(thread_id: str) -> list[tuple[str, str, str, str]]:
    """(method, path, body, field named) for each JSON input, each holding a NaN."""
    cases: list[tuple[str, str, str, str]] = [
        ("POST", "/threads", '{"metadata": {"a": NaN}}', "metadata.a"),
        ("PATCH", f"/threads/{thread_id}", '{"metadata": {"a": NaN}}', "metadata.a"),
        ("POST", "/threads/search", '{"metadata": {"a": NaN}}', "metadata.a"),
        ("POST", "/threads/search", '{"values": {"a": NaN}}', "values.a"),
        ("POST", "/threads/count", '{"metadata": {"a": NaN}}', "metadata.a"),
        ("POST", f"/threads/{thread_id}/state", '{"values": {"files": NaN}}', "values.files"),
        ("POST", f"/threads/{thread_id}/history", '{"metadata": {"a": NaN}}', "metadata.a"),
        ("PUT", "/store/items", '{"namespace": ["n"], "key": "k", "value": {"a": NaN}}', "value.a"),
        ("POST", "/store/items/search", '{"filter": {"a": NaN}}', "filter.a"),
        ("POST", "/store/namespaces", '{"limit": NaN}', "limit"),
        ("POST", "/assistants/search", '{"metadata": {"a": NaN}}', "metadata.a"),
        ("POST", "/assistants/count", '{"metadata": {"a": NaN}}', "metadata.a"),
    ]
    run_fields = [
        ('"input": {"messages": [{"role": "user", "content": NaN}]}', "input.messages.0.content"),
        ('"config": {"configurable": {"a": NaN}}', "config.configurable.a"),
        ('"context": {"a": NaN}', "context.a"),
        ('"metadata": {"a": NaN}', "metadata.a"),
        ('"command": {"resume": {"a": NaN}}', "command.resume.a"),
        ('"after_seconds": NaN', "after_seconds"),
    ]
    for prefix in ("", f"/threads/{thread_id}"):
        for tail in ("/runs", "/runs/stream", "/runs/wait"):
            for text, field in run_fields:
                body = f'{{"assistant_id": "echo", {text}}}'
                cases.append(("POST", prefix + tail, body, field))
    return cases


def test_every_json_body_refuses_nan(serve: Serve) -> None:
    probe = Probe()
    served = serve(create_app({"echo": blocking_agent(probe)}, store=MemoryStore()))
    with httpx.Client(base_url=served.url) as http:
        created = http.post("/threads", json={"metadata": {"keep": 1}})
        thread_id = created.json()["thread_id"]
        state = http.get(f"/threads/{thread_id}/state").json()
        for method, path, body, field in _every_json_body(thread_id):
            answer = _send(http, method, path, body)
            assert answer.status_code == 422, (method, path, body, answer.text)
            assert answer.json()["detail"].startswith(f"{field}: "), (path, answer.text)
        # Nothing ran, nothing changed, nothing was stored; reads all still work.
        assert probe.calls == 0
        assert list(served.runs.runs) == []
        assert [t["thread_id"] for t in _searches_work(http)] == [thread_id]
        assert http.get(f"/threads/{thread_id}").json()["metadata"] == created.json()["metadata"]
        assert http.get(f"/threads/{thread_id}/state").json() == state
        found = http.post("/store/items/search", json={})
        assert found.status_code == 200, found.text
        assert found.json()["items"] == []


def _nan_writing_agent(checkpointer: Any) -> Any:
    """Calls a tool that writes NaN into its todos and its structured response, then stops."""

    @tool
    def rate() -> Command:
        """Rate the work."""
        return Command(
            update={
                "todos": [{"content": "rate", "status": "pending", "score": float("nan")}],
                "structured_response": {"score": float("nan")},
            }
        )

    def answer(request: ModelRequest) -> AssistantMessage:
        if isinstance(request.messages[-1], ToolMessage):
            return AssistantMessage(content=request.messages[-1].text)
        return AssistantMessage(tool_calls=[ToolCall(name="rate", args={})])

    return create_deep_agent(FunctionModel(answer), tools=[rate], checkpointer=checkpointer)


def test_nan_written_by_a_tool_leaves_state_and_history_readable(
    serve: Serve, tmp_path: Path
) -> None:
    agent = _nan_writing_agent(SqliteCheckpointer(tmp_path / "t.db"))
    served = serve(create_app({"nan": agent}))
    run = {"assistant_id": "nan", "input": {"messages": [{"role": "user", "content": "go"}]}}
    with httpx.Client(base_url=served.url, timeout=30) as http:
        thread_id = http.post("/threads", json={}).json()["thread_id"]
        for _ in range(2):  # the second run reads back what the first saved
            ran = http.post(f"/threads/{thread_id}/runs/wait", json=run)
            assert ran.status_code == 200, ran.text
            state = http.get(f"/threads/{thread_id}/state")
            assert state.status_code == 200, state.text
            history = http.post(f"/threads/{thread_id}/history", json={})
            assert history.status_code == 200, history.text
        assert "the tool's state update was refused" in ran.json()["messages"][-1]["content"]
        assert state.json()["values"]["todos"] == []
        assert state.json()["values"]["structured_response"] is None
