"""One vocabulary of limits: a run's timeout, recursion limit and budget, one rule each.

The facade, a thread handle, a server request and a remote parent's limits on
the wire all read them through ``deepactors.limits``: a value is refused (or
taken) the same way on every road. And one place picks the ASGI server of a loop.
"""

from __future__ import annotations

import json
import math
import socket
from typing import Any

import anyio
import httpx
import pytest
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from deepactors import Budget, create_deep_agent, open_runtime
from deepactors._core.asgi import asgi_server_for, serve_here
from deepactors.errors import ConfigurationError, InputError
from deepactors.langchain.views import values_to_lc
from deepactors.limits import LIMITS_KEY, NO_LIMITS, Limits, seconds, steps, ttl_seconds
from deepactors.messages import AssistantMessage, Usage, UserMessage
from deepactors.models import FunctionModel
from deepactors.remote import read_limits
from deepactors.server._run_inputs import run_input_of
from deepactors.server._schemas import RunCreate
from tests.waiting import wait_until

pytestmark = pytest.mark.anyio

BAD_TIMEOUTS = [-1, -0.5, math.nan, True, "10", [1]]
BAD_RECURSION = [1, 0, -3, 2.5, True, "8"]


def _agent() -> Any:
    return create_deep_agent(FunctionModel(lambda request: "ok"))


def _server_run(config: dict[str, Any]) -> tuple[Any, float | None]:
    """What the server makes of a run request's ``config`` (a 422 raised)."""
    body = RunCreate(assistant_id="a", input={"messages": [{"role": "user", "content": "hi"}]})
    body.config = config
    return run_input_of(_agent(), body, None)


def test_a_timeout_is_seconds_of_zero_or_more_and_inf_is_none() -> None:
    assert seconds(None) is None
    assert seconds(0) == 0.0
    assert seconds(2) == 2.0
    assert isinstance(seconds(2), float)
    assert seconds(math.inf) is None
    for bad in BAD_TIMEOUTS:
        with pytest.raises(InputError, match="timeout must be a number of seconds >= 0"):
            seconds(bad)


def test_a_recursion_limit_is_an_integer_of_two_or_more_halved() -> None:
    assert steps(None) is None
    assert (steps(2), steps(5), steps(50)) == (1, 2, 25)
    for bad in BAD_RECURSION:
        with pytest.raises(InputError, match="recursion_limit must be an integer >= 2"):
            steps(bad)


def test_limits_check_what_they_hold() -> None:
    assert Limits.of(timeout=math.inf, recursion_limit=8) == Limits(max_steps=4)
    with pytest.raises(InputError, match=r"budget must be a deepactors\.Budget"):
        Limits(budget={"model_calls": 1})  # type: ignore[arg-type]
    with pytest.raises(InputError, match="max_steps"):
        Limits(max_steps=0)
    with pytest.raises(InputError, match="timeout"):
        Limits(timeout=-2)


def test_the_wire_shape_round_trips_and_says_where_it_is_wrong() -> None:
    sent = Limits(timeout=12.5, budget=Budget(model_calls=20, usd=0.35))
    config = {"configurable": sent.configurable(), "recursion_limit": 10}
    assert Limits.from_config(config) == Limits(timeout=12.5, max_steps=5, budget=sent.budget)
    assert Limits().configurable() == {}
    assert Limits.from_config(None) is NO_LIMITS
    assert Limits.from_config({"configurable": {"thread_id": "t"}}) is NO_LIMITS
    where = f"config.configurable.{LIMITS_KEY}"
    wrong = [
        ({"timeout": -1}, rf"{where}\.timeout must be"),
        ({"timeout": "soon"}, rf"{where}\.timeout must be"),
        ({"budget": {"model_calls": -2}}, rf"{where}\.budget: "),
        ({"budget": {"dollars": 1}}, rf"{where}\.budget: an object with some of"),
        ({"deadline": 3}, rf"{where}: unknown key\(s\) deadline"),
        ("ten seconds", rf"{where}: an object with"),
    ]
    for limits, message in wrong:
        with pytest.raises(InputError, match=message):
            Limits.from_config({"configurable": {LIMITS_KEY: limits}})
    # The name remote callers know reads the same entry.
    assert read_limits(config) == (12.5, sent.budget)


@pytest.mark.parametrize("bad", BAD_TIMEOUTS, ids=repr)
async def test_a_bad_timeout_is_refused_alike_on_every_road(bad: object) -> None:
    agent = _agent()
    with pytest.raises(InputError, match="timeout must be a number of seconds"):
        await agent.ainvoke("hi", timeout=bad)  # type: ignore[arg-type]
    async with open_runtime() as rt:
        with pytest.raises(InputError, match="timeout must be a number of seconds"):
            await rt.thread(agent).start("hi", timeout=bad)  # type: ignore[arg-type]
        with pytest.raises(InputError, match="timeout must be a number of seconds"):
            await rt.thread(agent, "t").ainvoke("hi", timeout=bad)  # type: ignore[arg-type]
        assert rt.statistics().actors == 0  # nothing was queued
    if not isinstance(bad, float | int) or isinstance(bad, bool) or math.isnan(bad):
        return  # not a number: JSON bodies cannot carry it as one (or the guard refuses it)
    with pytest.raises(HTTPException) as refused:
        _server_run({"configurable": {LIMITS_KEY: {"timeout": bad}}})
    assert refused.value.status_code == 422
    assert "timeout must be a number of seconds" in refused.value.detail


async def test_no_deadline_reads_the_same_on_every_road() -> None:
    agent = _agent()
    assert (await agent.ainvoke("hi", timeout=math.inf))["messages"][-1].text == "ok"
    async with open_runtime() as rt:
        handle = await rt.thread(agent).start("hi", timeout=math.inf)
        assert handle.deadline == math.inf
        await handle.result()
    _, timeout = _server_run({"configurable": {LIMITS_KEY: {"timeout": math.inf}}})
    assert timeout is None


@pytest.mark.parametrize("bad", BAD_RECURSION, ids=repr)
def test_a_bad_recursion_limit_is_refused_alike_by_the_facade_and_the_server(bad: object) -> None:
    agent = _agent()
    with pytest.raises(InputError, match="recursion_limit must be an integer >= 2"):
        agent.invoke("hi", {"recursion_limit": bad})
    with pytest.raises(HTTPException) as refused:
        _server_run({"recursion_limit": bad})
    assert refused.value.status_code == 422
    assert "config.recursion_limit must be an integer >= 2" in refused.value.detail


def test_the_server_and_the_facade_put_the_same_limits_in_a_run() -> None:
    run_input, timeout = _server_run(
        {
            "recursion_limit": 9,
            "configurable": {LIMITS_KEY: {"timeout": 3, "budget": {"tool_calls": 4}}},
        }
    )
    assert (run_input.max_steps, run_input.budget, timeout) == (4, Budget(tool_calls=4), 3.0)


# -- one rendering of a state ----------------------------------------------------------


def test_a_state_renders_one_way_as_json_or_as_objects() -> None:
    answer = AssistantMessage(content="ok", usage=Usage(input_tokens=3, output_tokens=1))
    result = {
        "messages": [UserMessage(content="hi"), answer],
        "todos": [],
        "usage": answer.usage,
        "budget": None,
    }
    as_objects = values_to_lc(result, objects=True)
    assert as_objects == {"messages": result["messages"], "todos": []}  # reports left out
    as_json = values_to_lc(result)
    assert set(as_json) == set(as_objects)
    assert [m["type"] for m in as_json["messages"]] == ["human", "ai"]


# -- one place picks the ASGI server of a loop -----------------------------------------


def test_each_loop_has_its_asgi_server() -> None:
    assert asgi_server_for("asyncio") == "uvicorn"
    assert asgi_server_for("trio") == "hypercorn"
    with pytest.raises(ConfigurationError, match="asyncio or trio, not 'curio'"):
        asgi_server_for("curio")


async def test_an_app_is_served_on_the_running_loop() -> None:
    async def served(request: Request) -> PlainTextResponse:
        return PlainTextResponse("served")

    app = Starlette(routes=[Route("/", served)])

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: serve_here(app, host="127.0.0.1", port=port))
            async with httpx.AsyncClient() as client:

                async def get() -> httpx.Response | None:
                    try:
                        return await client.get(f"http://127.0.0.1:{port}/")
                    except httpx.TransportError:
                        return None  # not listening yet

                answer = await wait_until(get, what="the app served")
            assert answer.text == "served"
            tg.cancel_scope.cancel()


@pytest.mark.parametrize("bad", [0, -1, math.nan, math.inf, True, "5", [5]])
def test_a_time_to_live_is_minutes_above_zero_on_every_road(bad: object, tmp_path: Any) -> None:
    # One rule for a thread's ttl (the SDKs'), a store item's, and langgraph.json's
    # store.ttl / checkpointer.ttl (which took 0, -1 and inf for the store before).
    from deepactors.persistence import MemoryStore
    from deepactors.server._langgraph_json import expiring, thread_expiry
    from deepactors.server._schemas import ThreadCreate, parse_body

    assert ttl_seconds(None) is None
    assert ttl_seconds(1.5) == 90.0
    with pytest.raises(InputError, match="ttl: minutes"):
        ttl_seconds(bad)
    with pytest.raises(HTTPException) as refused:
        parse_body(json.dumps({"ttl": bad}).encode(), ThreadCreate)
    assert refused.value.status_code == 422
    config = tmp_path / "langgraph.json"
    config.write_text(json.dumps({"store": {"ttl": {"default_ttl": bad}}}))
    with pytest.raises(ConfigurationError, match=r"store.ttl.default_ttl: minutes"):
        expiring(MemoryStore(), config)
    config.write_text(json.dumps({"checkpointer": {"ttl": {"default_ttl": bad}}}))
    with pytest.raises(ConfigurationError, match=r"checkpointer.ttl.default_ttl: minutes"):
        thread_expiry(config)
