"""The rest of what a deepagents script reaches for: get_graph, FileData, backend names."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from deepactors.backends import FilesystemBackend
from deepactors.errors import ConfigurationError, InvalidPath
from deepactors.langchain import create_deep_agent, file_data_to_string, require_langchain
from deepactors.models import ScriptedModel


def test_get_graph_draws_the_agent_loop_in_mermaid() -> None:
    graph = create_deep_agent(model=ScriptedModel(["hi"])).get_graph()
    assert graph.nodes[0] == "__start__"
    assert graph.nodes[-1] == "__end__"
    assert {"model", "tools"} <= set(graph.nodes)
    text = graph.draw_mermaid()
    assert text.startswith("---\nconfig:")
    assert "\tmodel(model)" in text
    assert "tools -.-> " in text


def test_file_data_to_string_reads_both_of_deepagents_formats() -> None:
    assert file_data_to_string({"content": "a\nb", "created_at": "", "modified_at": ""}) == "a\nb"
    assert file_data_to_string({"content": ["a", "b"]}) == "a\nb"
    with pytest.raises(TypeError):
        file_data_to_string({"content": 3})


async def test_files_of_a_result_read_with_file_data_to_string() -> None:
    from deepactors import AssistantMessage, ToolCall

    write = ToolCall(name="write_file", args={"file_path": "/a.md", "content": "x"})
    model = ScriptedModel([AssistantMessage(tool_calls=[write]), "done"])
    result = await create_deep_agent(model=model).ainvoke("write")
    assert file_data_to_string(result["files"]["/a.md"]) == "x"


def test_filesystem_backend_takes_deepagents_names(tmp_path: Path) -> None:
    assert FilesystemBackend(root_dir=tmp_path).root == str(tmp_path)
    assert FilesystemBackend(root_dir=tmp_path, virtual_mode=True).root == str(tmp_path)
    with pytest.raises(InvalidPath, match="virtual_mode"):
        FilesystemBackend(root_dir=tmp_path, virtual_mode=False)
    with pytest.raises(InvalidPath, match="root_dir"):
        FilesystemBackend(tmp_path, root_dir=tmp_path)


def test_without_langchain_core_the_error_names_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "langchain_core", None)
    with pytest.raises(ConfigurationError, match=r"deepactors\[langchain\]"):
        require_langchain("LangChain tools")


class Connection:
    """A type pydantic has no JSON schema for."""


def test_a_tool_parameter_without_a_schema_is_refused_naming_tool_and_parameter() -> None:
    def query(sql: str, conn: Connection) -> str:
        """Run a query."""
        return sql

    with pytest.raises(ConfigurationError, match=r"tool 'query': parameter 'conn' \(.*Connection"):
        create_deep_agent(model=ScriptedModel(["x"]), tools=[query])


def test_a_misspelt_keyword_of_invoke_names_invoke() -> None:
    agent = create_deep_agent(model=ScriptedModel(["x"]))
    with pytest.raises(TypeError, match=r"DeepAgent\.invoke\(\) .* 'confg'"):
        agent.invoke("hi", confg={})
    with pytest.raises(TypeError, match=r"DeepAgent\.stream\(\) .* 'stream_mod'"):
        agent.stream("hi", stream_mod="values")


def test_an_agent_without_langchain_objects_imports_no_langchain() -> None:
    import subprocess

    script = (
        "import sys\n"
        "from deepactors import create_deep_agent\n"
        "from deepactors.models import ScriptedModel\n"
        "def f(x: int) -> int:\n"
        "    '''F.'''\n"
        "    return x\n"
        "create_deep_agent(model=ScriptedModel(['x']), tools=[f]).invoke('hi')\n"
        "print([m for m in sys.modules if m.startswith(('langchain', 'langgraph'))])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]"


async def test_recursion_limit_raises_langgraphs_error_which_is_ours_too() -> None:
    from langgraph.errors import GraphRecursionError

    from deepactors import AssistantMessage, ToolCall
    from deepactors.errors import StepLimitExceeded
    from deepactors.models import FunctionModel

    def loop(request: object) -> AssistantMessage:
        return AssistantMessage(tool_calls=[ToolCall(name="write_todos", args={"todos": []})])

    agent = create_deep_agent(model=FunctionModel(loop))
    with pytest.raises(GraphRecursionError) as caught:
        await agent.ainvoke("go", {"recursion_limit": 4})
    assert isinstance(caught.value, StepLimitExceeded)
    with pytest.raises(GraphRecursionError):
        async for _ in agent.astream("go", {"recursion_limit": 4}, stream_mode="updates"):
            pass
