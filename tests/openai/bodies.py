"""Reading request bodies of either API the same way, for scripted brains."""

from __future__ import annotations

from typing import Any

JSON = dict[str, Any]


def is_chat(body: JSON) -> bool:
    return "messages" in body


def tool_names(body: JSON) -> set[str]:
    return {t["function"]["name"] if "function" in t else t["name"] for t in body.get("tools", [])}


def turns(body: JSON) -> list[JSON]:
    return list(body["messages"] if is_chat(body) else body["input"])


def tool_outputs(body: JSON) -> list[str]:
    """The tool results at the end of the conversation, in order."""
    out: list[str] = []
    for turn in reversed(turns(body)):
        if turn.get("role") == "tool":
            out.append(turn["content"])
        elif turn.get("type") == "function_call_output":
            out.append(turn["output"])
        else:
            break
    return out[::-1]


def first_user_text(body: JSON) -> str:
    for turn in turns(body):
        if turn.get("role") == "user":
            content = turn["content"]
            if isinstance(content, str):
                return content
            return "".join(p.get("text", "") for p in content)
    return ""


def all_text(body: JSON) -> str:
    return str(turns(body))
