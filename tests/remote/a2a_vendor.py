"""Another vendor's agent: an A2A server written with ``a2a-sdk``'s own server side.

It answers ``vendor says: <text>`` (as an artifact, in two chunks when asked to
stream); given ``slow``, it works until cancelled. What it was sent and whether
it was cancelled are kept in :data:`SEEN`, for the tests to read from their thread.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from a2a.helpers.proto_helpers import new_task_from_user_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import AgentCapabilities, AgentCard, AgentInterface, AgentSkill
from starlette.applications import Starlette

__all__ = ["SEEN", "vendor_app"]

SEEN: dict[str, Any] = {"metadata": [], "cancelled": threading.Event()}


class Vendor(AgentExecutor):
    def __init__(self) -> None:
        self._cancelled: dict[str, asyncio.Event] = {}  # by task id: its cancel came

    def _cancel_of(self, task_id: str) -> asyncio.Event:
        return self._cancelled.setdefault(task_id, asyncio.Event())

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        SEEN["metadata"].append(dict(context.metadata))
        task = context.current_task
        if task is None:
            assert context.message is not None
            task = new_task_from_user_message(context.message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.start_work()
        text = context.get_user_input()
        if text == "slow":
            await self._cancel_of(task.id).wait()  # works until cancelled
            return
        await updater.add_artifact([new_text_part("vendor says: ")], artifact_id="a", name="answer")
        await updater.add_artifact(
            [new_text_part(text)], artifact_id="a", append=True, last_chunk=True
        )
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        SEEN["cancelled"].set()
        self._cancel_of(context.task_id or "").set()
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        await updater.cancel()


def vendor_app(url: str) -> Starlette:
    """The vendor's app, its card naming ``url`` (where it will be served)."""
    card = AgentCard(
        name="vendor",
        description="another vendor's agent",
        version="1",
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")
        ],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="echo", name="echo", description="says it back", tags=["echo"])],
    )
    handler = DefaultRequestHandler(
        agent_executor=Vendor(), task_store=InMemoryTaskStore(), agent_card=card
    )
    routes = [*create_agent_card_routes(card), *create_jsonrpc_routes(handler, "/")]
    return Starlette(routes=routes)
