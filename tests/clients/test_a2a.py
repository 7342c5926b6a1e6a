"""A2A's own client, ``a2a-sdk`` (1.x, protocol 1.0), against ``deepactors serve``
on asyncio (uvicorn) and trio (hypercorn), one server per loop: the agent card,
``SendMessage`` (and a follow-up in the same context), ``SendStreamingMessage``
with subagents' progress and the answer streamed as artifact chunks, a task
stopped for a human (input required) answered by a message to it, ``GetTask``,
``CancelTask`` on a streaming task, a deadline sent with a message, and a
deepactors parent (on trio) that runs this assistant as an A2A subagent."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest

from deepactors import AssistantMessage, ToolCall, ToolMessage, create_deep_agent, open_runtime
from deepactors.middleware import SubAgentSpec
from deepactors.models import FunctionModel, ModelRequest
from deepactors.remote.a2a import A2AAgent

from .protocol_agent import write_agent
from .served import serving

a2a_client = pytest.importorskip("a2a.client", reason="a2a-sdk is in the dev extra")
pb = pytest.importorskip("a2a.types.a2a_pb2")


@pytest.fixture(scope="module", params=["asyncio", "trio"])
def agent_url(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    folder = tmp_path_factory.mktemp(f"a2a-{request.param}")
    with serving([write_agent(folder), "--loop", str(request.param)], folder) as url:
        yield f"{url}/a2a/agent"


def _message(text: str, *, context: str | None = None, task: str | None = None) -> Any:
    message = pb.Message(message_id=str(uuid.uuid4()), role=pb.Role.ROLE_USER)
    message.parts.append(pb.Part(text=text))
    if context is not None:
        message.context_id = context
    if task is not None:
        message.task_id = task
    return pb.SendMessageRequest(message=message)


async def _client(url: str, *, streaming: bool) -> Any:
    config = a2a_client.ClientConfig(streaming=streaming)
    return await a2a_client.create_client(url, client_config=config)


async def _events(client: Any, request: Any) -> list[Any]:
    return [event async for event in client.send_message(request)]


def _answer(task: Any) -> str:
    return "".join(p.text for a in task.artifacts for p in a.parts)


def test_card_send_and_follow_up(agent_url: str) -> None:
    async def main() -> None:
        async with httpx.AsyncClient() as http:
            card = await a2a_client.A2ACardResolver(http, agent_url).get_agent_card()
        assert card.name == "agent"
        assert card.capabilities.streaming
        client = await _client(agent_url, streaming=False)
        try:
            [first] = await _events(client, _message("hello"))
            task = first.task
            assert task.status.state == pb.TaskState.TASK_STATE_COMPLETED
            assert _answer(task) == "echo #1: hello"
            [second] = await _events(client, _message("again", context=task.context_id))
            assert _answer(second.task) == "echo #2: again"
            fetched = await client.get_task(pb.GetTaskRequest(id=task.id))
            assert fetched.status.state == pb.TaskState.TASK_STATE_COMPLETED
            assert _answer(fetched) == "echo #1: hello"
        finally:
            await client.close()

    asyncio.run(main())


def test_stream_with_subagents(agent_url: str) -> None:
    async def main() -> None:
        client = await _client(agent_url, streaming=True)
        try:
            events = await _events(client, _message("fan 3"))
        finally:
            await client.close()
        assert events[0].task.status.state == pb.TaskState.TASK_STATE_SUBMITTED
        spawned = [
            e
            for e in events
            if e.HasField("status_update")
            and "deepactors" in e.status_update.metadata
            and e.status_update.metadata["deepactors"]["event"] == "subagent_spawned"
        ]
        assert len(spawned) == 3
        chunks = [e.artifact_update for e in events if e.HasField("artifact_update")]
        assert "".join(p.text for c in chunks for p in c.artifact.parts) == "all 3 subagents done"
        assert chunks[-1].last_chunk
        final = events[-1].status_update.status
        assert final.state == pb.TaskState.TASK_STATE_COMPLETED
        assert final.message.parts[0].text == "all 3 subagents done"

    asyncio.run(main())


def test_input_required_answered_by_a_message(agent_url: str) -> None:
    async def main() -> None:
        client = await _client(agent_url, streaming=False)
        try:
            [stopped] = await _events(client, _message("email dan"))
            task = stopped.task
            assert task.status.state == pb.TaskState.TASK_STATE_INPUT_REQUIRED
            [request] = task.status.message.metadata["deepactors"]["requests"]
            assert request["tool"] == "send_email"
            answer = _message("approve", context=task.context_id, task=task.id)
            [resumed] = await _events(client, answer)
            assert resumed.task.status.state == pb.TaskState.TASK_STATE_COMPLETED
            assert _answer(resumed.task) == "sent: sent to bob: email dan"
        finally:
            await client.close()

    asyncio.run(main())


def test_cancel_a_streaming_task(agent_url: str) -> None:
    async def main() -> None:
        client = await _client(agent_url, streaming=True)
        canceller = await _client(agent_url, streaming=False)
        states = []
        try:
            async for event in client.send_message(_message("slow")):
                if event.HasField("task"):
                    cancelled = await canceller.cancel_task(pb.CancelTaskRequest(id=event.task.id))
                    assert cancelled.status.state == pb.TaskState.TASK_STATE_CANCELED
                elif event.HasField("status_update"):
                    states.append(event.status_update.status.state)
        finally:
            await client.close()
            await canceller.close()
        assert states[-1] == pb.TaskState.TASK_STATE_CANCELED

    asyncio.run(main())


def test_a_deadline_sent_with_the_message_ends_the_run(agent_url: str) -> None:
    async def main() -> None:
        client = await _client(agent_url, streaming=False)
        request = _message("slow")
        request.metadata.update({"deepactors": {"timeout": 0.5}})
        try:
            [ended] = await _events(client, request)
        finally:
            await client.close()
        assert ended.task.status.state == pb.TaskState.TASK_STATE_FAILED
        assert "deadline" in ended.task.status.message.parts[0].text

    asyncio.run(main())


def test_a_deepactors_parent_runs_this_assistant_as_an_a2a_subagent(agent_url: str) -> None:
    def model(request: ModelRequest) -> AssistantMessage:
        last = request.messages[-1]
        if isinstance(last, ToolMessage):
            return AssistantMessage(content=f"peer said: {last.text}")
        call = ToolCall(name="task", args={"subagent_type": "peer", "description": "fan 2"})
        return AssistantMessage(tool_calls=[call])

    peer = SubAgentSpec(
        name="peer", description="over A2A", agent=A2AAgent(name="peer", url=agent_url)
    )
    parent = create_deep_agent(FunctionModel(model), subagents=[peer])

    async def main() -> str:
        async with open_runtime() as runtime:
            handle = await runtime.start(parent, {"messages": [{"role": "user", "content": "go"}]})
            result = await handle.result()
        return str(result["messages"][-1].text)

    assert anyio.run(main, backend="trio") == "peer said: all 2 subagents done"
