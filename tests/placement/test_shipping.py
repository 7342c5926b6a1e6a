"""What crosses to the workers: an agent by Ray's serialization or by import path,
and a clear error naming what cannot cross; human decisions, both ways."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import anyio
import pytest

from deepactors import Command, create_deep_agent
from deepactors.errors import ConfigurationError
from deepactors.middleware import SubAgentSpec
from deepactors.models import FunctionModel
from deepactors.persistence import MemoryCheckpointer
from deepactors.placement import RayAgent, RayPlacement
from tests.placement.agents import answers, child_model, parent, parent_model, say, worker_subagent


@pytest.fixture
def open_socket() -> Iterator[socket.socket]:
    with socket.socket() as sock:
        yield sock


def test_an_agent_that_cannot_be_sent_is_refused_naming_the_object(
    open_socket: socket.socket,
) -> None:
    def probe() -> str:
        """Probe with the socket."""
        return str(open_socket.fileno())

    with pytest.raises(ConfigurationError) as caught:
        parent(RayPlacement(), [worker_subagent(tools=[probe])])
    text = str(caught.value)
    assert "subagent 'w' cannot be sent to Ray workers" in text
    assert "tools['probe']" in text
    assert "<open_socket> (socket)" in text
    assert "RayPlacement(agents={'w': 'package.module:attribute'})" in text


def test_placing_an_unknown_or_forked_subagent_is_refused() -> None:
    named = RayPlacement(subagents=["nobody"])
    with pytest.raises(ConfigurationError, match=r"names \['nobody'\]"):
        parent(named)
    forked = RayPlacement(subagents=["w"])
    with pytest.raises(ConfigurationError, match="cannot be placed on Ray: a fork"):
        parent(forked, [worker_subagent(mode="fork")])


async def test_an_agent_named_by_import_path_is_built_on_the_worker(
    placement: RayPlacement,
) -> None:
    local = create_deep_agent(FunctionModel(child_model), name="w")
    placed = RayAgent(
        name="w",
        spec=local.spec,
        placement=placement,
        import_path="tests.placement.agents:imported_agent",
    )
    agent = create_deep_agent(
        FunctionModel(parent_model),
        subagents=[SubAgentSpec(name="w", description="imported", agent=placed)],
    )
    with anyio.fail_after(60):
        result = await agent.ainvoke(say([("w", "echo x")]))
    assert answers(result) == [("success", "imported: echo x")]


async def test_a_childs_interrupt_reaches_the_parents_thread_and_resumes(
    placement: RayPlacement,
) -> None:
    agent = parent(
        placement,
        [worker_subagent(interrupt_on={"send_email": True})],
        checkpointer=MemoryCheckpointer(),
    )
    with anyio.fail_after(60):
        first = await agent.ainvoke(say([("w", "ask")]), thread_id="t")
        [request] = first["__interrupt__"]
        assert (request["tool"], request["args"]) == ("send_email", {"to": "ops"})
        assert request["path"] == "main/task-1:w"
        # The child's work so far is in the parent's thread: it continues there,
        # on its worker, with the human's decision.
        done = await agent.ainvoke(Command(resume=[{"type": "approve"}]), thread_id="t")
    assert answers(done) == [("success", "mail: sent to ops")]
    # Not started over: the child's one call after the tool, the parent's last.
    assert done["usage"].requests == 2


def test_interrupt_on_may_name_a_tool_only_a_placed_subagent_has() -> None:
    # The placed subagent is the same agent, run elsewhere: its tools count.
    agent = parent(
        RayPlacement(), interrupt_on={"send_email": True}, checkpointer=MemoryCheckpointer()
    )
    assert agent.spec.name == "main"
