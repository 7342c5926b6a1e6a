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
- ``pace <n> <seconds>``: calls ``noop`` ``n`` times, then answers ``paced <n>``:
  ``n + 1`` model calls, each taking ``seconds`` and reporting :data:`BURNED`.
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
            count, seconds = rest.split(" ")
            await anyio.sleep(float(seconds))
            if len(done) < int(count):
                return _call("noop").model_copy(update={"usage": BURNED})
            return AssistantMessage(content=f"paced {count}", usage=BURNED)
    return AssistantMessage(content=f"unknown order {order!r}")


agents = {
    "agent": create_deep_agent(FunctionModel(model), tools=[wait_here, noop]),
    "asker": create_deep_agent(
        FunctionModel(model),
        tools=[send_email],
        interrupt_on={"send_email": True},
        checkpointer=MemoryCheckpointer(),
    ),
}
