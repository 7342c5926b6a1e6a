"""A plain LangGraph graph that LangGraph's own server (``langgraph dev``) serves for
tests/remote/test_langgraph_server.py: deepagents' state shape (``messages``, and
``files`` as ``FileData`` by path), a deterministic node reading the last user
message:

- ``write <path> <text>``: writes the file; ``upper <path>``: upper-cases it;
- ``sleep <seconds>``: waits that long (a run still going);
- ``update: <text>``: (a message to a running child) answers ``got <text>``;
- ``fail``: raises; anything else: ``echo: <text>``.

It writes ``{"seen": <text>}`` to the custom stream.
"""

from __future__ import annotations

import asyncio
import time
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.config import get_stream_writer
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages


def merge_files(left: dict[str, Any] | None, right: dict[str, Any] | None) -> dict[str, Any]:
    """deepagents' files reducer: a path set to None is deleted."""
    out = dict(left or {})
    for path, data in (right or {}).items():
        if data is None:
            out.pop(path, None)
        else:
            out[path] = data
    return out


class State(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    files: Annotated[dict[str, Any], merge_files]


def _file(content: str, created_at: str | None = None) -> dict[str, str]:
    now = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())
    return {
        "content": content,
        "encoding": "utf-8",
        "created_at": created_at or now,
        "modified_at": now,
    }


async def agent(state: State) -> dict[str, Any]:
    last = [m for m in state["messages"] if isinstance(m, HumanMessage)][-1]
    text = last.content if isinstance(last.content, str) else str(last.content)
    word, _, rest = text.partition(" ")
    get_stream_writer()({"seen": text})
    if word == "write":
        path, _, body = rest.partition(" ")
        return {"files": {path: _file(body)}, "messages": [AIMessage(content=f"wrote {path}")]}
    if word == "upper":
        old = (state.get("files") or {})[rest]
        new = _file(old["content"].upper(), old.get("created_at"))
        return {"files": {rest: new}, "messages": [AIMessage(content=f"uppercased {rest}")]}
    if word == "sleep":
        await asyncio.sleep(float(rest))
    if word == "update:":
        return {"messages": [AIMessage(content=f"got {rest}")]}
    if word == "fail":
        raise RuntimeError("the graph broke")
    return {"messages": [AIMessage(content=f"echo: {text}")]}


builder = StateGraph(State)
builder.add_node("agent", agent)
builder.add_edge(START, "agent")
builder.add_edge("agent", END)
graph = builder.compile()
