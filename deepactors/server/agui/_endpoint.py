"""``POST /agui/{assistant_id}``: an AG-UI run on ``deepactors serve`` (``create_app``).

The request is authenticated and guarded as every request of the app is; its
``threadId`` is a thread of the caller's (made on first use; another user's is
a 404), its run goes through the run manager (``_protocol_runs``) and is
counted among the client's open streams. A client that leaves cancels the run.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from .._protocol_runs import (
    SubagentFilter,
    manager_of,
    run_stream,
    saved_messages,
    start_run,
    take_stream,
    thread_for,
)
from .._schemas import read_body
from ._events import AguiTranslator
from ._input import RunAgentInput, decisions_of, input_messages

__all__ = ["agui_routes"]


async def agui_run(request: Request) -> Response:
    """Run the assistant on an AG-UI ``RunAgentInput``; stream AG-UI events (SSE)."""
    manager = manager_of(request)
    release = take_stream(request)
    try:
        body = await read_body(request, RunAgentInput)
        assistant = manager.assistant(request.path_params["assistant_id"])
        subagents = SubagentFilter.parse(
            body.hide_subagents(), field="forwardedProps.hideSubagents"
        )
        thread = await thread_for(manager, body.thread_id)
        metadata = {"agui_run_id": body.run_id}
        if body.resume:
            started = await start_run(
                manager,
                thread,
                assistant_id=assistant.graph_id,
                resume=decisions_of(body.resume),
                metadata=metadata,
            )
        else:
            messages = input_messages(body.messages, await saved_messages(manager, thread))
            started = await start_run(
                manager,
                thread,
                assistant_id=assistant.graph_id,
                messages=messages,
                metadata=metadata,
            )
    except BaseException:
        release()
        raise
    translator = AguiTranslator(
        thread_id=body.thread_id,
        run_id=body.run_id,
        # A resume runs as the assistant that stopped: its root's path.
        root=started.run.assistant.agent.name,
        subagents=subagents,
    )
    return run_stream(manager, started, translator, release=release)


agui_routes = [Route("/agui/{assistant_id}", agui_run, methods=["POST"])]
