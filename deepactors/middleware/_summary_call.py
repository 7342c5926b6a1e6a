"""The two effects of one summary: the history file append, and the summary model call."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

import anyio.to_thread

from .._core.logs import get_logger
from ..context import RunContext
from ..errors import BackendError, ContextWindowExceeded
from ..messages import Message, UserMessage
from ..models import ChatModel, ModelRequest
from ._retry import ModelRetryMiddleware
from ._tokens import CHARS_PER_TOKEN, message_tokens
from ._transcript import history_section, summary_excerpt

__all__ = ["SUMMARY_REQUEST", "SUMMARY_SYSTEM", "offload", "write_summary"]

_log = get_logger("deepactors")
T = TypeVar("T")

SUMMARY_SYSTEM = (
    "You condense the earlier part of an AI agent's working conversation into a summary "
    "that lets the agent carry on without the original messages."
)

SUMMARY_REQUEST = """\
Write the summary of the conversation excerpt below. The agent will see only your \
summary and its most recent messages from now on, so keep what it needs to continue:
- what the user asked for: goals, constraints, preferences, in their words where it matters;
- what was done and decided, and why, with file paths, names, commands and numbers;
- what was found (facts, sources, results) and the errors met, with how they were handled;
- what is still open, and the next step.
Drop greetings, dead ends that no longer matter, and anything later messages replaced. \
Plain prose or short lists; reply with the summary only.
{previous}
<conversation>
{excerpt}
</conversation>"""

_THREAD_CHARS = 256 * 1024  # render bigger batches in a worker thread, off the loop


async def offload(
    run: RunContext, path: str, dropped: Sequence[Message], *, first_number: int
) -> str | None:
    """Append ``dropped`` to the history file at ``path``; return the path, or None.

    None when the run has no backend or the append failed (logged): the thread's
    checkpoints still hold every message, only the readable copy is missing.
    """
    backend = run.backend
    if backend is None:
        return None
    text = await _cpu(lambda: history_section(dropped, first_number=first_number), dropped)
    try:
        await backend.append(path, text)
    except BackendError as exc:
        _log.warning("conversation history not saved", path=path, error=str(exc))
        return None
    return path


async def write_summary(
    model: ChatModel,
    run: RunContext,
    *,
    previous: str | None,
    dropped: Sequence[Message],
    history_file: str | None,
    budget_tokens: int,
    max_tokens: int,
    retry: ModelRetryMiddleware,
) -> str:
    """Ask ``model`` (no tools) for the summary of ``previous`` + ``dropped``.

    The excerpt is trimmed to ``budget_tokens`` first (whole turns, newest first).
    Should the model still find it too long (the estimate is only an estimate),
    it is asked once more with a quarter of that.

    Raises:
        ContextWindowExceeded: Even the smaller excerpt did not fit.
    """
    budget = budget_tokens * CHARS_PER_TOKEN - len(previous or "")
    prior = f"\n<previous_summary>\n{previous}\n</previous_summary>\n" if previous else ""
    for attempt in (1, 2):
        excerpt, omitted = await _cpu(_excerpt(dropped, max(budget, 1_000), history_file), dropped)
        note = f"[{omitted} older messages left out of this excerpt]\n" if omitted else ""
        ask = ModelRequest(
            messages=[
                UserMessage(content=SUMMARY_REQUEST.format(previous=prior, excerpt=note + excerpt))
            ],
            system_prompt=SUMMARY_SYSTEM,
            settings={"max_tokens": max_tokens},
            run=run,
        )
        try:
            answer = await retry.wrap_model_call(ask, handler=model.generate)
        except ContextWindowExceeded:
            if attempt == 2:
                raise
            budget //= 4
            continue
        run.add_usage(answer.usage)
        return answer.text.strip() or "(the summarizer returned no text)"
    raise AssertionError("unreachable")  # pragma: no cover


def _excerpt(
    dropped: Sequence[Message], budget: int, history_file: str | None
) -> Callable[[], tuple[str, int]]:
    return lambda: summary_excerpt(dropped, budget_chars=budget, history_file=history_file)


async def _cpu(fn: Callable[[], T], messages: Sequence[Message]) -> T:
    """``fn()`` inline for a few messages, in a worker thread for many (off the loop)."""
    size = sum(message_tokens(m) for m in messages) * CHARS_PER_TOKEN
    if size < _THREAD_CHARS:
        return fn()
    return await anyio.to_thread.run_sync(fn)
