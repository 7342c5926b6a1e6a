"""W3: do concurrent subagents' file edits survive the merge?

Shape 1: N children each edit a different pre-existing file (read_file, then
edit_file), all in one fan-out. Shape 2: two children write the same new path.
Printed: how many edits survive in the parent's files, and where the second
same-path write went (deepagents 0.7.32 keeps 1 of 10 in shape 1, and loses one
of the two writes in shape 2 without a word).

    python bench/w3_files.py [--n 10] [--loops asyncio trio]
"""

from __future__ import annotations

import argparse

import anyio

from deepactors import AssistantMessage, ToolCall, ToolMessage, create_deep_agent
from deepactors.models import FunctionModel, ModelRequest


def child_answer(request: ModelRequest) -> AssistantMessage:
    """Read the file named in the brief, edit one line, then report."""
    brief = request.messages[0].text
    done = [m for m in request.messages if isinstance(m, ToolMessage)]
    kind, path, *tag = brief.split(" ")
    if kind == "write":
        if not done:
            return AssistantMessage(
                tool_calls=[
                    ToolCall(
                        name="write_file",
                        args={"file_path": path, "content": f"findings of {tag[0]}\n"},
                    )
                ]
            )
        return AssistantMessage(content=f"wrote {path}")
    if not done:
        return AssistantMessage(tool_calls=[ToolCall(name="read_file", args={"file_path": path})])
    if len(done) == 1:
        return AssistantMessage(
            tool_calls=[
                ToolCall(
                    name="edit_file",
                    args={
                        "file_path": path,
                        "old_string": "status: todo",
                        "new_string": "status: done",
                    },
                )
            ]
        )
    return AssistantMessage(content=f"edited {path}: {done[-1].text}")


def parent(briefs: list[str]) -> FunctionModel:
    def answer(request: ModelRequest) -> AssistantMessage:
        if len(request.messages) == 1:
            return AssistantMessage(
                tool_calls=[
                    ToolCall(name="task", args={"description": b, "subagent_type": "editor"})
                    for b in briefs
                ]
            )
        return AssistantMessage(content="merged")

    return FunctionModel(answer)


def agent_for(briefs: list[str]) -> object:
    return create_deep_agent(
        parent(briefs),
        subagents=[
            {
                "name": "editor",
                "description": "edits files",
                "system_prompt": "Edit as told.",
                "model": FunctionModel(child_answer),
            }
        ],
    )


async def run(n: int) -> None:
    files = {f"/notes/{i}.md": f"# note {i}\nstatus: todo\n" for i in range(n)}
    agent = agent_for([f"edit /notes/{i}.md" for i in range(n)])
    result = await agent.ainvoke({"messages": "edit every note", "files": files})  # type: ignore[attr-defined]
    survived = sum(
        result["files"][p].content == f"# note {i}\nstatus: done\n" for i, p in enumerate(files)
    )
    print(f"  {n} children editing {n} different files: {survived}/{n} edits survive")

    agent = agent_for(["write /report.md alpha", "write /report.md beta"])
    result = await agent.ainvoke("two writers")  # type: ignore[attr-defined]
    kept = {p: r.content.strip() for p, r in result["files"].items()}
    both = {"findings of alpha", "findings of beta"} == set(kept.values())
    print(
        f"  2 children writing /report.md: {'both kept' if both else 'LOST ONE'}: "
        + ", ".join(f"{p} ({c!r})" for p, c in sorted(kept.items()))
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10)
    parser.add_argument("--loops", nargs="+", default=["asyncio", "trio"])
    args = parser.parse_args()
    for backend in args.loops:
        print(f"W3 on {backend}:")
        anyio.run(run, args.n, backend=backend)


if __name__ == "__main__":
    main()
