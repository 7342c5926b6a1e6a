"""``agent.get_graph()``: the agent loop drawn as LangGraph draws ``create_agent``'s graph.

deepactors has no graph to compile; the loop every agent runs is the same
``model -> tools -> model`` cycle, with the agent's hooks around the model call.
This gives a script that calls ``get_graph().draw_mermaid()`` or
``draw_mermaid_png()`` (or reads ``.nodes`` / ``.edges``) that picture.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from langchain_core.runnables.graph import MermaidDrawMethod

__all__ = ["AgentGraph", "Edge", "agent_graph"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Edge:
    """An edge of the drawing; ``conditional`` ones are drawn dashed, as LangGraph does."""

    source: str
    target: str
    conditional: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentGraph:
    """The nodes and edges of an agent's loop.

    Attributes:
        name: The agent's name.
        nodes: Node names, ``__start__`` first and ``__end__`` last.
        edges: The edges between them.
    """

    name: str
    nodes: tuple[str, ...]
    edges: tuple[Edge, ...]

    def draw_mermaid(self) -> str:
        """The graph as Mermaid flowchart text, in LangGraph's layout and styles."""
        lines = ["---", "config:", "  flowchart:", "    curve: linear", "---", "graph TD;"]
        for node in self.nodes:
            if node == "__start__":
                lines.append("\t__start__([<p>__start__</p>]):::first")
            elif node == "__end__":
                lines.append("\t__end__([<p>__end__</p>]):::last")
            else:
                lines.append(f"\t{_id(node)}({node})")
        for edge in self.edges:
            arrow = "-.->" if edge.conditional else "-->"
            lines.append(f"\t{_id(edge.source)} {arrow} {_id(edge.target)};")
        lines += [
            "\tclassDef default fill:#f2f0ff,line-height:1.2",
            "\tclassDef first fill-opacity:0",
            "\tclassDef last fill:#bfb6fc",
        ]
        return "\n".join(lines) + "\n"

    def draw_mermaid_png(
        self,
        *,
        output_file_path: str | None = None,
        draw_method: MermaidDrawMethod | None = None,
        background_color: str | None = "white",
        padding: int = 10,
        max_retries: int = 1,
        retry_delay: float = 1.0,
        base_url: str | None = None,
        proxies: dict[str, str] | None = None,
    ) -> bytes:
        """The graph as a PNG, rendered as LangGraph renders it (``langchain_core``'s
        ``draw_mermaid_png``).

        By default that is the mermaid.ink web API, so it needs the network, and
        offline it raises LangChain's ``ValueError`` ("Failed to reach
        https://mermaid.ink/ API ..."), as LangGraph does. ``base_url=`` names a
        Mermaid renderer of your own; ``draw_method=MermaidDrawMethod.PYPPETEER``
        renders in a local browser (the ``pyppeteer`` package); or render
        :meth:`draw_mermaid`'s text yourself.

        Args:
            output_file_path: Also write the PNG there.
            draw_method: LangChain's ``MermaidDrawMethod`` (default: ``API``).
            background_color: As LangGraph's.
            padding: As LangGraph's (the browser renderer's).
            max_retries: Attempts at the API after the first.
            retry_delay: Seconds between them.
            base_url: The Mermaid API's address (default https://mermaid.ink).
            proxies: For the API's requests.
        """
        from langchain_core.runnables.graph import MermaidDrawMethod
        from langchain_core.runnables.graph_mermaid import draw_mermaid_png

        return draw_mermaid_png(
            self.draw_mermaid(),
            output_file_path=output_file_path,
            draw_method=MermaidDrawMethod.API if draw_method is None else draw_method,
            background_color=background_color,
            padding=padding,
            max_retries=max_retries,
            retry_delay=retry_delay,
            base_url=base_url,
            proxies=proxies,
        )

    def draw_ascii(self) -> str:
        """A plain-text rendering: one edge per line."""
        return "\n".join(
            f"{e.source} {'-.->' if e.conditional else '-->'} {e.target}" for e in self.edges
        )


def _id(node: str) -> str:
    return node.replace(".", "_").replace(" ", "_")


def agent_graph(name: str, hooks: Sequence[str], *, has_tools: bool) -> AgentGraph:
    """The loop of an agent whose middleware have ``before_agent``/``before_model``...
    hooks named ``hooks`` (``"TodoListMiddleware.after_model"``, in run order)."""
    before_agent = [h for h in hooks if h.endswith(".before_agent")]
    before_model = [h for h in hooks if h.endswith(".before_model")]
    after_model = [h for h in hooks if h.endswith(".after_model")]
    after_agent = [h for h in hooks if h.endswith(".after_agent")]
    loop_in = [*before_model, "model", *after_model]
    chain = ["__start__", *before_agent, *loop_in]
    edges = [Edge(source=a, target=b) for a, b in itertools.pairwise(chain)]
    done = after_agent[0] if after_agent else "__end__"
    last = loop_in[-1]
    if has_tools:
        edges.append(Edge(source=last, target="tools", conditional=True))
        edges.append(Edge(source="tools", target=loop_in[0], conditional=True))
    edges.append(Edge(source=last, target=done, conditional=True))
    tail = [*after_agent, "__end__"]
    edges += [Edge(source=a, target=b) for a, b in itertools.pairwise(tail)]
    middle = [*before_agent, *loop_in, *(["tools"] if has_tools else []), *after_agent]
    return AgentGraph(name=name, nodes=("__start__", *middle, "__end__"), edges=tuple(edges))
