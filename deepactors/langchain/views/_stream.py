"""LangGraph stream parts from a run's typed events (see :mod:`deepactors.langchain.views`)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple, TypeAlias, final, get_args

from ...events import (
    CustomEvent,
    Event,
    Interrupted,
    ModelCallFinished,
    ModelCallStarted,
    ModelDelta,
    RunFinished,
    StateUpdated,
    SubagentCancelled,
    SubagentFailed,
    SubagentFinished,
    SubagentInterrupted,
    ToolCallStarted,
)
from ...interrupts import interrupt_view
from ...messages import AssistantMessage, Content, ThinkingBlock, ToolMessage
from ._steps import checkpoint_payload, step_id, task_result, task_start
from ._views import (
    Namespace,
    content_to_lc,
    event_to_json,
    interrupts_to_lc,
    invalid_call_to_lc,
    jsonable,
    message_to_lc,
    namespace_of,
    tool_call_to_lc,
    update_to_lc,
    usage_to_lc,
    values_to_lc,
)

__all__ = ["STREAM_MODES", "LangGraphStream", "StreamMode", "StreamPart", "parse_stream_modes"]

StreamMode: TypeAlias = Literal[
    "values",
    "updates",
    "messages",
    "custom",
    "events",
    "debug",
    "events-lite",
    "tasks",
    "checkpoints",
]
STREAM_MODES: tuple[StreamMode, ...] = get_args(StreamMode)
"""Modes :class:`LangGraphStream` produces (``messages-tuple`` is read as ``messages``).

``events-lite`` is ``events`` without :class:`~deepactors.events.StateUpdated`, whose
values are an actor's whole state at every update: what a remote subagent's parent
relays (:mod:`deepactors.remote`), at a cost that does not grow with the state."""


@final
class StreamPart(NamedTuple):
    """One part of a LangGraph stream: a tuple ``(namespace, mode, data)``.

    ``namespace`` is ``()`` for the root agent. ``data`` is JSON-ready, except
    for ``messages`` parts, whose data is a ``(message_chunk, metadata)`` pair.
    """

    namespace: Namespace
    mode: StreamMode
    data: Any


def parse_stream_modes(modes: str | Sequence[str] | None) -> tuple[StreamMode, ...]:
    """Check stream modes; ``messages-tuple`` is read as ``messages``.

    Raises:
        ValueError: An unknown mode; the message lists the known ones.
    """
    if modes is None:
        return ("values",)
    items = [modes] if isinstance(modes, str) else list(modes)
    out: list[StreamMode] = []
    for mode in items:
        name = "messages" if mode == "messages-tuple" else mode
        if name not in STREAM_MODES:
            known = ", ".join([*STREAM_MODES, "messages-tuple"])
            raise ValueError(f"unknown stream mode {mode!r}; known: {known}")
        if name not in out:
            out.append(name)
    return tuple(out)


@dataclass(slots=True)
class _Actor:
    """What the adapter remembers of one actor between its events."""

    step: int = 0
    called: bool = False  # a model call has started (what came before was input)
    values: Mapping[str, object] | None = None  # latest state not yet streamed
    shown: Mapping[str, object] | None = (
        None  # the last values part streamed (an interrupt repeats it)
    )
    update: dict[str, object] = field(default_factory=dict)  # updates not yet streamed
    streamed: bool = False  # text of the current model call went out as chunks
    answered: bool = False  # an answer's update waits for its last message chunk
    task: str | None = None  # the task running now ("tasks" mode)
    task_node: str = ""  # its node
    latest: Mapping[str, object] | None = None  # the state as last seen ("tasks" input)
    checkpoint: str | None = None  # the last checkpoint streamed ("checkpoints" parent)
    run_id: str = ""  # its run (the steps' ids)


@final
class LangGraphStream:
    """Turns one run's typed events into LangGraph stream parts.

    Feed every event of the run, in order, to :meth:`feed`; it returns the parts
    to send (often none). ``values`` and ``updates`` follow LangGraph's steps: a
    model answer is one step, and everything else an actor applies until its next
    model call (a turn's tool results, hook updates, the input) is the next.

    Args:
        modes: The modes wanted (see :func:`parse_stream_modes`).
        subgraphs: Also stream subagents' parts, under their namespaces; without
            it only the root agent's parts are streamed.
        thread_id: Put in ``messages`` metadata.
        objects: Data as deepactors objects (messages with ``.content``,
            ``.type``, ``.pretty_print()``; files readable as ``FileData``;
            interrupts with ``.value``), as ``agent.astream(stream_mode=...)``
            yields them in-process; else JSON in LangChain's shapes (the server).
        tags: The run config's ``tags``, put in ``messages`` metadata.
        tool_namespaces: Name a subagent's namespace as LangGraph does, after the
            node that ran it (``("tools:<id>",)``), instead of by its actor path
            (``("task-2:researcher",)``); scripts ported from deepagents test
            ``ns[-1].startswith("tools:")``.

    Raises:
        ValueError: An unknown mode.
    """

    def __init__(
        self,
        modes: str | Sequence[str] | None = "values",
        *,
        subgraphs: bool = False,
        thread_id: str | None = None,
        objects: bool = False,
        tags: Sequence[str] = (),
        tool_namespaces: bool = False,
    ) -> None:
        self.modes = parse_stream_modes(modes)
        self.subgraphs = subgraphs
        self.thread_id = thread_id
        self.objects = objects
        self.tags = list(tags)
        self.tool_namespaces = tool_namespaces
        self._actors: dict[str, _Actor] = {}
        self._state_modes = bool({"values", "updates", "tasks", "checkpoints"} & set(self.modes))
        self._steps = bool({"tasks", "checkpoints"} & set(self.modes))

    def feed(self, event: Event) -> list[StreamPart]:
        """The parts this event produces, in order."""
        ns = self._namespace(event.path)
        if ns and not self.subgraphs:
            return self._bookkeeping(event)
        out: list[StreamPart] = []
        if "events" in self.modes or "debug" in self.modes:
            data = event_to_json(event)
            out.extend(StreamPart(ns, m, data) for m in ("events", "debug") if m in self.modes)
        if "events-lite" in self.modes and not isinstance(event, StateUpdated):
            out.append(StreamPart(ns, "events-lite", event_to_json(event)))
        match event:
            case StateUpdated():
                out.extend(self._state(ns, event))
            case ModelCallStarted():
                out.extend(self._flush(ns, event.path))
                actor = self._actor(event.path)
                actor.step, actor.called, actor.streamed = event.step, True, False
                if "tasks" in self.modes:
                    out.append(self._task_start(ns, event, actor, "model"))
            case ToolCallStarted():
                actor = self._actor(event.path)
                if "tasks" in self.modes and actor.task is None:
                    out.append(self._task_start(ns, event, actor, "tools"))
            case ModelDelta():
                if "messages" in self.modes and event.kind != "tool_input":
                    self._actor(event.path).streamed = True
                    out.append(self._delta(ns, event))
            case ModelCallFinished():
                if "messages" in self.modes:
                    out.extend(self._answer(ns, event))
                    actor = self._actor(event.path)
                    if actor.answered:
                        # LangGraph streams a model's message chunks, then its update.
                        actor.answered = False
                        out.extend(self._flush(ns, event.path, node="model"))
            case CustomEvent():
                if "custom" in self.modes:
                    out.append(StreamPart(ns, "custom", jsonable(event.data)))
            case Interrupted():
                out.extend(self._flush(ns, event.path))
                out.extend(self._interrupt(ns, event.requests, self._actor(event.path).shown))
                out.extend(self._task_stopped(ns, event))
            case RunFinished():
                out.extend(self._flush(ns, event.path))
                self._actors.pop(event.path, None)
            case (
                SubagentFinished() | SubagentFailed() | SubagentCancelled() | SubagentInterrupted()
            ):
                out.extend(self._flush(self._namespace(event.child), event.child))
                self._actors.pop(event.child, None)
        return out

    def _namespace(self, path: str) -> Namespace:
        ns = namespace_of(path)
        if not self.tool_namespaces or not ns:
            return ns
        # LangGraph names a subgraph's namespace "<node>:<task id>"; a subagent
        # runs in the tools node, and its path is unique within the run.
        parts = path.split("/")
        return tuple(
            f"tools:{uuid.uuid5(uuid.NAMESPACE_OID, '/'.join(parts[: i + 2]))}"
            for i in range(len(ns))
        )

    def _bookkeeping(self, event: Event) -> list[StreamPart]:
        # A subagent's events are not streamed, but its actor's memory must end.
        if isinstance(
            event, SubagentFinished | SubagentFailed | SubagentCancelled | SubagentInterrupted
        ):
            self._actors.pop(event.child, None)
        return []

    def _actor(self, path: str) -> _Actor:
        actor = self._actors.get(path)
        if actor is None:
            actor = self._actors[path] = _Actor()
        return actor

    def _state(self, ns: Namespace, event: StateUpdated) -> list[StreamPart]:
        if not self._state_modes and "messages" not in self.modes:
            return []
        actor = self._actor(event.path)
        out: list[StreamPart] = []
        answer = _is_answer(event.update)
        if answer:
            out.extend(self._flush(ns, event.path))
        elif "messages" in self.modes:
            for m in event.update.get("messages", ()):
                if isinstance(m, ToolMessage):
                    meta = self._metadata(event.path, "tools", actor.step)
                    data = m if self.objects else message_to_lc(m)
                    out.append(StreamPart(ns, "messages", (data, meta)))
        if not self._state_modes:
            return out
        actor.values = actor.latest = event.values
        actor.run_id = event.run_id
        _fold(actor.update, event.update)
        if answer and "messages" in self.modes:
            actor.answered = True  # flushed after the answer's last chunk
        elif answer:
            out.extend(self._flush(ns, event.path, node="model"))
        return out

    def _flush(self, ns: Namespace, path: str, *, node: str | None = None) -> list[StreamPart]:
        actor = self._actors.get(path)
        if actor is None or actor.values is None:
            return []
        out: list[StreamPart] = []
        name = node or ("tools" if _has_tool_result(actor.update) else "middleware")
        update: object = None
        if self._steps or ("updates" in self.modes and (actor.called or node is not None)):
            update = dict(actor.update) if self.objects else update_to_lc(actor.update)
        if "updates" in self.modes and (actor.called or node is not None):
            out.append(StreamPart(ns, "updates", {name: update}))
        values: Mapping[str, object] | None = None
        if "values" in self.modes or "checkpoints" in self.modes:
            values = values_to_lc(actor.values, objects=self.objects)
        if "values" in self.modes:
            out.append(StreamPart(ns, "values", values))
            actor.shown = values
        if self._steps:
            out.extend(self._step_end(ns, path, actor, name, update, values))
        actor.values, actor.update = None, {}
        return out

    def _task_start(self, ns: Namespace, event: Event, actor: _Actor, node: str) -> StreamPart:
        """A ``tasks`` part: the step's node starts, with the state it starts from."""
        actor.task, actor.task_node = step_id(event.run_id, event.path, actor.step, node), node
        state: Mapping[str, object] | None = None
        if actor.latest is not None:
            state = values_to_lc(actor.latest, objects=self.objects)
        return StreamPart(ns, "tasks", task_start(actor.task, node, state))

    def _task_stopped(self, ns: Namespace, event: Interrupted) -> list[StreamPart]:
        """The ``tasks`` part of a task an interrupt stopped: no writes, its interrupts."""
        actor = self._actor(event.path)
        task, actor.task = actor.task, None
        if "tasks" not in self.modes or task is None:
            return []
        pending = (
            interrupt_view(event.requests) if self.objects else interrupts_to_lc(event.requests)
        )
        stopped = {**task_result(task, actor.task_node, {}), "interrupts": pending}
        return [StreamPart(ns, "tasks", stopped)]

    def _step_end(
        self,
        ns: Namespace,
        path: str,
        actor: _Actor,
        name: str,
        update: object,
        values: Mapping[str, object] | None,
    ) -> list[StreamPart]:
        """The ``tasks`` and ``checkpoints`` parts of a step that ended (see ``_steps``)."""
        out: list[StreamPart] = []
        tasks: list[dict[str, object]] = []
        if actor.task is not None and name in ("model", "tools"):
            result = task_result(actor.task, name, update)
            tasks.append({"id": actor.task, "name": name, "result": update, "interrupts": []})
            if "tasks" in self.modes:
                out.append(StreamPart(ns, "tasks", result))
        actor.task = None
        if "checkpoints" in self.modes:
            checkpoint = step_id(actor.run_id, path, actor.step, f"checkpoint:{name}")
            payload = checkpoint_payload(
                thread_id=self.thread_id,
                namespace=self._namespace(path),
                checkpoint=checkpoint,
                parent=actor.checkpoint,
                values=values,
                step=actor.step,
                source="loop" if actor.called else "input",
                next_nodes=_next_nodes(name, actor.update),
                tasks=tasks,
            )
            actor.checkpoint = checkpoint
            out.append(StreamPart(ns, "checkpoints", payload))
        return out

    def _interrupt(
        self,
        ns: Namespace,
        requests: Sequence[Mapping[str, object]],
        shown: Mapping[str, object] | None,
    ) -> list[StreamPart]:
        pending = interrupt_view(requests) if self.objects else interrupts_to_lc(requests)
        data = {"__interrupt__": pending}
        # As LangGraph (1.x) does: an interrupt reaches a client that asked for
        # state as an update, and as values (the state so far, with it), so the
        # last values of an interrupted run say it stopped (RemoteGraph.invoke
        # returns them).
        out: list[StreamPart] = []
        if "updates" in self.modes:
            out.append(StreamPart(ns, "updates", data))
        if "values" in self.modes and requests:
            # A breakpoint's stop (no request) is an update only, as LangGraph's.
            out.append(StreamPart(ns, "values", {**(shown or {}), **data}))
        return out

    def _metadata(self, path: str, node: str, step: int) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "langgraph_node": node,
            "langgraph_step": step,
            "langgraph_checkpoint_ns": "|".join(self._namespace(path)),
            "path": path,
            # The agent answering, as LangChain's create_agent names it: the
            # subagent's name below the root, else the root agent's.
            "lc_agent_name": path.rsplit("/", 1)[-1].partition(":")[2] or path,
        }
        if self.tags and node == "model":
            meta["tags"] = list(self.tags)  # a model call's config tags, as LangChain's
        if self.thread_id is not None:
            meta["thread_id"] = self.thread_id
        return meta

    def _chunk_id(self, event: Event) -> str:
        return f"run-{event.run_id}-{self._actor(event.path).step}"

    def _delta(self, ns: Namespace, event: ModelDelta) -> StreamPart:
        meta = self._metadata(event.path, "model", self._actor(event.path).step)
        if self.objects:
            blocks: Content = event.text
            if event.kind == "thinking":
                blocks = [ThinkingBlock(thinking=event.text)]
            piece = AssistantMessage(id=self._chunk_id(event), content=blocks)
            return StreamPart(ns, "messages", (piece, meta))
        content: str | list[dict[str, Any]] = event.text
        if event.kind == "thinking":
            content = [{"type": "thinking", "thinking": event.text, "index": event.index}]
        chunk = _chunk(self._chunk_id(event), content)
        return StreamPart(ns, "messages", (chunk, meta))

    def _answer(self, ns: Namespace, event: ModelCallFinished) -> list[StreamPart]:
        """The end of a model call: the calls, usage and stop reason (and the text,
        when none of it was streamed), as the last chunk(s) of the message."""
        message = event.message
        actor = self._actor(event.path)
        meta = self._metadata(event.path, "model", event.step)
        if self.objects:
            # The last piece of the message: its calls, usage and stop reason, and
            # its text unless that went out piece by piece already.
            last = message.model_copy(
                update={
                    "id": self._chunk_id(event),
                    "content": "" if actor.streamed else message.content,
                }
            )
            if not message.tool_calls:
                return [StreamPart(ns, "messages", (last, meta))]
            # As LangChain streams it: the calls in a chunk, then an empty last one.
            with_calls = last.model_copy(update={"usage": None, "stop_reason": None})
            end = last.model_copy(update={"content": "", "tool_calls": []})
            return [
                StreamPart(ns, "messages", (with_calls, meta)),
                StreamPart(ns, "messages", (end, meta)),
            ]
        chunk = _chunk(
            self._chunk_id(event), "" if actor.streamed else content_to_lc(message.content)
        )
        calls = [c for c in message.tool_calls if c.error is None]
        chunk["tool_calls"] = [tool_call_to_lc(c) for c in calls]
        chunk["tool_call_chunks"] = [
            {
                "name": c.name,
                "args": json.dumps(c.args),
                "id": c.id,
                "index": i,
                "type": "tool_call_chunk",
            }
            for i, c in enumerate(calls)
        ]
        chunk["invalid_tool_calls"] = [
            invalid_call_to_lc(c) for c in message.tool_calls if c.error is not None
        ]
        chunk["usage_metadata"] = usage_to_lc(message.usage)
        meta = {"model_name": message.model, "stop_reason": message.stop_reason}
        chunk["response_metadata"] = {k: v for k, v in meta.items() if v is not None}
        chunk["chunk_position"] = "last"
        return [StreamPart(ns, "messages", (chunk, meta))]


def _chunk(chunk_id: str, content: str | list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "type": "AIMessageChunk",
        "content": content,
        "id": chunk_id,
        "name": None,
        "additional_kwargs": {},
        "response_metadata": {},
        "tool_calls": [],
        "invalid_tool_calls": [],
        "tool_call_chunks": [],
        "usage_metadata": None,
    }


def _messages(update: Mapping[str, object]) -> Iterable[object]:
    """An update's messages (a list, as every channel update carries them), or none."""
    messages = update.get("messages")
    return messages if isinstance(messages, Iterable) else ()


def _is_answer(update: Mapping[str, object]) -> bool:
    return any(isinstance(m, AssistantMessage) for m in _messages(update))


def _has_tool_result(update: Mapping[str, object]) -> bool:
    return any(isinstance(m, ToolMessage) for m in _messages(update))


def _next_nodes(name: str, update: Mapping[str, object]) -> list[str]:
    """The node LangGraph would run after a step: the tools after an answer with
    calls, the model after tool results or input, none after a final answer."""
    if name != "model":
        return ["model"]
    answers = [m for m in _messages(update) if isinstance(m, AssistantMessage)]
    return ["tools"] if answers and answers[-1].tool_calls else []


def _fold(into: dict[str, object], update: Mapping[str, object]) -> None:
    """Gather the updates of one step: messages append, files merge, the rest replace."""
    for name, value in update.items():
        if name == "messages":
            into["messages"] = [*_messages(into), *_messages(update)]
        elif name == "files" and isinstance(value, Mapping):
            files = into.get("files")
            into["files"] = {**(files if isinstance(files, Mapping) else {}), **value}
        else:
            into[name] = value
