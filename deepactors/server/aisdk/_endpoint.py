"""``POST /ai-sdk/{assistant_id}``: the AI SDK's chat endpoint on ``deepactors serve``.

``useChat({transport: new DefaultChatTransport({api: ".../ai-sdk/agent"})})``
talks to it. As every endpoint of the app: authenticated and guarded, the chat
id a thread of the caller's, its run through the run manager (and so the
thread's handle), counted among the client's open streams; a client that
stops (``stop()``, a closed tab) cancels the run.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from .._protocol_runs import (
    SubagentFilter,
    manager_of,
    rewind_before,
    run_stream,
    saved_messages,
    start_run,
    take_stream,
    thread_for,
)
from .._schemas import read_body
from ._events import HEADERS, AiSdkTranslator
from ._input import ChatRequest, approvals_of, decisions_of, input_messages

__all__ = ["aisdk_routes"]


async def chat(request: Request) -> Response:
    """Run the assistant on a ``useChat`` request; stream the UI message stream (SSE)."""
    manager = manager_of(request)
    release = take_stream(request)
    try:
        body = await read_body(request, ChatRequest)
        assistant = manager.assistant(request.path_params["assistant_id"])
        subagents = SubagentFilter.parse(body.hide_subagents, field="hideSubagents")
        thread = await thread_for(manager, body.id)
        approvals = approvals_of(body.messages)
        if approvals:
            started = await start_run(
                manager, thread, assistant_id=assistant.graph_id, resume=decisions_of(approvals)
            )
        else:
            saved = await saved_messages(manager, thread)
            last = body.messages[-1] if body.messages else {}
            if (
                body.trigger == "regenerate-message"
                and last.get("role") == "user"
                and await rewind_before(manager, thread, last.get("id"))
            ):
                saved = await saved_messages(manager, thread)
            started = await start_run(
                manager,
                thread,
                assistant_id=assistant.graph_id,
                messages=input_messages(body.messages, saved),
            )
    except BaseException:
        release()
        raise
    translator = AiSdkTranslator(
        thread_id=body.id,
        run_id=started.run.run_id,
        root=started.run.assistant.agent.name,
        subagents=subagents,
        decided={call_id: approved for call_id, (approved, _) in approvals.items()},
    )
    return run_stream(manager, started, translator, release=release, headers=HEADERS)


async def reconnect(request: Request) -> Response:
    """``useChat``'s ``resume``: no stream is kept to rejoin (204, as the SDK expects)."""
    manager_of(request).assistant(request.path_params["assistant_id"])
    return Response(status_code=204)


aisdk_routes = [
    Route("/ai-sdk/{assistant_id}", chat, methods=["POST"]),
    Route("/ai-sdk/{assistant_id}/{chat_id}/stream", reconnect, methods=["GET"]),
]
