"""deepagents' ``examples/deep_research``, short copy: only imports (and the model) changed.

Source: https://github.com/langchain-ai/deepagents, commit
23b83ad50f63d241d0069a3dc426d43b211adf2e (examples last changed in
a6e2608c382be362163e4f26f5ccc544cc13ccbd). Verbatim: ``tavily_search`` and
``think_tool`` from ``research_agent/tools.py``, and ``agent.py`` from ``# Limits``
on, except the model line. Ours: the imports, offline stand-ins for the Tavily
client and the page fetcher (no network in tests), one-line stand-ins for the
long prompts of ``research_agent/prompts.py``, and the deterministic model.
"""

# ruff: noqa: E501, UP035

from __future__ import annotations

from datetime import datetime
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

# --- the changed import lines -------------------------------------------------------
from langchain_core.tools import InjectedToolArg, tool
from typing_extensions import Annotated, Literal

from deepactors.langchain import create_deep_agent
from tests.compat.lc_fakes import RuleChatModel

# --- ours: stand-ins for the network and the prompts ---------------------------------

RESEARCHER_INSTRUCTIONS = "You research one topic. Today is {date}."
RESEARCH_WORKFLOW_INSTRUCTIONS = "Plan, delegate research, then write the report."
SUBAGENT_DELEGATION_INSTRUCTIONS = (
    "At most {max_concurrent_research_units} researchers at once, "
    "{max_researcher_iterations} rounds."
)


class _OfflineTavily:
    """Answers ``search`` like Tavily's client, from a fixed result; records the calls."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def search(self, query: str, max_results: int = 5, topic: str = "general") -> dict[str, Any]:
        self.calls.append({"query": query, "max_results": max_results, "topic": topic})
        return {"results": [{"url": "https://example.com/langgraph", "title": "LangGraph"}]}


tavily_client = _OfflineTavily()


def fetch_webpage_content(url: str, timeout: float = 10.0) -> str:
    return "LangGraph is a library for building stateful agents as graphs."


def _research(messages: list[BaseMessage]) -> AIMessage:
    """The deterministic model: delegate, search, reflect, answer."""
    request = next(m for m in messages if isinstance(m, HumanMessage)).text
    done = [m for m in messages if isinstance(m, ToolMessage)]

    def call(name: str, args: dict[str, Any]) -> AIMessage:
        call_id = f"call_{name}_{len(done)}"
        return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": call_id}])

    if request.startswith("Research"):  # the research-agent subagent
        if not done:
            return call("tavily_search", {"query": "LangGraph"})
        if len(done) == 1:
            return call("think_tool", {"reflection": "One good source found; enough."})
        return AIMessage(content=f"Findings: {done[0].text.splitlines()[-3]}")
    if not done:
        return call(
            "task", {"description": "Research LangGraph", "subagent_type": "research-agent"}
        )
    return AIMessage(content=f"# Report\n\n{done[-1].text}")


def ResearchModel() -> RuleChatModel:
    return RuleChatModel(_research)


# --- upstream, verbatim ---------------------------------------------------------------


@tool(parse_docstring=True)
def tavily_search(
    query: str,
    max_results: Annotated[int, InjectedToolArg] = 1,
    topic: Annotated[Literal["general", "news", "finance"], InjectedToolArg] = "general",
) -> str:
    """Search the web for information on a given query.

    Uses Tavily to discover relevant URLs, then fetches and returns full webpage content as markdown.

    Args:
        query: Search query to execute
        max_results: Maximum number of results to return (default: 1)
        topic: Topic filter - 'general', 'news', or 'finance' (default: 'general')

    Returns:
        Formatted search results with full webpage content
    """
    # Use Tavily to discover URLs
    search_results = tavily_client.search(
        query,
        max_results=max_results,
        topic=topic,
    )

    # Fetch full content for each URL
    result_texts = []
    for result in search_results.get("results", []):
        url = result["url"]
        title = result["title"]

        # Fetch webpage content
        content = fetch_webpage_content(url)

        result_text = f"""## {title}
**URL:** {url}

{content}

---
"""
        result_texts.append(result_text)

    # Format final response
    response = f"""🔍 Found {len(result_texts)} result(s) for '{query}':

{chr(10).join(result_texts)}"""

    return response


@tool(parse_docstring=True)
def think_tool(reflection: str) -> str:
    """Tool for strategic reflection on research progress and decision-making.

    Use this tool after each search to analyze results and plan next steps systematically.
    This creates a deliberate pause in the research workflow for quality decision-making.

    When to use:
    - After receiving search results: What key information did I find?
    - Before deciding next steps: Do I have enough to answer comprehensively?
    - When assessing research gaps: What specific information am I still missing?
    - Before concluding research: Can I provide a complete answer now?

    Reflection should address:
    1. Analysis of current findings - What concrete information have I gathered?
    2. Gap assessment - What crucial information is still missing?
    3. Quality evaluation - Do I have sufficient evidence/examples for a good answer?
    4. Strategic decision - Should I continue searching or provide my answer?

    Args:
        reflection: Your detailed reflection on research progress, findings, gaps, and next steps

    Returns:
        Confirmation that reflection was recorded for decision-making
    """
    return f"Reflection recorded: {reflection}"


# Limits
max_concurrent_research_units = 3
max_researcher_iterations = 3

# Get current date
current_date = datetime.now().strftime("%Y-%m-%d")

# Combine orchestrator instructions (RESEARCHER_INSTRUCTIONS only for sub-agents)
INSTRUCTIONS = (
    RESEARCH_WORKFLOW_INSTRUCTIONS
    + "\n\n"
    + "=" * 80
    + "\n\n"
    + SUBAGENT_DELEGATION_INSTRUCTIONS.format(
        max_concurrent_research_units=max_concurrent_research_units,
        max_researcher_iterations=max_researcher_iterations,
    )
)

# Create research sub-agent
research_sub_agent = {
    "name": "research-agent",
    "description": "Delegate research to the sub-agent researcher. Only give this researcher one topic at a time.",
    "system_prompt": RESEARCHER_INSTRUCTIONS.format(date=current_date),
    "tools": [tavily_search, think_tool],
}

# Model Gemini 3
# model = ChatGoogleGenerativeAI(model="gemini-3-pro-preview", temperature=0.0)

# Model Claude 4.5
model = ResearchModel()  # ours: deterministic, in place of Claude

# Create the agent
agent = create_deep_agent(
    model=model,
    tools=[tavily_search, think_tool],
    system_prompt=INSTRUCTIONS,
    subagents=[research_sub_agent],
)
