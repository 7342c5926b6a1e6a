"""The agent the ACP client tests run with ``deepactors acp`` (an editor's agent).

Written into the test's folder (the session's working folder) and run by a real
``deepactors acp`` process. Its model is a deterministic function of the last
user message: ``read notes`` reads ``/notes.md``, ``write notes`` writes
``/out.md``, ``run`` runs ``echo from-terminal``, ``email ...`` calls
``send_email`` (which asks for permission), ``plan`` writes the todos,
``think`` answers with reasoning, ``slow`` waits a minute (to be cancelled);
anything else: ``echo #<n>: <text>``. After a tool, it says what the tool gave.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["ACP_MODULE", "write_acp_agent"]

ACP_MODULE = '''
import anyio

from deepactors import AssistantMessage, ToolCall, ToolMessage, create_deep_agent
from deepactors.backends import LocalShellBackend
from deepactors.messages import TextBlock, ThinkingBlock
from deepactors.models import FunctionModel


def send_email(to: str, body: str) -> str:
    """Send an email.

    Args:
        to: The recipient.
        body: What it says.
    """
    return f"sent to {to}: {body}"


CALLS = {
    "read notes": ("read_file", {"file_path": "/notes.md"}),
    "write notes": ("write_file", {"file_path": "/out.md", "content": "from the agent\\n"}),
    "run": ("execute", {"command": "echo from-terminal"}),
    "plan": ("write_todos", {"todos": [{"content": "write notes", "status": "in_progress"}]}),
}


async def model(request):
    last = request.messages[-1]
    users = [m for m in request.messages if m.role == "user"]
    said = users[-1].text if users else ""
    if isinstance(last, ToolMessage):
        verdict = "failed" if last.status == "error" else "gave"
        return AssistantMessage(content=f"{last.name} {verdict}: {last.text}")
    if said in CALLS:
        name, args = CALLS[said]
        return AssistantMessage(tool_calls=[ToolCall(name=name, args=args)])
    if said.startswith("email"):
        return AssistantMessage(
            tool_calls=[ToolCall(name="send_email", args={"to": "bob", "body": said})]
        )
    if said == "think":
        return AssistantMessage(
            content=[ThinkingBlock(thinking="let me think"), TextBlock(text="thought it through")]
        )
    if said == "slow":
        await anyio.sleep_forever()  # until the client cancels the turn
    return AssistantMessage(content=f"echo #{len(users)}: {said}")


agent = create_deep_agent(
    FunctionModel(model, stream_chunk=4),
    tools=[send_email],
    backend=LocalShellBackend(root="."),
    interrupt_on={"send_email": True},
)
'''


def write_acp_agent(folder: Path) -> str:
    """Write the agent module into ``folder``; its ``module:attribute``."""
    (folder / "acp_app.py").write_text(ACP_MODULE)
    return "acp_app:agent"
