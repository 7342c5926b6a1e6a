"""The agents the remote-subagent tests serve with ``deepactors serve`` (copied into the
test's folder and served from there, as a user serves theirs).

Their model is a deterministic function of the last user message (the order),
and of the tool results that came after it:

- ``echo <text>``: answers ``echo: <text>``;
- ``write <path> <text>``: writes the file, then answers ``wrote <path>``;
- ``edit <path> <old> <new>``: reads the file, replaces ``old`` by ``new``,
  then answers ``edited <path>``;
- ``slow <seconds>``: waits, then answers ``slept <seconds>``;
- ``block``: calls ``wait_here``, which waits until cancelled;
- ``spend``: calls ``noop`` for ever (each turn a model call: a budget stops it);
- ``ask``: calls ``send_email``, which waits for a human (``asker`` only);
- ``update: <text>``: (a message to a running child) answers ``got <text>``;
- ``fail``: the model raises;
- ``burn <n> fail`` / ``burn <n> block``: calls ``noop`` ``n`` times, each call
  reporting :data:`BURNED` tokens, then the model raises (``fail``), or it
  calls ``wait_here`` (``block``): a child that spends, then fails or hangs.
- ``pace <n> <seconds> [<input tokens>]``: calls ``noop`` ``n`` times, then
  answers ``paced <n>``: ``n + 1`` model calls, each taking ``seconds`` and
  reporting :data:`BURNED` (or that many input tokens, and its output tokens).

The ``priced`` agent answers the same, with a model whose prices are known
(:data:`PRICED`, :data:`PRICES`): each answer's usage says what it cost, and a
budget in dollars charges it.
"""

from __future__ import annotations

import anyio

from deepactors import (
    AssistantMessage,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
    create_deep_agent,
)
from deepactors.models import FunctionModel, ModelRequest
from deepactors.models.profiles import ModelPrices, ModelProfile, register_profile
from deepactors.persistence import MemoryCheckpointer


async def wait_here() -> str:
    """Wait until cancelled."""
    await anyio.sleep_forever()
    return "never"


def noop() -> str:
    """Do nothing."""
    return "nothing done"


def send_email(to: str) -> str:
    """Send an email.

    Args:
        to: The recipient.
    """
    return f"sent to {to}"


BURNED = Usage(input_tokens=100, output_tokens=10)
"""What each of a ``burn`` order's model calls reports."""


def _call(name: str, **args: object) -> AssistantMessage:
    return AssistantMessage(tool_calls=[ToolCall(name=name, args=args)])


async def model(request: ModelRequest) -> AssistantMessage:
    messages = list(request.messages)
    at = max(i for i, m in enumerate(messages) if isinstance(m, UserMessage))
    order = messages[at].text
    done = [m for m in messages[at + 1 :] if isinstance(m, ToolMessage)]
    word, _, rest = order.partition(" ")
    match word:
        case "echo":
            return AssistantMessage(content=f"echo: {rest}")
        case "write":
            path, _, text = rest.partition(" ")
            if not done:
                return _call("write_file", file_path=path, content=text)
            return AssistantMessage(content=f"wrote {path}")
        case "edit":
            path, old, new = rest.split(" ", 2)
            if not done:
                return _call("read_file", file_path=path)
            if len(done) == 1:
                return _call("edit_file", file_path=path, old_string=old, new_string=new)
            return AssistantMessage(content=f"edited {path}: {done[-1].text}")
        case "slow":
            await anyio.sleep(float(rest))
            return AssistantMessage(content=f"slept {rest}")
        case "block":
            return _call("wait_here") if not done else AssistantMessage(content="unblocked")
        case "spend":
            return _call("noop")
        case "ask":
            return _call("send_email", to="bob") if not done else AssistantMessage(content="asked")
        case "update:":
            return AssistantMessage(content=f"got {rest}")
        case "fail":
            raise RuntimeError("the model broke")
        case "burn":
            count, then = rest.split(" ")
            if len(done) < int(count):
                return _call("noop").model_copy(update={"usage": BURNED})
            if then == "fail":
                raise RuntimeError(f"the model broke after {count} calls")
            return _call("wait_here").model_copy(update={"usage": BURNED})
        case "pace":
            count, seconds, *tokens = rest.split(" ")
            await anyio.sleep(float(seconds))
            usage = BURNED
            if tokens:
                usage = usage.model_copy(update={"input_tokens": int(tokens[0])})
            if len(done) < int(count):
                return _call("noop").model_copy(update={"usage": usage})
            return AssistantMessage(content=f"paced {count}", usage=usage)
    return AssistantMessage(content=f"unknown order {order!r}")


PRICED = "remote-test-priced"
"""The name of the ``priced`` agent's model, whose prices are :data:`PRICES`."""

# Output dear and input cheap: a budget in dollars is spent by what the
# children report, not by the estimates of their prompts.
PRICES = ModelPrices(input=1.0, output=1000.0)
"""Dollars per million tokens: a :data:`BURNED` call costs $0.0101."""

register_profile(PRICED, ModelProfile(prices=PRICES))


async def priced_model(request: ModelRequest) -> AssistantMessage:
    """:func:`model`'s answer, its usage with what it cost (as a priced provider's says)."""
    answer = await model(request)
    if answer.usage is None:
        return answer
    return answer.model_copy(
        update={"usage": answer.usage.model_copy(update={"cost_usd": PRICES.cost(answer.usage)})}
    )


agents = {
    "agent": create_deep_agent(FunctionModel(model), tools=[wait_here, noop]),
    "asker": create_deep_agent(
        FunctionModel(model),
        tools=[send_email],
        interrupt_on={"send_email": True},
        checkpointer=MemoryCheckpointer(),
    ),
    "priced": create_deep_agent(FunctionModel(priced_model, name=PRICED), tools=[wait_here, noop]),
}
