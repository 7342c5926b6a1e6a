"""A ``subgraphs=True`` stream of ``["updates", "messages"]`` has LangGraph's shapes.

The fixture was recorded from deepagents 0.7.32 running the same script
(``tests/compat/stream_scenario.py``): namespaces, nodes, message classes and
contents, tool calls, ``lc_agent_name`` and tags, part by part, in order.
"""

from __future__ import annotations

import pytest

from deepactors import MemoryCheckpointer
from deepactors.langchain import create_deep_agent
from tests.compat.stream_scenario import CONFIG, FIXTURE, INPUT, MODES, build, shapes

pytestmark = pytest.mark.anyio

# Parts of nodes deepactors does not have: a middleware hook that returned nothing
# is a node of LangGraph's graph (its update None), and deepagents' own
# _ParentNotifierMiddleware. deepactors streams no part for them.
_NO_SUCH_NODE = (".before_agent []", ".after_agent []")


def recorded() -> list[str]:
    lines = FIXTURE.read_text().splitlines()
    return [ln for ln in lines[1:] if not ln.endswith(_NO_SUCH_NODE)]


async def test_subgraph_stream_parts_match_deepagents_part_by_part() -> None:
    agent = build(create_deep_agent, MemoryCheckpointer())
    parts = [p async for p in agent.astream(INPUT, CONFIG, stream_mode=MODES, subgraphs=True)]
    assert shapes(parts) == recorded()
