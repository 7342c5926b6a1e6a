"""The innermost model call of every agent: the budget's reservation, then the model.

Every ``wrap_model_call`` middleware wraps this: the request is final here, so
this is where a budget reserves (no middleware can raise ``max_tokens`` after
it), and where a run that someone listens to streams, so token deltas reach
the listener as they arrive.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator

from ..events import ModelDelta, wants_detail
from ..messages import AssistantMessage
from ..models import ChatModel, ModelRequest
from ._budget import reserve, settle_failed

__all__ = ["call_model"]


async def call_model(default: ChatModel, request: ModelRequest) -> AssistantMessage:
    """Ask ``request.model`` (else ``default``) for the next message, within the run's budget."""
    # Inline rather than a wrapper coroutine: this runs for every model call.
    model = request.model or default
    run = request.run
    ledger = run.budget if run is not None else None
    if ledger is None:
        return await _ask(model, request)
    reserved = reserve(ledger, request, model)
    while not isinstance(reserved, tuple):
        await reserved.wait()  # calls in flight hold what this one needs
        reserved = reserve(ledger, request, model)
    hold, request = reserved
    try:
        message = await _ask(model, request)
    except BaseException as exc:
        settle_failed(ledger, hold, exc)
        raise
    ledger.settle(hold, message.usage)
    return message


async def _ask(model: ChatModel, request: ModelRequest) -> AssistantMessage:
    run = request.run
    emit = run.emit if run is not None else None
    if emit is None or not wants_detail(emit):
        return await model.generate(request)
    assert run is not None
    # Someone listens: stream, so token deltas reach them as they arrive.
    final: AssistantMessage | None = None
    parts = model.stream(request)
    try:
        async for part in parts:
            if isinstance(part, AssistantMessage):
                final = part
            else:
                emit(
                    ModelDelta(
                        path=run.path,
                        run_id=run.run_id,
                        kind=part.kind,
                        text=part.text,
                        index=part.index,
                    )
                )
    finally:
        # An async generator (the usual stream) is closed now, not when the
        # collector finds it: its connection goes back at once. A stream of
        # another kind has nothing to close.
        if isinstance(parts, AsyncGenerator):
            await parts.aclose()
    if final is None:
        raise RuntimeError(f"model {model.model_name!r} ended its stream without a message")
    return final
