"""One deepagents script's stream, as chunk shapes: recorded from deepagents, compared here.

``python -m tests.compat.stream_scenario`` (with deepagents installed) runs the
script on deepagents and rewrites the fixture; the test
(``test_deepagents_stream_shapes.py``) runs it on deepactors and compares.
A shape is one line per part: namespace (``tools:*`` for a subagent's), mode,
node, and the message's class, content and tool calls, with ``lc_agent_name``
and the tags for ``messages`` parts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool

from tests.compat.lc_fakes import GenericFakeChatModel

FIXTURE = Path(__file__).parent / "fixtures" / "deepagents_0_7_32_subgraph_stream.txt"
INPUT = {"messages": [HumanMessage(content="Weather in Tokyo?")]}
CONFIG = {"configurable": {"thread_id": "t"}, "tags": ["tag-1"]}
MODES = ["updates", "messages"]


@tool
def get_weather(city: str) -> str:
    """Get the weather in a city."""
    return f"The weather in {city} is sunny."


def build(create_deep_agent: Callable[..., Any], checkpointer: Any) -> Any:
    """The script's agent: a supervisor that asks a weather subagent, which uses a tool."""
    parent = GenericFakeChatModel(
        messages=iter(
            [
                AIMessage(
                    content="",
                    tool_calls=[
                        {
                            "name": "task",
                            "args": {"description": "Tokyo weather", "subagent_type": "weather"},
                            "id": "call_task",
                            "type": "tool_call",
                        }
                    ],
                ),
                AIMessage(content="It_is_sunny_in_Tokyo."),
            ]
        ),
        stream_delimiter="_",
    )
    child = GenericFakeChatModel(
        messages=iter(
            [
                AIMessage(
                    content="",
                    tool_calls=[
                        {
                            "name": "get_weather",
                            "args": {"city": "Tokyo"},
                            "id": "call_w",
                            "type": "tool_call",
                        }
                    ],
                ),
                AIMessage(content="Sunny_in_Tokyo"),
            ]
        ),
        stream_delimiter="_",
    )
    return create_deep_agent(
        model=parent,
        checkpointer=checkpointer,
        name="supervisor",
        subagents=[
            {
                "name": "weather",
                "description": "Knows the weather.",
                "system_prompt": "Use get_weather.",
                "model": child,
                "tools": [get_weather],
            }
        ],
    )


def shapes(parts: Iterable[tuple[Any, str, Any]]) -> list[str]:
    """One line per part of a ``subgraphs=True`` stream of ``MODES``."""
    out = []
    for ns, mode, data in parts:
        where = "/".join(n.split(":")[0] + ":*" for n in ns) or "-"
        if mode == "messages":
            chunk, meta = data
            calls = [c["name"] for c in getattr(chunk, "tool_calls", [])]
            out.append(
                f"{where} messages {meta.get('langgraph_node')} {type(chunk).__name__}"
                f"({chunk.content!r}, calls={calls}) agent={meta.get('lc_agent_name')} "
                f"tags={meta.get('tags')}"
            )
            continue
        for node, update in data.items():
            messages = (update or {}).get("messages", []) if isinstance(update, dict) else []
            shown = [f"{type(m).__name__}({m.content!r})" for m in messages]
            out.append(f"{where} updates {node} {shown}")
    return out


def record() -> None:
    """Run the script on deepagents and write the fixture."""
    import deepagents
    from langgraph.checkpoint.memory import InMemorySaver

    agent = build(deepagents.create_deep_agent, InMemorySaver())
    parts = agent.stream(INPUT, stream_mode=MODES, subgraphs=True, config=CONFIG)
    lines = shapes(parts)
    header = f"# deepagents {deepagents.__version__}: python -m tests.compat.stream_scenario\n"
    FIXTURE.write_text(header + "\n".join(lines) + "\n")


if __name__ == "__main__":
    record()
