"""One agent as an ACP agent: sessions, prompt turns, permissions, cancel.

A session is a thread (its id is the thread id), so a session the checkpointer
keeps can be loaded again, in this process or a later one. Each session has
its own copy of the agent whose backend is the session's :class:`EditorBackend`
(its files are the editor's), and its runs go through the thread's handle
under one runtime. A prompt turn is one run, or several when the run stops for
a human: each pending call is asked of the client (``session/request_permission``,
allow or reject once) and the run resumes with the answers, until it ends.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import math
import os
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, final

import anyio
from anyio.abc import ByteReceiveStream, ByteSendStream

from .._core.jsonvalue import JSONObject, JSONValue
from ..actors import RunHandle, Runtime, ThreadHandle
from ..agent import DeepAgent
from ..errors import InputError, RunCancelled
from ..events import Event
from ..interrupts import END_PENDING
from ..persistence import MemoryCheckpointer
from ..tools import Command
from ._backend import ClientOffers, EditorBackend
from ._rpc import INTERNAL_ERROR, INVALID_PARAMS, RESOURCE_NOT_FOUND, Peer, RpcError
from ._updates import SessionUpdates, history_updates, tool_call_update

__all__ = ["PROTOCOL_VERSION", "AcpAgent"]

PROTOCOL_VERSION = 1
"""The ACP version spoken (``initialize``'s ``protocolVersion``)."""

_ALLOW = "allow"
_REJECT = "reject"
_OPTIONS = [
    {"optionId": _ALLOW, "name": "Allow", "kind": "allow_once"},
    {"optionId": _REJECT, "name": "Reject", "kind": "reject_once"},
]
_DONE = object()


@dataclass(slots=True)
class _Session:
    id: str
    backend: EditorBackend
    agent: DeepAgent
    thread: ThreadHandle
    running: RunHandle | None = None
    cancelled: bool = False


@final
class AcpAgent:
    """Serves one agent to one ACP client (see the module docstring).

    Args:
        agent: The agent. One without a checkpointer gets one in memory (its
            sessions last as long as the process).
        runtime: Where the runs go.
    """

    def __init__(self, agent: DeepAgent, runtime: Runtime) -> None:
        if agent.spec.checkpointer is None:
            agent = DeepAgent(dataclasses.replace(agent.spec, checkpointer=MemoryCheckpointer()))
        self._agent = agent
        self._runtime = runtime
        self._offers = ClientOffers()
        self._sessions: dict[str, _Session] = {}
        self._peer: Peer | None = None

    async def serve(self, receive: ByteReceiveStream, send: ByteSendStream) -> None:
        """Answer the client on these streams until it closes them."""
        self._peer = Peer(
            receive,
            send,
            methods={
                "initialize": self._initialize,
                "authenticate": self._authenticate,
                "session/new": self._new,
                "session/load": self._load,
                "session/prompt": self._prompt,
            },
            notifications={"session/cancel": self._cancel},
        )
        try:
            await self._peer.serve()
        finally:
            for session in self._sessions.values():
                if session.running is not None:
                    session.running.cancel()

    @property
    def peer(self) -> Peer:
        assert self._peer is not None, "serve() first"
        return self._peer

    # -- setup -----------------------------------------------------------------------

    async def _initialize(self, params: Mapping[str, JSONValue]) -> JSONObject:
        self._offers = ClientOffers.of(params.get("clientCapabilities"))
        try:
            version = importlib.metadata.version("deepactors")
        except importlib.metadata.PackageNotFoundError:
            version = "0"
        return {
            "protocolVersion": PROTOCOL_VERSION,
            "agentCapabilities": {
                "loadSession": True,
                "promptCapabilities": {"image": True, "audio": False, "embeddedContext": True},
            },
            "authMethods": [],
            "agentInfo": {"name": "deepactors", "title": self._agent.name, "version": version},
        }

    async def _authenticate(self, params: Mapping[str, JSONValue]) -> JSONObject:
        return {}  # no method is offered: nothing to authenticate

    def _session(self, session_id: str, cwd: object) -> _Session:
        if not isinstance(cwd, str) or not os.path.isabs(cwd):
            raise RpcError(INVALID_PARAMS, f"cwd: an absolute path, not {cwd!r}")
        spec = self._agent.spec
        execute = spec.backend is not None and spec.backend.can_execute
        backend = EditorBackend(self.peer, session_id, cwd, self._offers, execute=execute)
        agent = DeepAgent(dataclasses.replace(spec, backend=backend))
        session = _Session(session_id, backend, agent, self._runtime.thread(agent, session_id))
        self._sessions[session_id] = session
        return session

    async def _new(self, params: Mapping[str, JSONValue]) -> JSONObject:
        session = self._session(str(uuid.uuid4()), params.get("cwd"))
        return {"sessionId": session.id}

    async def _load(self, params: Mapping[str, JSONValue]) -> None:
        session_id = params.get("sessionId")
        if not isinstance(session_id, str) or not session_id:
            raise RpcError(INVALID_PARAMS, "sessionId: the session to load")
        session = self._session(session_id, params.get("cwd"))
        state = await session.thread.state()
        if state.seq is None:
            del self._sessions[session_id]
            raise RpcError(RESOURCE_NOT_FOUND, f"no session {session_id!r} is saved")
        messages = list(state.values.get("messages", ()))
        for update in history_updates(messages, session.backend.real_path):
            await self._update(session, update)

    # -- prompt turns ----------------------------------------------------------------

    async def _cancel(self, params: Mapping[str, JSONValue]) -> None:
        session = self._sessions.get(str(params.get("sessionId")))
        if session is not None:
            session.cancelled = True
            if session.running is not None:
                session.running.cancel()

    async def _update(self, session: _Session, update: JSONObject) -> None:
        await self.peer.notify("session/update", {"sessionId": session.id, "update": update})

    async def _prompt(self, params: Mapping[str, JSONValue]) -> JSONObject:
        session = self._sessions.get(str(params.get("sessionId")))
        if session is None:
            raise RpcError(RESOURCE_NOT_FOUND, f"no session {params.get('sessionId')!r}")
        if session.running is not None:
            raise RpcError(INVALID_PARAMS, "this session's turn is still in progress")
        content = _prompt_content(params.get("prompt"))
        session.cancelled = False
        state = await session.thread.state()
        if state.interrupts:
            # Asked and left unanswered (a turn cancelled at the prompt): those
            # calls are answered as not run, and the conversation goes on.
            await self._run(session, Command(resume=END_PENDING), updates=None)
        given: object = {"messages": [{"role": "user", "content": content}]}
        updates = SessionUpdates(root=session.agent.name, real_path=session.backend.real_path)
        while True:
            pending = await self._run(session, given, updates=updates)
            if session.cancelled:
                return {"stopReason": "cancelled"}
            if not pending:
                return {"stopReason": "end_turn"}
            decisions = await self._ask(session, pending)
            if decisions is None:
                return {"stopReason": "cancelled"}
            given = Command(resume=decisions)

    async def _run(
        self, session: _Session, given: object, *, updates: SessionUpdates | None
    ) -> list[Mapping[str, Any]]:
        """One run of the turn, its events sent as updates; the calls it stopped for."""
        send, receive = anyio.create_memory_object_stream[object](math.inf)
        try:
            handle = await session.thread.start(
                given,
                on_event=send.send_nowait,
                on_done=lambda _: send.send_nowait(_DONE),
            )
        except InputError as exc:
            raise RpcError(INVALID_PARAMS, str(exc)) from None
        session.running = handle
        try:
            async with receive:
                async for item in receive:
                    if item is _DONE:
                        break
                    if updates is not None and isinstance(item, Event):
                        for update in updates.updates(item):
                            await self._update(session, update)
        finally:
            session.running = None
            send.close()
            if not handle.done:  # the turn was cancelled under us (the client left)
                handle.cancel()
        try:
            result = handle.result_nowait()
        except RunCancelled:
            return []
        except Exception as exc:
            raise RpcError(INTERNAL_ERROR, f"{type(exc).__name__}: {exc}") from None
        return list(result.get("__interrupt__") or ())

    async def _ask(
        self, session: _Session, pending: Sequence[Mapping[str, Any]]
    ) -> dict[str, dict[str, str]] | None:
        """Ask the client about each pending call; its decisions (None: cancelled)."""
        decisions: dict[str, dict[str, str]] = {}
        for request in pending:
            call = tool_call_update(request, session.backend.real_path)
            answer = await self.peer.request(
                "session/request_permission",
                {
                    "sessionId": session.id,
                    "toolCall": {**call, "status": "pending"},
                    "options": _OPTIONS,
                },
            )
            outcome = answer.get("outcome") if isinstance(answer, dict) else None
            if (
                session.cancelled
                or not isinstance(outcome, dict)
                or outcome.get("outcome") != "selected"
            ):
                return None
            if outcome.get("optionId") == _ALLOW:
                decisions[str(request["id"])] = {"type": "approve"}
            else:
                message = "the user rejected it in the editor"
                decisions[str(request["id"])] = {"type": "reject", "message": message}
        return decisions


def _prompt_content(blocks: JSONValue) -> list[dict[str, object]]:
    """A prompt's ACP content blocks as our content blocks.

    Raises:
        RpcError: A block of a kind the agent does not take (audio).
    """
    if not isinstance(blocks, list) or not blocks:
        raise RpcError(INVALID_PARAMS, "prompt: a non-empty list of content blocks")
    out: list[dict[str, object]] = []
    for block in blocks:
        if not isinstance(block, dict):
            raise RpcError(INVALID_PARAMS, "prompt: content blocks of type None are not taken")
        kind = block.get("type")
        if kind == "text":
            out.append({"type": "text", "text": str(block.get("text", ""))})
        elif kind == "image":
            source = {
                "type": "base64",
                "media_type": block.get("mimeType"),
                "data": block.get("data"),
            }
            out.append({"type": "image", "source": source})
        elif kind == "resource_link":
            out.append(
                {"type": "text", "text": f"[{block.get('name', '')}]({block.get('uri', '')})"}
            )
        elif kind == "resource" and isinstance(resource := block.get("resource"), dict):
            text = resource.get("text")
            if not isinstance(text, str):
                raise RpcError(INVALID_PARAMS, "prompt: embedded resources are taken as text")
            uri = resource.get("uri", "")
            out.append({"type": "text", "text": f'<file uri="{uri}">\n{text}\n</file>'})
        else:
            raise RpcError(INVALID_PARAMS, f"prompt: content blocks of type {kind!r} are not taken")
    return out
