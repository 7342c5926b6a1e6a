"""Request bodies of the Agent Protocol, validated with pydantic.

Fields ``langgraph-sdk`` sends that have no meaning here (tracing, durability,
feedback keys) are accepted and ignored; fields that would change what a run
does and are not implemented (webhooks, ``interrupt_before``, a ``Command``'s
``goto`` or ``update``) are refused with a 422 that names them, never ignored.
A checkpoint to run from is taken as LangGraph's server takes it (see
``_checkpoints.py``).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from typing import Literal, TypeVar

import pydantic_core
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from starlette.exceptions import HTTPException
from starlette.requests import Request

from ..limits import ttl_seconds
from ._wire_json import TTLStrategy

__all__ = [
    "AssistantSearch",
    "Checkpoint",
    "HistoryRequest",
    "RunCreate",
    "RunsCancel",
    "StoreDelete",
    "StoreNamespaces",
    "StorePut",
    "StoreSearch",
    "ThreadCreate",
    "ThreadPatch",
    "ThreadSearch",
    "ThreadStateUpdate",
    "parse_body",
    "read_body",
    "refuse_non_finite",
]

Body = TypeVar("Body", bound=BaseModel)

# Bytes that may hold a number pydantic-core reads as a non-finite float: the
# NaN/Infinity literals (which it accepts, as Python's json does) or a number too
# large for a float (an exponent of 100 or more, or 200+ integer digits, since
# 10**(209 + 99) is the smallest that overflows with a two-digit exponent). A
# superset (it also matches inside strings): a match only triggers the exact
# check, so the common body is scanned once at C speed and not walked.
_MAYBE_NON_FINITE = re.compile(rb"NaN|Infinity|[eE][+-]?0*[1-9][0-9]{2}|[0-9]{200}")


END = "__end__"
"""LangGraph's ``END``: the one ``goto`` target a command may name here."""


class _Body(BaseModel):
    model_config = ConfigDict(extra="ignore")


class _Command(BaseModel):
    model_config = ConfigDict(extra="forbid")

    resume: object = None
    update: object = None
    goto: object = None
    # LangGraph's Command as RemoteGraph sends it (dataclasses.asdict): the
    # parent graph, when there is one, is the client's business, never ours.
    graph: object = None

    @property
    def ends(self) -> bool:
        """``goto: "__end__"``: end the thread's pending work (Agent Chat UI's
        "Mark as resolved"), as LangGraph's ``Command(goto=END)`` does."""
        return bool(self.goto == END or self.goto == [END])

    @property
    def node(self) -> str | None:
        """``goto: "model"`` or ``"tools"`` (or a one-item list of it): the node to
        continue the thread at; None otherwise."""
        goto = self.goto
        if isinstance(goto, list) and len(goto) == 1:
            goto = goto[0]
        return goto if goto in ("model", "tools") else None

    @property
    def moves(self) -> bool:
        """Whether it updates the state or goes to a node (not only a resume)."""
        return self.node is not None or bool(self.update)


class Checkpoint(_Body):
    """A checkpoint as clients name one: ``{"checkpoint_id": ..., "checkpoint_ns": ""}``.

    The SDKs send it with ``thread_id`` and ``checkpoint_map`` too (ignored:
    the thread is the request's); with no ``checkpoint_id`` it means the head.
    """

    checkpoint_id: str | None = None
    checkpoint_ns: str | None = None


class RunCreate(_Body):
    """``POST .../runs``, ``.../runs/stream``, ``.../runs/wait``."""

    assistant_id: str = Field(min_length=1)
    input: dict[str, object] | None = None
    command: _Command | None = None
    config: dict[str, object] | None = None
    context: dict[str, object] | None = None
    metadata: dict[str, object] | None = None
    stream_mode: str | list[str] = "values"
    stream_subgraphs: bool = False
    stream_resumable: bool = False
    on_disconnect: Literal["cancel", "continue"] | None = None
    on_completion: Literal["delete", "keep"] | None = None
    multitask_strategy: Literal["reject", "interrupt", "rollback", "enqueue"] = "enqueue"
    if_not_exists: Literal["create", "reject"] = "reject"
    after_seconds: float | None = Field(default=None, ge=0)
    # Where the run starts from: the thread's head, or a checkpoint to fork from.
    checkpoint: Checkpoint | None = None
    checkpoint_id: str | None = None
    # POSTed the run's outcome when it ends (see deepactors.server.webhooks).
    webhook: str | None = None
    # Breakpoints: the nodes ("model", "tools", "*") the run stops before/after.
    interrupt_before: str | list[str] | None = None
    interrupt_after: str | list[str] | None = None

    def without_stream(self) -> RunCreate:
        """This body for a run whose frames are not kept (``stream_resumable`` off)."""
        if not self.stream_resumable:
            return self
        return self.model_copy(update={"stream_resumable": False})

    def refuse_unsupported(self) -> None:
        """Raise a 422 for a field whose feature this server does not have."""
        if self.command is not None:
            # Empty is what LangGraph's clients send for "none" (goto: [],
            # update: null), and is accepted as such.
            update = self.command.update
            if update not in (None, {}, []) and not isinstance(update, dict):
                raise HTTPException(422, "command.update: an object of channel values")
            goto = self.command.goto
            if goto not in (None, [], "") and not self.command.ends and self.command.node is None:
                raise HTTPException(
                    422,
                    "command.goto: 'model' or 'tools' (continue the thread at that node), or "
                    f"{END!r} (end the thread's pending work), not {goto!r}",
                )
            if self.command.ends and self.command.resume is not None:
                raise HTTPException(
                    422, f"command: give either resume or goto {END!r} (which ends), not both"
                )
            if self.command.resume is None and not self.command.ends and not self.command.moves:
                raise HTTPException(
                    422, "command: give resume (the decisions), update, or goto a node"
                )
            # Agent Chat UI resumes with submit({}, {command}): an empty input is none.
            if self.input:
                raise HTTPException(422, "input: give either input or command, not both")


def _thread_ttl(value: object) -> float | None:
    """A thread's ``ttl`` as the SDKs send it, in seconds: minutes, or
    ``{"ttl": minutes, "strategy": "delete" | "keep_latest"}`` (the strategy is
    read by :func:`_ttl_strategy`)."""
    if value is None:
        return None
    minutes = value
    if isinstance(value, dict):
        unknown = set(value) - {"ttl", "strategy"}
        if unknown:
            raise ValueError(f"unknown keys {sorted(unknown)}: give 'ttl' (minutes) and 'strategy'")
        strategy = value.get("strategy", "delete")
        if strategy not in ("delete", "keep_latest"):
            raise ValueError(f"strategy: 'delete' or 'keep_latest', not {strategy!r}")
        minutes = value.get("ttl")
    return ttl_seconds(minutes, what="ttl")


def _ttl_strategy(data: object) -> object:
    """Carry the strategy of a ``ttl`` object to the body's ``ttl_strategy``."""
    if isinstance(data, dict) and isinstance(ttl := data.get("ttl"), dict):
        strategy = ttl.get("strategy", "delete")
        if isinstance(strategy, str) and strategy in ("delete", "keep_latest"):
            return {**data, "ttl_strategy": strategy}
    return data


class ThreadCreate(_Body):
    """``POST /threads``."""

    thread_id: str | None = Field(default=None, min_length=1, max_length=256)
    metadata: dict[str, object] = Field(default_factory=dict)
    if_exists: Literal["raise", "do_nothing"] = "raise"
    supersteps: list[object] | None = None
    ttl: float | None = None
    """Seconds of idleness before the thread is deleted (sent in minutes)."""
    ttl_strategy: TTLStrategy = "delete"
    """What the server does then (the ``strategy`` of a ``ttl`` object)."""

    _check_ttl = field_validator("ttl", mode="before")(_thread_ttl)
    _strategy = model_validator(mode="before")(_ttl_strategy)


class ThreadPatch(_Body):
    """``PATCH /threads/{thread_id}``."""

    metadata: dict[str, object] = Field(default_factory=dict)
    ttl: float | None = None
    """A new time to live in seconds (sent in minutes); None keeps the thread's."""
    ttl_strategy: TTLStrategy = "delete"
    """What the server does then (the ``strategy`` of a ``ttl`` object)."""

    _check_ttl = field_validator("ttl", mode="before")(_thread_ttl)
    _strategy = model_validator(mode="before")(_ttl_strategy)


class ThreadSearch(_Body):
    """``POST /threads/search`` and ``/threads/count``."""

    metadata: dict[str, object] | None = None
    values: dict[str, object] | None = None
    ids: list[str] | None = None
    status: Literal["idle", "busy", "interrupted", "error"] | None = None
    limit: int = Field(default=10, ge=0, le=10_000)
    offset: int = Field(default=0, ge=0)
    sort_by: Literal["thread_id", "status", "created_at", "updated_at"] | None = None
    sort_order: Literal["asc", "desc"] | None = None


class ThreadStateUpdate(_Body):
    """``POST /threads/{thread_id}/state``."""

    values: dict[str, object] | None = None
    as_node: str | None = None
    checkpoint_id: str | None = None
    checkpoint: Checkpoint | None = None


class HistoryRequest(_Body):
    """``POST /threads/{thread_id}/history`` and ``/state/checkpoint``."""

    limit: int = Field(default=10, ge=1, le=1000)
    before: str | dict[str, object] | None = None
    metadata: dict[str, object] | None = None
    checkpoint: Checkpoint | None = None
    subgraphs: bool = False


class RunsCancel(_Body):
    """``POST /runs/cancel``."""

    thread_id: str | None = None
    run_ids: list[str] | None = None
    status: Literal["pending", "running", "all"] | None = None


class AssistantSearch(_Body):
    """``POST /assistants/search`` and ``/assistants/count``."""

    graph_id: str | None = None
    name: str | None = None
    metadata: dict[str, object] | None = None
    limit: int = Field(default=10, ge=0, le=1000)
    offset: int = Field(default=0, ge=0)


def _namespace(value: list[str]) -> list[str]:
    for label in value:
        if not label or "." in label:
            # (A user id with a '.' starts its namespaces as
            # deepactors.server.auth.namespace_label writes it.)
            raise ValueError(
                f"namespace label {label!r} must be non-empty, without '.' (a user id "
                "with one is written with %2E for it, and %25 for '%')"
            )
    return value


class StorePut(_Body):
    """``PUT /store/items``."""

    namespace: list[str] = Field(min_length=1)
    key: str = Field(min_length=1)
    value: dict[str, object]
    index: object = None
    ttl: float | None = None

    _check_ns = field_validator("namespace")(_namespace)


class StoreDelete(_Body):
    """``DELETE /store/items``."""

    namespace: list[str] = Field(min_length=1)
    key: str = Field(min_length=1)

    _check_ns = field_validator("namespace")(_namespace)


class StoreSearch(_Body):
    """``POST /store/items/search``."""

    namespace_prefix: list[str] = Field(default_factory=list)
    filter: dict[str, object] | None = None
    limit: int = Field(default=10, ge=0, le=10_000)
    offset: int = Field(default=0, ge=0)
    query: str | None = None
    refresh_ttl: bool | None = None

    _check_ns = field_validator("namespace_prefix")(_namespace)


class StoreNamespaces(_Body):
    """``POST /store/namespaces``."""

    prefix: list[str] | None = None
    suffix: list[str] | None = None
    max_depth: int | None = Field(default=None, ge=1)
    limit: int = Field(default=100, ge=0, le=10_000)
    offset: int = Field(default=0, ge=0)


async def read_body(request: Request, model: type[Body]) -> Body:
    """The request's JSON body as ``model``; a 422 naming the field when it is not.

    An empty body reads as ``{}`` (the SDK sends none for some calls).
    """
    return parse_body(await request.body(), model)


def parse_body(raw: bytes, model: type[Body]) -> Body:
    """A request body's bytes as ``model`` (see :func:`read_body`).

    Raises:
        HTTPException: 422, naming the field, when the body is not such a model.
    """
    if _MAYBE_NON_FINITE.search(raw):
        refuse_non_finite(raw)
    try:
        if not raw.strip():
            return model.model_validate({})
        # Parsed and validated in one pass by pydantic-core (no dict of Python
        # objects first): the streaming endpoints parse one per request.
        return model.model_validate_json(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        if err["type"] == "json_invalid":
            raise HTTPException(422, f"body: not valid JSON ({err['msg']})") from None
        if err["type"] == "model_type" and not err["loc"]:
            try:
                kind = type(json.loads(raw)).__name__
            except ValueError:
                kind = "JSON"
            raise HTTPException(422, f"body: must be a JSON object, not {kind}") from None
        raise HTTPException(422, validation_detail(exc)) from None


def refuse_non_finite(raw: bytes) -> None:
    """Raise a 422 naming the first non-finite number in ``raw``, if there is one.

    pydantic's ``allow_inf_nan=False`` covers only ``float`` fields, not the
    ``Any`` values of metadata, input or store items, where a NaN got through to
    be stored and then broke every response that held it (JSON has no NaN).
    """
    try:
        data = pydantic_core.from_json(raw)
    except ValueError:
        return  # not JSON: validation says so, with its own message
    stack: list[tuple[object, str]] = [(data, "")]
    while stack:
        node, at = stack.pop()
        if isinstance(node, float):
            if not math.isfinite(node):
                raise HTTPException(
                    422,
                    f"{at or 'body'}: {node} is not a finite number (JSON has no NaN or Infinity)",
                )
            continue
        if isinstance(node, dict):
            items: Iterable[tuple[object, object]] = node.items()
        elif isinstance(node, list):
            items = enumerate(node)
        else:
            continue
        # Reversed, so the first one in the body is the one named.
        stack.extend(reversed([(v, f"{at}.{k}" if at else str(k)) for k, v in items]))


def validation_detail(exc: ValidationError) -> str:
    """The first problem of a validation error, naming its field."""
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"]) or "body"
    return f"{where}: {err['msg']}"
