"""``agui_app``: one agent as an ASGI app that answers AG-UI at its root, to mount.

For an app of one's own (FastAPI, Starlette) that wants an AG-UI endpoint and
nothing else of the server::

    app = FastAPI(lifespan=lifespan)          # opens a runtime: app.state.runtime
    app.mount("/agent", agui_app(agent, runtime=lambda: app.state.runtime))

``HttpAgent({url: ".../agent/"})`` then talks to it. Runs go through the
thread's handle of the given runtime (``runtime.thread(agent, threadId)``), so
runs of one thread take turns, and a client that leaves cancels its run. Who
may call, and which threads are whose, is the host app's business here: its
auth runs first, and ``thread_key`` maps the client's ``threadId`` to the
thread it is (prefix it with the user's id, and no user reaches another's).
``deepactors serve`` and ``create_app`` serve ``POST /agui/{assistant_id}``
with the server's own auth, ownership and limits instead.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import anyio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ...actors import RunHandle, Runtime, ThreadHandle, open_runtime
from ...agent import DeepAgent
from ...errors import DeepActorsError, InputError, RunCancelled
from ...events import Event
from ...persistence import MemoryCheckpointer
from ...tools import Command
from .._protocol_runs import Outcome, ProtocolStream, SubagentFilter
from .._schemas import read_body
from ._events import AguiTranslator
from ._input import RunAgentInput, decisions_of, input_messages

__all__ = ["agui_app"]


def agui_app(
    agent: DeepAgent,
    runtime: Runtime | Callable[[], Runtime] | None = None,
    *,
    thread_key: Callable[[Request, str], str] | None = None,
) -> Starlette:
    """An ASGI app serving ``agent`` over AG-UI at ``POST /`` (see the module docstring).

    Args:
        agent: The agent. One without a checkpointer gets one in memory, so a
            thread's history is the server's, not what each request resends.
        runtime: Where its runs go: a runtime, or a function returning the
            one to use when a request comes (one opened by the host app's
            lifespan, after this app was made). None: the app opens its own
            in its lifespan (served as an app of its own; a mounted app's
            lifespan is not run, so a mounted one needs ``runtime``).
        thread_key: The thread a request's ``threadId`` names (default: that id).
    """
    if agent.spec.checkpointer is None:
        agent = DeepAgent(dataclasses.replace(agent.spec, checkpointer=MemoryCheckpointer()))
    runtimes = _Runtimes(runtime)

    async def run(request: Request) -> Response:
        body = await read_body(request, RunAgentInput)
        subagents = SubagentFilter.parse(
            body.hide_subagents(), field="forwardedProps.hideSubagents"
        )
        thread_id = body.thread_id if thread_key is None else thread_key(request, body.thread_id)
        thread = runtimes.current().thread(agent, thread_id)
        given = await _given(body, thread)
        send, receive = anyio.create_memory_object_stream[Event | bytes](math.inf)

        def deliver(event: Event) -> None:
            try:
                send.send_nowait(event)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                send.close()  # the response is gone

        try:
            handle = await thread.start(given, on_event=deliver, on_done=lambda _: send.close())
        except InputError as exc:
            send.close()
            receive.close()
            raise HTTPException(422, str(exc)) from None
        translator = AguiTranslator(
            thread_id=body.thread_id, run_id=body.run_id, root=agent.name, subagents=subagents
        )
        return ProtocolStream(
            receive,
            translator,
            launch=lambda: None,
            leave=handle.cancel,
            outcome=lambda: _outcome(handle),
            pacer=runtimes.current().pacer,
        )

    return Starlette(
        routes=[Route("/", run, methods=["POST"])],
        lifespan=runtimes.lifespan,
        exception_handlers={HTTPException: _error, DeepActorsError: _error},
    )


class _Runtimes:
    """Where an app's runs go: the runtime it was given (or a function naming it
    when a request comes), else the one its own lifespan opened."""

    def __init__(self, runtime: Runtime | Callable[[], Runtime] | None) -> None:
        self._runtime = runtime
        self._opened: list[Runtime] = []

    @asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        """Open a runtime for the app's life, unless one was given."""
        if self._runtime is not None:
            yield
            return
        async with open_runtime() as rt:
            self._opened.append(rt)
            try:
                yield
            finally:
                self._opened.remove(rt)

    def current(self) -> Runtime:
        """The runtime a request's run goes to.

        Raises:
            HTTPException: 503: none was given and the app's lifespan did not run.
        """
        runtime = self._runtime
        if isinstance(runtime, Runtime):
            return runtime
        if runtime is not None:
            return runtime()
        if not self._opened:
            raise HTTPException(
                503,
                "agui_app has no runtime: pass runtime= when you mount it (a mounted "
                "app's lifespan does not run), or serve it as an app of its own",
            )
        return self._opened[0]


async def _given(body: RunAgentInput, thread: ThreadHandle) -> Command | dict[str, object]:
    """What a request gives its run: the decisions it resumes with, or its new messages
    (the ones the thread's saved history does not hold yet)."""
    if body.resume:
        return Command(resume=decisions_of(body.resume))
    saved = await thread.state()
    messages = list(saved.values.get("messages", ())) if saved.seq is not None else []
    return {"messages": input_messages(body.messages, messages)}


async def _error(request: Request, exc: Exception) -> Response:
    if isinstance(exc, HTTPException):
        return JSONResponse({"detail": exc.detail}, status_code=exc.status_code)
    return JSONResponse({"detail": f"{type(exc).__name__}: {exc}"}, status_code=500)


async def _outcome(handle: RunHandle) -> Outcome:
    await handle.wait()
    try:
        handle.result_nowait()
    except RunCancelled:
        return Outcome(status="interrupted")
    except TimeoutError:
        error = {"error": "TimeoutError", "message": "the run passed its deadline"}
        return Outcome(status="timeout", error=error)
    except Exception as exc:
        return Outcome(status="error", error={"error": type(exc).__name__, "message": str(exc)})
    return Outcome(status="success")
