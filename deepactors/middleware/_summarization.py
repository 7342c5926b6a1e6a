"""``SummarizationMiddleware``: older messages become a summary; the full history goes to a file.

What the model sees after a summary is ``[summary, *kept tail]``; the thread's
state keeps every message (checkpoints hold the whole conversation), and a
private channel records where the summary cuts in, so the next run of the
thread shows the model the same summary. The dropped messages are *appended*
to ``/conversation_history/<thread>.md`` in the agent's backend (each summary
writes only what it drops), and the summary tells the model where that file is.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, TypedDict, TypeVar

import anyio
import anyio.to_thread

from .._core.logs import get_logger
from ..context import RunContext, RunKey
from ..errors import ConfigurationError, ContextWindowExceeded
from ..events import ContextSummarized
from ..hooks import AgentMiddleware, ModelHandler
from ..messages import AssistantMessage, Message, SystemMessage, ToolMessage, UserMessage
from ..models import ChatModel, ModelRequest, context_window_of, resolve_model
from ..state import Channel, State
from ._compact import SUMMARY_CHANNEL, compact_tool_for
from ._retry import ModelRetryMiddleware
from ._summary_call import offload, write_summary
from ._summary_policy import ContextSize, Limits, check_size, cut_point, resolve_limits
from ._summary_policy import truncate_args as _truncate_args
from ._tokens import TokenCounter, message_tokens

__all__ = ["SUMMARY_CHANNEL", "SummarizationMiddleware"]

_log = get_logger("deepactors")
T = TypeVar("T")

_NO_CALLS = frozenset({ToolMessage, UserMessage, SystemMessage})

_OFF_LOOP = 2_000
"""New messages since the last model call past which they are measured in a worker thread."""


async def _inline(fn: Callable[[], T]) -> T:
    return fn()


async def _in_thread(fn: Callable[[], T]) -> T:
    return await anyio.to_thread.run_sync(fn)


SUMMARY_MESSAGE = """\
[This conversation was summarized to save context: {dropped} earlier messages are no \
longer shown.{where}]

<summary>
{summary}
</summary>"""


@dataclass(slots=True)
class _RunView:
    """One run's bookkeeping: the token counter and the pieces of its view."""

    counter: TokenCounter = field(default_factory=TokenCounter)
    summary: UserMessage | None = None
    summary_of: tuple[object, ...] = ()
    truncated: dict[str, tuple[int, AssistantMessage]] = field(default_factory=dict)
    checked_upto: int = 0
    tokens: int = 0
    messages: int = 0


class _Marker(TypedDict, total=False):
    """The summary channel's value: where the history was cut, and what stands for it."""

    after: str  # the id of the last message summarized
    last: str  # the id of the newest message when it was
    summary: str
    file: str | None  # where the summarized messages were written (None: nowhere)
    dropped: int  # messages summarized, all summaries together
    summaries: int
    compact: bool  # the model asked for a summary (compact_conversation)


def _merge(current: Mapping[str, object] | None, update: Mapping[str, object]) -> dict[str, object]:
    return {**(current or {}), **update}


class SummarizationMiddleware(AgentMiddleware):
    """Keep a long run inside the model's context window (in the default stack).

    Before each model call the request is measured (the provider's usage of the
    previous call plus an estimate of what came since, or an estimate of the
    whole where no usage exists). Over ``trigger``, the messages older than
    ``keep`` are summarized by a separate call to the model, with no tools, over
    those messages (trimmed first to ``trim_tokens_to_summarize``, whole turns,
    newest first, after the previous summary); they are appended to the history
    file, and from then on the model sees the summary and the kept tail. A
    :class:`~deepactors.errors.ContextWindowExceeded` from the model also
    summarizes, then retries the call once.

    Tool-call arguments longer than ``max_arg_chars`` in messages older than the
    newest ``keep_args_messages`` are shortened in what the model sees (a
    ``write_file`` of a big file need not be resent every turn); the state keeps
    them whole.

    Args:
        model: The model that writes summaries, and whose context window the
            fractions refer to; ``create_deep_agent`` passes the agent's own.
        trigger: When to summarize: ``("tokens", n)``, ``("fraction", f)`` of the
            window, or ``("messages", n)``. Default ``("fraction", 0.85)`` when
            the model declares a window, else ``("tokens", 170_000)``.
        keep: How much of the newest conversation stays as it is. Default
            ``("fraction", 0.10)`` with a window, else ``("messages", 6)``.
        trim_tokens_to_summarize: The most tokens of old conversation one summary
            call reads (default: the trigger's size, so it fits wherever the
            agent's own calls do).
        history_dir: Folder of the history files in the agent's backend.
        max_arg_chars: Tool-call arguments longer than this are shortened in old turns.
        keep_args_messages: How many newest messages keep their arguments whole.
        summary_max_tokens: Output limit of the summary call.
        compact_tool: Give the model a ``compact_conversation`` tool to summarize
            on request (from half the trigger on).
    """

    channels: Mapping[str, Channel] = {SUMMARY_CHANNEL: Channel(reducer=_merge, private=True)}

    def __init__(
        self,
        model: ChatModel | str | None = None,
        *,
        trigger: ContextSize | None = None,
        keep: ContextSize | None = None,
        trim_tokens_to_summarize: int | None = None,
        history_dir: str = "/conversation_history",
        max_arg_chars: int = 2_000,
        keep_args_messages: int = 20,
        summary_max_tokens: int = 4_096,
        compact_tool: bool = False,
    ) -> None:
        self.trigger = None if trigger is None else check_size(trigger, "trigger")
        self.keep = None if keep is None else check_size(keep, "keep")
        if trim_tokens_to_summarize is not None and trim_tokens_to_summarize < 1:
            raise ConfigurationError("trim_tokens_to_summarize must be >= 1")
        if max_arg_chars < 1 or keep_args_messages < 0 or summary_max_tokens < 1:
            raise ConfigurationError(
                "max_arg_chars and summary_max_tokens must be >= 1, keep_args_messages >= 0"
            )
        if not history_dir.startswith("/"):
            raise ConfigurationError(f"history_dir must be an absolute path, not {history_dir!r}")
        self.trim_tokens_to_summarize = trim_tokens_to_summarize
        self.history_dir = history_dir.rstrip("/") or "/"
        self.max_arg_chars = max_arg_chars
        self.keep_args_messages = keep_args_messages
        self.summary_max_tokens = summary_max_tokens
        self.compact_tool = compact_tool
        self.model: ChatModel | None = None
        self._limits: Limits | None = None
        self._retry = ModelRetryMiddleware()
        self._key: RunKey[_RunView] = RunKey(f"{self.name}.view", _RunView)
        if model is not None:
            self.bind_model(model)
        self.tools = (compact_tool_for(self._key, lambda: self.limits),) if compact_tool else ()

    def bind_model(self, model: ChatModel | str) -> None:
        """Use ``model`` (the agent's, when none was given) for summaries and limits.

        Raises:
            ConfigurationError: A fraction was asked for and the model declares no window.
        """
        resolved = resolve_model(model)
        limits = resolve_limits(
            self.trigger, self.keep, self.trim_tokens_to_summarize, context_window_of(resolved)
        )
        self.model, self._limits = resolved, limits

    @property
    def limits(self) -> Limits:
        """The sizes in effect (known once the middleware has its model)."""
        if self._limits is None:
            raise ConfigurationError(
                "SummarizationMiddleware has no model: pass model=, or add it through "
                "create_deep_agent, which gives it the agent's"
            )
        return self._limits

    # -- the hook --------------------------------------------------------------

    async def wrap_model_call(
        self, request: ModelRequest, handler: ModelHandler
    ) -> AssistantMessage:
        """Send the summarized view; on a context overflow, summarize and retry once."""
        state, run = request.state, request.run
        if state is None or run is None:
            return await handler(request)
        view, _ = await self._prepare(request, state, run, force=False)
        try:
            return await handler(view)
        except ContextWindowExceeded:
            retry, summarized = await self._prepare(request, state, run, force=True)
            if not summarized:
                raise  # nothing left that a summary could replace
            return await handler(retry)

    async def _prepare(
        self, request: ModelRequest, state: State, run: RunContext, *, force: bool
    ) -> tuple[ModelRequest, bool]:
        """The request the model gets, summarizing first when due; and whether it did."""
        limits = self.limits
        local = run.local(self._key)
        messages = request.messages
        # Each measure below reads the messages new since the last call once; a
        # wide fan-out's 100,000 results are read in a worker thread, not on
        # the loop (the actor waits here; nothing else touches its history).
        off = len(messages) - local.checked_upto > _OFF_LOOP
        work = _in_thread if off else _inline
        marker: _Marker = state.get(SUMMARY_CHANNEL) or _Marker()
        start = self._start(messages, state, marker)
        if off:
            count = functools.partial(self._count, request, local, marker, start, state)
            tokens = await _in_thread(count)
        else:  # every model call of every agent: no partial, no coroutine
            tokens = self._count(request, local, marker, start, state)
        reason: Literal["trigger", "overflow", "tool"] | None = None
        if force:
            reason = "overflow"
        elif marker.get("compact"):
            reason = "tool"
        elif limits.over(tokens, local.messages):
            reason = "trigger"
        summarized = False
        if reason is not None:
            scale = local.counter.scale()
            force_cut = reason != "trigger"
            cut = await work(
                functools.partial(cut_point, messages, start, limits, force=force_cut, scale=scale)
            )
            if cut > start:
                marker = await self._summarize(request, state, run, marker, start, cut, tokens)
                dropped, start, summarized = cut - start, cut, True
                local.truncated = {k: v for k, v in local.truncated.items() if v[0] >= start}
                # In the units of the count before (usage-calibrated), for comparison.
                count = functools.partial(self._count, request, local, marker, start, state)
                after = round(await work(count) * scale)
                self._emit(run, marker, dropped, tokens, after, reason)
            elif reason == "tool":
                state.apply({SUMMARY_CHANNEL: {"compact": False}})
        if off:
            view = await _in_thread(functools.partial(self._view, request, marker, start, local))
        else:
            view = self._view(request, marker, start, local)
        return view, summarized

    # -- measuring -------------------------------------------------------------

    def _start(self, messages: Sequence[Message], state: State, marker: _Marker) -> int:
        after = marker.get("after")
        if after is None:
            return 0
        i = _index(messages, state, after)
        if i is None:
            _log.warning("summary cut point not found; showing the whole history", id=after)
            return 0
        return i + 1

    def _count(
        self,
        request: ModelRequest,
        local: _RunView,
        marker: _Marker,
        start: int,
        state: State,
    ) -> int:
        messages = request.messages
        summary = self._summary_message(marker, local)
        usage_from = 0
        last = marker.get("last")
        if last is not None:
            i = _index(messages, state, last)
            usage_from = len(messages) if i is None else i + 1
        local.tokens = local.counter.count(
            messages,
            start=start,
            head=0 if summary is None else message_tokens(summary),
            usage_from=usage_from,
            system_prompt=request.system_prompt,
            tools=request.tools,
        )
        local.messages = len(messages) - start + (summary is not None)
        return local.tokens

    # -- summarizing -----------------------------------------------------------

    async def _summarize(
        self,
        request: ModelRequest,
        state: State,
        run: RunContext,
        marker: _Marker,
        start: int,
        cut: int,
        tokens: int,
    ) -> _Marker:
        messages = request.messages
        dropped = list(messages[start:cut])
        before = int(marker.get("dropped", 0))
        path = str(marker.get("file") or self._history_path(run))
        saved = await offload(run, path, dropped, first_number=before + 1)
        assert self.model is not None
        text = await write_summary(
            self.model,
            run,
            previous=marker.get("summary"),
            dropped=dropped,
            history_file=saved,
            budget_tokens=self.limits.budget_tokens,
            max_tokens=self.summary_max_tokens,
            retry=self._retry,
        )
        update: _Marker = {
            "after": dropped[-1].id,
            "last": messages[-1].id,
            "summary": text,
            "file": saved,
            "dropped": before + len(dropped),
            "summaries": int(marker.get("summaries", 0)) + 1,
            "compact": False,
        }
        _log.debug(
            "context summarized",
            path=run.path,
            dropped=len(dropped),
            tokens=tokens,
            file=saved,
        )
        state.apply({SUMMARY_CHANNEL: update})
        return {**marker, **update}

    def _history_path(self, run: RunContext) -> str:
        # A thread's main agent writes one file per thread; each subagent run its own
        # (parallel children must not append to one file in their separate copies).
        name = run.thread_id if run.depth == 0 and run.thread_id else run.run_id
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
        return f"{self.history_dir}/{safe}.md"

    def _emit(
        self,
        run: RunContext,
        marker: _Marker,
        dropped: int,
        before: int,
        after: int,
        reason: Literal["trigger", "overflow", "tool"],
    ) -> None:
        if run.emit is not None:
            run.emit(
                ContextSummarized(
                    path=run.path,
                    run_id=run.run_id,
                    file_path=marker.get("file"),
                    messages_dropped=dropped,
                    tokens_before=before,
                    tokens_after=after,
                    reason=reason,
                )
            )

    # -- the view --------------------------------------------------------------

    def _summary_message(self, marker: _Marker, local: _RunView) -> UserMessage | None:
        if "summary" not in marker:
            return None
        key = (marker.get("after"), marker.get("summaries"), marker.get("file"))
        if local.summary is None or local.summary_of != key:
            file = marker.get("file")
            where = (
                f" Their full text is in {file}: read it with read_file (or search it "
                "with grep) when you need a detail the summary leaves out."
                if file
                else ""
            )
            content = SUMMARY_MESSAGE.format(
                dropped=marker.get("dropped", 0), where=where, summary=marker["summary"]
            )
            local.summary = UserMessage(id=f"summary-{marker.get('after')}", content=content)
            local.summary_of = key
        return local.summary

    def _view(
        self, request: ModelRequest, marker: _Marker, start: int, local: _RunView
    ) -> ModelRequest:
        messages = request.messages
        self._scan_args(messages, start, local)
        if start == 0 and not local.truncated and "summary" not in marker:
            return request  # nothing summarized or shortened yet: the request as it is
        summary = self._summary_message(marker, local)
        head: list[Message] = [] if summary is None else [summary]
        view = [*head, *messages[start:]]
        shift = len(head) - start
        for message_id, (i, short) in local.truncated.items():
            if start <= i < len(messages) and messages[i].id == message_id:
                view[i + shift] = short
        return request.replace(messages=view)

    def _scan_args(self, messages: Sequence[Message], start: int, local: _RunView) -> None:
        # Each message is looked at once, when it becomes "old" (O(new) per call).
        old = len(messages) - self.keep_args_messages
        first = max(local.checked_upto, start)
        if first < old:
            # A slice walked at C speed, kinds told by type() first (a negative
            # isinstance() of a pydantic class is slow): a wide fan-out's
            # 100,000 results become old at once.
            for i, message in enumerate(messages[first:old], first):
                if type(message) in _NO_CALLS or not isinstance(message, AssistantMessage):
                    continue
                if message.tool_calls:
                    short = _truncate_args(message, self.max_arg_chars)
                    if short is not None:
                        local.truncated[message.id] = (i, short)
        local.checked_upto = max(local.checked_upto, old)


def _index(messages: Sequence[Message], state: State, message_id: str) -> int | None:
    """Position of ``message_id`` in ``messages`` (O(1) when they are the state's)."""
    own = state.messages
    if len(messages) == len(own) and (not own or messages[-1] is own[-1]):
        return own.index_of(message_id)
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].id == message_id:
            return i
    return None
