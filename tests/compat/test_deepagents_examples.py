"""deepagents' examples, as short copies with only the imports (and the model) changed.

The copies are ``tests/compat/examples/deep_research.py`` and
``tests/compat/examples/content_writer.py`` (their docstrings say what is
upstream's and what is ours). Each runs here on both event loops.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from deepactors.errors import ThreadNotSavedWarning
from tests.compat.examples import content_writer, deep_research

pytestmark = pytest.mark.anyio


async def test_deep_research_delegates_searches_and_reports() -> None:
    agent = deep_research.agent
    # The tool's InjectedToolArg parameters are not shown to the model.
    assert set(agent.tools["tavily_search"].parameters["properties"]) == {"query"}
    before = len(deep_research.tavily_client.calls)
    result = await agent.ainvoke({"messages": [{"role": "user", "content": "What is LangGraph?"}]})
    report = result["messages"][-1]
    assert report.content.startswith("# Report")
    assert "stateful agents" in report.content
    # The tool got its injected parameters' defaults.
    assert deep_research.tavily_client.calls[before:] == [
        {"query": "LangGraph", "max_results": 1, "topic": "general"}
    ]


async def test_content_builder_writes_the_post_and_its_display_shows_the_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    example = tmp_path / "content-builder-agent"
    shutil.copytree(Path(content_writer.__file__).parent / "content_builder", example)
    monkeypatch.setattr(content_writer, "EXAMPLE_DIR", example)
    monkeypatch.setattr(sys, "argv", ["content_writer.py", "Write a blog post about AI agents"])
    # The example names a thread but keeps no checkpointer: deepactors says the
    # thread is not kept (LangGraph ignores the id silently); the run goes on.
    with pytest.warns(ThreadNotSavedWarning):
        await content_writer.main()
    shown = capsys.readouterr().out
    for line in (
        "Write a blog post about AI agents",  # the HumanMessage panel
        ">> Researching:",  # the AIMessage's task call
        "Research complete",  # the task's ToolMessage
        ">> Writing: /blogs/ai-agents/post.md",
        "File written",
        "The blog post is at",  # the final AIMessage
    ):
        assert line in shown
    post = example / "blogs" / "ai-agents" / "post.md"
    assert post.read_text().startswith("# How AI agents are transforming")
    assert (example / "research" / "ai-agents.md").exists()
