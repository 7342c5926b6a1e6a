"""Building the final message of a streamed answer, for :mod:`deepactors.models.anthropic`."""

from __future__ import annotations

from typing import Any, cast

from anthropic.types import (
    InputJSONDelta,
    RawContentBlockDeltaEvent,
    RawContentBlockStartEvent,
    RawContentBlockStopEvent,
    RawMessageDeltaEvent,
    RawMessageStartEvent,
    RawMessageStopEvent,
    RawMessageStreamEvent,
    SignatureDelta,
    TextDelta,
    ThinkingDelta,
)

from deepactors.errors import ModelConnectionError
from deepactors.messages import AssistantMessage

from ._anthropic_convert import message_from_api, parse_tool_input
from ._base import StreamDelta
from .profiles import ModelPrices

__all__ = ["StreamAccumulator"]


class StreamAccumulator:
    """Builds the final message from raw stream events, and says which are deltas.

    The SDK has its own accumulator, but it parses tool input with a partial-JSON
    parser that raises on malformed input and accepts truncated input; a tool call
    the model botched must become a call with ``error`` set instead.
    """

    def __init__(self, prices: ModelPrices | None = None) -> None:
        self.prices = prices
        self.message: dict[str, Any] | None = None
        self.blocks: dict[int, dict[str, Any]] = {}
        self.tool_json: dict[int, list[str]] = {}
        self.stopped = False

    def feed(self, event: RawMessageStreamEvent) -> StreamDelta | None:
        if isinstance(event, RawMessageStartEvent):
            self.message = cast(
                "dict[str, Any]", event.message.to_dict(mode="json", warnings=False)
            )
        elif isinstance(event, RawContentBlockStartEvent):
            block = cast("dict[str, Any]", event.content_block.to_dict(mode="json", warnings=False))
            if block.get("type") == "tool_use":
                self.tool_json[event.index] = []
            self.blocks[event.index] = block
        elif isinstance(event, RawContentBlockDeltaEvent):
            return self._delta(event)
        elif isinstance(event, RawContentBlockStopEvent):
            self._finish_block(event.index)
        elif isinstance(event, RawMessageDeltaEvent):
            message = self._started()
            message["stop_reason"] = event.delta.stop_reason
            usage = message.setdefault("usage", {})
            # message_delta usage counts are running totals: overwrite, and keep the
            # message_start values the delta leaves out.
            for key, value in event.usage.to_dict(mode="json", warnings=False).items():
                if value is not None:
                    usage[key] = value
        elif isinstance(event, RawMessageStopEvent):
            self.stopped = True
        return None

    def _delta(self, event: RawContentBlockDeltaEvent) -> StreamDelta | None:
        index, delta = event.index, event.delta
        block = self.blocks.setdefault(index, {"type": "text", "text": ""})
        if isinstance(delta, TextDelta):
            block["text"] = block.get("text", "") + delta.text
            return StreamDelta(kind="text", text=delta.text, index=index) if delta.text else None
        if isinstance(delta, ThinkingDelta):
            block["thinking"] = block.get("thinking", "") + delta.thinking
            if delta.thinking:
                return StreamDelta(kind="thinking", text=delta.thinking, index=index)
            return None
        if isinstance(delta, SignatureDelta):
            block["signature"] = delta.signature
        elif isinstance(delta, InputJSONDelta):
            self.tool_json.setdefault(index, []).append(delta.partial_json)
            if delta.partial_json:
                return StreamDelta(kind="tool_input", text=delta.partial_json, index=index)
        return None

    def _finish_block(self, index: int) -> None:
        parts = self.tool_json.pop(index, None)
        block = self.blocks.get(index)
        if parts is None or block is None:
            return
        args, error = parse_tool_input("".join(parts))
        block["input"] = args
        if error is not None:
            block["_input_error"] = error

    def _started(self) -> dict[str, Any]:
        if self.message is None:
            raise ModelConnectionError("the Anthropic API stream did not begin with message_start")
        return self.message

    def result(self) -> AssistantMessage:
        message = self._started()
        if not self.stopped:
            raise ModelConnectionError("the Anthropic API stream ended before message_stop")
        for index in list(self.tool_json):
            self._finish_block(index)
        message["content"] = [self.blocks[i] for i in sorted(self.blocks)]
        return message_from_api(message, self.prices)
