""":class:`A2AAgent`: a subagent that is another vendor's agent, over A2A (1.0, JSON-RPC).

A ``task`` call to it sends the task's description as one message
(``SendStreamingMessage`` when its card says it streams, else ``SendMessage``)
in a context of its own, and follows the A2A task to its end: its answer is
the task's artifacts (else its final status message). The agent keeps its own
files: nothing is sent of the parent's, and no file changes come back.

The time left to the parent's deadline (or the subagent's ``timeout``) is sent
in the message's ``metadata.deepactors.timeout`` (a deepactors server stops
the run there), and kept here: past it, or when the parent is cancelled, the
task is cancelled on the agent (``CancelTask``, shielded, bounded by
``cancel_timeout``). A task that fails, is cancelled by the agent, or waits
for input is a ``failed`` outcome that says so.

Answers are read with the bounds of :class:`~deepactors.remote.RemoteAgent`'s
(``remote/_read.py``): a body, or one event of the task's stream, past
``max_answer_bytes`` is refused while it is read (the rest is not read), and a
stream that sends nothing but heartbeats for ``idle_timeout`` is given up on.
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, field
from typing import Any, final

import anyio
import httpx

from ..._core.jsonvalue import JSONObject, JSONValue
from ..._core.perloop import PerLoop
from ...actors import ChildOutcome
from ...budget import Budget
from ...context import Inbox, RunContext
from ...errors import ConfigurationError
from ...filediff import FileDiff, FileRecord
from .._agent import DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_ANSWER_BYTES
from .._read import AnswerTooLarge, NoEvents, read_body, read_events

__all__ = ["CARD_PATH", "A2AAgent", "A2AError"]

CARD_PATH = "/.well-known/agent-card.json"
"""Where an A2A agent's card is, under its URL."""

_TERMINAL = {
    "TASK_STATE_COMPLETED",
    "TASK_STATE_FAILED",
    "TASK_STATE_CANCELED",
    "TASK_STATE_REJECTED",
    "TASK_STATE_INPUT_REQUIRED",
    "TASK_STATE_AUTH_REQUIRED",
}


class A2AError(Exception):
    """The agent answered with an error, or not as A2A says."""


@dataclass(slots=True)
class _Followed:
    """What is known of the task while it is followed."""

    task_id: str | None = None
    state: str = "TASK_STATE_SUBMITTED"
    texts: dict[str, str] = field(default_factory=dict)  # artifact id -> its text
    message: str = ""

    def take(self, result: Mapping[str, Any]) -> None:
        """Fold in one ``StreamResponse`` (or a ``SendMessageResponse``)."""
        if "task" in result:
            task = result["task"]
            self.task_id = task.get("id", self.task_id)
            self._status(task.get("status") or {})
            for artifact in task.get("artifacts") or ():
                self.texts[artifact.get("artifactId", "")] = _text(artifact.get("parts"))
        elif "statusUpdate" in result:
            update = result["statusUpdate"]
            self.task_id = update.get("taskId", self.task_id)
            self._status(update.get("status") or {})
        elif "artifactUpdate" in result:
            update = result["artifactUpdate"]
            artifact = update.get("artifact") or {}
            key = artifact.get("artifactId", "")
            text = _text(artifact.get("parts"))
            self.texts[key] = self.texts.get(key, "") + text if update.get("append") else text
        elif "message" in result:  # an answer with no task
            self.state = "TASK_STATE_COMPLETED"
            self.message = _text(result["message"].get("parts"))

    def _status(self, status: Mapping[str, object]) -> None:
        self.state = str(status.get("state", self.state))
        message = status.get("message")
        if isinstance(message, Mapping):
            self.message = _text(message.get("parts"))

    @property
    def answer(self) -> str:
        texts = [t for t in self.texts.values() if t]
        return texts[-1] if texts else self.message


def _text(parts: object) -> str:
    if not isinstance(parts, list | tuple):
        return ""
    return "".join(str(p.get("text", "")) for p in parts if isinstance(p, Mapping))


@final
@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class A2AAgent:
    """An A2A agent run as a subagent (it implements :class:`~deepactors.actors.ChildRunner`).

    Give it to ``task`` as a :class:`~deepactors.middleware.SubAgentSpec`'s ``agent``.

    Attributes:
        name: The subagent's name (its ``subagent_type``).
        url: The agent's URL: its card is at ``url`` + ``/.well-known/agent-card.json``,
            and its JSON-RPC interface is the one the card names.
        headers: Sent with every request (an ``Authorization``).
        connect_timeout: Seconds to connect and to send a request.
        read_timeout: Seconds the agent may stay silent (None: for ever).
        cancel_timeout: Seconds a cancelled child spends cancelling its task.
        idle_timeout: Seconds the task's stream may go without an event
            (heartbeats do not count; None: for ever).
        max_answer_bytes: Bytes one answer may hold: a response body, or one
            event of the task's stream (at least 1024).

    Raises:
        ConfigurationError: An empty name, a URL that is not ``http(s)://...``,
            or a bad limit.
    """

    name: str
    url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    connect_timeout: float = 5.0
    read_timeout: float | None = 60.0
    cancel_timeout: float = 5.0
    idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT
    max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES
    _clients: PerLoop[httpx.AsyncClient] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ConfigurationError("A2AAgent name must be a non-empty string")
        try:
            parsed = httpx.URL(self.url)
        except (httpx.InvalidURL, TypeError) as exc:
            raise ConfigurationError(f"A2AAgent {self.name!r}: url {self.url!r}: {exc}") from None
        if parsed.scheme not in ("http", "https") or not parsed.host:
            raise ConfigurationError(
                f"A2AAgent {self.name!r}: url must be http(s)://, not {self.url!r}"
            )
        for key in ("connect_timeout", "cancel_timeout", "read_timeout", "idle_timeout"):
            value = getattr(self, key)
            optional = key in ("read_timeout", "idle_timeout")
            if (value is not None or not optional) and not (
                isinstance(value, int | float) and 0 < value < math.inf
            ):
                raise ConfigurationError(f"A2AAgent {key} must be seconds above 0, not {value!r}")
        cap = self.max_answer_bytes
        if not isinstance(cap, int) or isinstance(cap, bool) or cap < 1024:
            raise ConfigurationError(
                f"A2AAgent max_answer_bytes must be an int >= 1024, not {cap!r}"
            )
        object.__setattr__(self, "_clients", PerLoop(self._open, _close))

    async def _open(self) -> httpx.AsyncClient:
        timeout = httpx.Timeout(self.connect_timeout, read=self.read_timeout)
        headers = {"A2A-Version": "1.0", **self.headers}
        # Making its SSL context loads CA certificates: blocking, so in a thread.
        return await anyio.to_thread.run_sync(
            lambda: httpx.AsyncClient(timeout=timeout, headers=headers)
        )

    async def aclose(self) -> None:
        """Close this event loop's HTTP client now (else it is closed as the loop ends)."""
        await self._clients.aclose()

    def run_child(
        self,
        *,
        description: str,
        path: str,
        label: str,
        parent: RunContext,
        files: Mapping[str, FileRecord],
        timeout: float | None,
        budget: Budget | None = None,
        inbox: Inbox | None = None,
    ) -> Awaitable[ChildOutcome]:
        """Send the task to the agent and follow it to its end (see ``ChildRunner``).

        The agent has no part in the parent's files or budget: ``files`` and
        ``budget`` are not sent, and messages put in ``inbox`` do not reach it.
        """
        return self._run(description, path, label, timeout)

    async def _run(
        self, description: str, path: str, label: str, timeout: float | None
    ) -> ChildOutcome:
        followed = _Followed()
        client = await self._clients.get()
        try:
            with anyio.move_on_after(math.inf if timeout is None else timeout) as scope:
                await self._follow(client, description, followed)
        except AnswerTooLarge as exc:
            await self._cancel(client, followed)
            return _failed(
                path,
                f"The A2A agent {self.name!r} sent an answer of more than "
                f"max_answer_bytes={self.max_answer_bytes} bytes ({exc.size} read); "
                "the rest was not read.",
            )
        except NoEvents:
            await self._cancel(client, followed)
            return _failed(
                path,
                f"The A2A agent {self.name!r} sent no event for {self.idle_timeout:g} s "
                "(idle_timeout; heartbeats aside): given up on, its task cancelled.",
            )
        except (httpx.HTTPError, A2AError, ValueError, KeyError) as exc:
            await self._cancel(client, followed)
            return _failed(
                path,
                f"The A2A agent {self.name!r} could not be reached or answered "
                f"wrongly: {type(exc).__name__}: {exc}",
            )
        finally:
            if followed.state not in _TERMINAL:
                await self._cancel(client, followed)  # the parent was cancelled, or timed out
        if scope.cancelled_caught:
            assert timeout is not None  # (only its timeout ends the scope)
            return ChildOutcome.timed_out(
                path, timeout, f"The A2A agent {self.name!r}", "its task was cancelled"
            )
        return _outcome(self.name, path, label, followed)

    async def _follow(
        self, client: httpx.AsyncClient, description: str, followed: _Followed
    ) -> None:
        card = await self._card(client)
        endpoint, streaming = _interface(card)
        params: JSONObject = {
            "message": {
                "messageId": str(uuid.uuid4()),
                "contextId": str(uuid.uuid4()),
                "role": "ROLE_USER",
                "parts": [{"text": description}],
            }
        }
        left = _time_left()
        if left is not None:
            params["metadata"] = {"deepactors": {"timeout": left}}
        if not streaming:
            result = await self._call(client, endpoint, "SendMessage", params)
            followed.take(result)
            return
        await self._stream(client, endpoint, params, followed)

    async def _json(self, client: httpx.AsyncClient, method: str, url: str, **kw: Any) -> JSONValue:
        """A request's JSON answer, its body read with the size bound."""
        async with client.stream(method, url, **kw) as response:
            response.raise_for_status()
            answer: JSONValue = json.loads(await read_body(response, self.max_answer_bytes))
            return answer

    async def _card(self, client: httpx.AsyncClient) -> JSONObject:
        card = await self._json(client, "GET", self.url.rstrip("/") + CARD_PATH)
        if not isinstance(card, dict):
            raise A2AError("the agent card is not a JSON object")
        return card

    async def _call(
        self, client: httpx.AsyncClient, endpoint: str, method: str, params: Mapping[str, object]
    ) -> JSONObject:
        request = {"jsonrpc": "2.0", "id": str(uuid.uuid4()), "method": method, "params": params}
        return _result(await self._json(client, "POST", endpoint, json=request))

    async def _stream(
        self,
        client: httpx.AsyncClient,
        endpoint: str,
        params: Mapping[str, object],
        followed: _Followed,
    ) -> None:
        request = {
            "jsonrpc": "2.0",
            "id": str(uuid.uuid4()),
            "method": "SendStreamingMessage",
            "params": params,
        }
        headers = {"accept": "text/event-stream"}
        async with client.stream("POST", endpoint, json=request, headers=headers) as response:
            response.raise_for_status()

            def on_event(_name: str, data: str) -> None:
                if data:  # an event with no data carries no result
                    followed.take(_result(json.loads(data)))

            await read_events(response, on_event, cap=self.max_answer_bytes, idle=self.idle_timeout)

    async def _cancel(self, client: httpx.AsyncClient, followed: _Followed) -> None:
        if followed.task_id is None or followed.state in _TERMINAL:
            return
        with anyio.CancelScope(shield=True), anyio.move_on_after(self.cancel_timeout):
            try:
                card = await self._card(client)
                endpoint, _ = _interface(card)
                await self._call(client, endpoint, "CancelTask", {"id": followed.task_id})
                followed.state = "TASK_STATE_CANCELED"
            except (httpx.HTTPError, A2AError, ValueError):
                return  # the agent is gone or refuses: nothing more can be done from here


def _result(response: JSONValue) -> JSONObject:
    if not isinstance(response, dict):
        raise A2AError("not a JSON-RPC response")
    if "error" in response:
        error = response["error"] or {}
        if not isinstance(error, dict):
            raise A2AError(f"a JSON-RPC error that is not an object: {error!r}")
        raise A2AError(f"{error.get('code')}: {error.get('message')}")
    result = response.get("result")
    if not isinstance(result, dict):
        raise A2AError("a JSON-RPC response without a result")
    return result


def _interface(card: Mapping[str, Any]) -> tuple[str, bool]:
    """The card's JSON-RPC URL (A2A 1.0), and whether the agent streams."""
    for interface in card.get("supportedInterfaces") or ():
        if interface.get("protocolBinding") == "JSONRPC" and str(
            interface.get("protocolVersion", "1.0")
        ).startswith("1."):
            streaming = bool((card.get("capabilities") or {}).get("streaming"))
            return str(interface["url"]), streaming
    raise A2AError("the agent card names no JSON-RPC interface of A2A 1.0")


def _time_left() -> float | None:
    deadline = anyio.current_effective_deadline()
    if deadline == math.inf:
        return None
    return max(0.0, deadline - anyio.current_time())


def _failed(path: str, why: str) -> ChildOutcome:
    return ChildOutcome.failed(path, why)


def _outcome(name: str, path: str, label: str, followed: _Followed) -> ChildOutcome:
    match followed.state:
        case "TASK_STATE_COMPLETED":
            return ChildOutcome(
                status="completed",
                answer=followed.answer,
                diff=FileDiff(changes={}, label=label),
                path=path,
            )
        case "TASK_STATE_INPUT_REQUIRED" | "TASK_STATE_AUTH_REQUIRED":
            why = f"The A2A agent {name!r} waits for input it cannot get here: {followed.message}"
        case "TASK_STATE_CANCELED":
            why = f"The A2A agent {name!r} cancelled the task."
        case "TASK_STATE_REJECTED":
            why = f"The A2A agent {name!r} rejected the task: {followed.message}"
        case state:
            why = f"The A2A agent {name!r} ended the task {state}: {followed.message}"
    return _failed(path, why)


async def _close(client: httpx.AsyncClient) -> None:
    await client.aclose()
