"""W2's floor traced by hand: the plain-coroutine tree of ``w2_fanout.py`` making,
through the OpenTelemetry SDK directly, the spans deepactors' tracer makes of W2.

What any program that traces this work pays the SDK, with no framework in
between: a span per agent run (its ``task`` call's span its parent), per model
call and per tool call, with the attributes deepactors records for them here
(W2's model reports no usage, provider or finish reason). Each tool call's span
is current while the tool runs, as deepactors makes it (so what the tool does
nests under it); a model call's span is made when the call ends, with its start
time, as deepactors does (the cheapest way the SDK offers).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind

from deepactors import AssistantMessage, ToolCall, ToolMessage, UserMessage
from deepactors.messages import Message

Turn = Callable[[list[Message]], AssistantMessage]
_IDS = itertools.count()


async def _agent(
    tracer: trace.Tracer,
    name: str,
    agent_id: str,
    parent: otel_context.Context | None,
    messages: list[Message],
    turn: Turn,
    tools: dict[str, Callable[..., Awaitable[str]]],
    latency: float,
    root: bool = False,
) -> str:
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": name,
        "gen_ai.agent.id": agent_id,
    }
    if root:
        attributes["deepactors.run_id"] = f"{next(_IDS):024x}"
    span = tracer.start_span(
        f"invoke_agent {name}", context=parent, kind=SpanKind.INTERNAL, attributes=attributes
    )
    here = trace.set_span_in_context(span)
    try:
        while True:
            start = time.time_ns()
            await anyio.sleep(latency)
            msg = turn(messages)
            tracer.start_span(
                "chat function-model",
                context=here,
                kind=SpanKind.CLIENT,
                attributes={
                    "gen_ai.operation.name": "chat",
                    "gen_ai.request.model": "function-model",
                },
                start_time=start,
            ).end()
            messages.append(msg)
            if not msg.tool_calls:
                return msg.text
            results: list[ToolMessage | None] = [None] * len(msg.tool_calls)

            async def run(i: int, call: ToolCall, out: list[ToolMessage | None]) -> None:
                tool = tracer.start_span(
                    f"execute_tool {call.name}",
                    context=here,
                    kind=SpanKind.INTERNAL,
                    attributes={
                        "gen_ai.operation.name": "execute_tool",
                        "gen_ai.tool.name": call.name,
                        "gen_ai.tool.call.id": call.id,
                        "gen_ai.tool.type": "function",
                    },
                )
                current = trace.set_span_in_context(tool)
                token = otel_context.attach(current)
                try:
                    text = await tools[call.name](context=current, **call.args)
                finally:
                    otel_context.detach(token)
                    tool.end()
                out[i] = ToolMessage(tool_call_id=call.id, name=call.name, content=text)

            async with anyio.create_task_group() as tg:
                for i, call in enumerate(msg.tool_calls):
                    tg.start_soon(run, i, call, results)
            messages.extend(r for r in results if r is not None)
    finally:
        span.end()


async def traced_floor_run(
    n: int,
    tracer: trace.Tracer,
    main_turn: Callable[[int, list[Message]], AssistantMessage],
    child_turn: Turn,
    lookup: Callable[[str], Awaitable[str]],
    latency: float,
) -> int:
    """W2's floor, traced; returns the number of findings in the final answer."""

    async def look(context: object, key: str) -> str:
        return await lookup(key)

    children = itertools.count(1)

    async def task(context: otel_context.Context, description: str, subagent_type: str) -> str:
        return await _agent(
            tracer,
            subagent_type,
            f"main/task-{next(children)}:{subagent_type}",
            context,
            [UserMessage(content=description)],
            child_turn,
            {"lookup": look},
            latency,
        )

    answer = await _agent(
        tracer,
        "main",
        "main",
        None,
        [UserMessage(content="go")],
        lambda m: main_turn(n, m),
        {"task": task},
        latency,
        root=True,
    )
    return int(answer.split()[2])
