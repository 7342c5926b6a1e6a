"""An MCP server's tools as :class:`~deepactors.tools.Tool` objects, and their results as content.

The schema the model sees is the server's ``inputSchema`` as the server states
it: the server validates the arguments (and says what is wrong in an
``isError`` result the model reads), so nothing is re-validated here beyond
"an object".
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, final

from pydantic import BaseModel, ConfigDict

from ..context import ToolRuntime
from ..errors import ToolArgumentsError, ToolError
from ..messages import ContentBlock, ImageBlock, TextBlock
from ..tools import Tool

if TYPE_CHECKING:
    from mcp_types import CallToolResult
    from mcp_types import Tool as RemoteTool

    from ._config import MCPServer

__all__ = ["MCPTool", "content_of", "tools_of"]


class _AnyArguments(BaseModel):
    """Stands for the server's schema where a pydantic model is expected; checks nothing."""

    model_config = ConfigDict(extra="allow")


def _unused(**_: object) -> None:  # pragma: no cover - MCPTool.call goes to the server
    raise NotImplementedError


@final
@dataclass(slots=True, kw_only=True, eq=False)
class MCPTool(Tool):
    """A tool of an MCP server, called through the calling runtime's session to it.

    Attributes:
        remote_name: The server's name for it (``name`` may carry a prefix).
        server: The server as the agent with this tool configured it (its
            ``call_timeout`` bounds each call).
    """

    remote_name: str
    server: MCPServer

    def validate(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """The arguments as a dict; the server checks them against its schema.

        Raises:
            ToolArgumentsError: They are not an object.
        """
        if not isinstance(args, Mapping):
            raise ToolArgumentsError("invalid arguments: expected a JSON object")
        return dict(args)

    async def call(self, args: Mapping[str, Any], runtime: ToolRuntime | None = None) -> Any:
        """Call the tool on the server; return its result as text or content blocks.

        When the run has listeners, the server is asked for progress, and each
        notification it sends becomes a :class:`~deepactors.events.CustomEvent`
        whose data is ``{"mcp_progress": {"server", "tool", "progress", "total",
        "message"}}``.

        Raises:
            ToolError: An ``isError`` result (its content is the message), or
                the server could not be reached (see :class:`Connection`).
        """
        from ._pool import connection_for

        progress = None
        if runtime is not None and runtime.run.emit is not None:
            progress = _progress_writer(runtime, self.server.name, self.remote_name)
        result = await connection_for(self.server).call(
            self.remote_name, self.validate(args), progress, timeout=self.server.call_timeout
        )
        content = content_of(result)
        if result.is_error:
            text = content if isinstance(content, str) else _text_of(content)
            raise ToolError(text or f"the MCP tool {self.name!r} failed")
        return content


def _progress_writer(
    runtime: ToolRuntime, server: str, tool: str
) -> Callable[[float, float | None, str | None], Awaitable[None]]:
    async def progress(done: float, total: float | None, message: str | None) -> None:
        runtime.write(
            {
                "mcp_progress": {
                    "server": server,
                    "tool": tool,
                    "progress": done,
                    "total": total,
                    "message": message,
                }
            }
        )

    return progress


def tools_of(server: MCPServer, remote: list[RemoteTool]) -> list[MCPTool]:
    """The tools ``server``'s configuration gives of ``remote`` (a listing), named and filtered."""
    out = []
    for t in remote:
        name = server.tool_name(t.name)
        if name is None:
            continue
        schema = dict(t.input_schema or {})
        schema.setdefault("type", "object")
        schema.setdefault("properties", {})
        out.append(
            MCPTool(
                name=name,
                description=t.description or t.title or t.name,
                parameters=schema,
                fn=_unused,
                args_model=_AnyArguments,
                is_async=True,
                # Asks for the run's context: progress notifications become its events.
                runtime_param="runtime",
                remote_name=t.name,
                server=server,
            )
        )
    return out


def content_of(result: CallToolResult) -> str | list[ContentBlock]:
    """What the model reads of a tool result: text, or blocks when there are images.

    Text content stays text; images become image blocks (for models that take
    them); an embedded resource shows its text (or says what binary it holds);
    audio and resource links are described. Structured content is shown as JSON
    when the server sent nothing else (the spec asks servers to send both).
    """
    from mcp_types import (
        AudioContent,
        BlobResourceContents,
        EmbeddedResource,
        ImageContent,
        ResourceLink,
        TextContent,
        TextResourceContents,
    )

    blocks: list[ContentBlock] = []
    for item in result.content:
        if isinstance(item, TextContent):
            blocks.append(TextBlock(text=item.text))
        elif isinstance(item, ImageContent):
            blocks.append(
                ImageBlock(
                    source={"type": "base64", "media_type": item.mime_type, "data": item.data}
                )
            )
        elif isinstance(item, EmbeddedResource):
            res = item.resource
            if isinstance(res, TextResourceContents):
                blocks.append(TextBlock(text=f"[resource {res.uri}]\n{res.text}"))
            elif isinstance(res, BlobResourceContents):
                size = len(res.blob) * 3 // 4
                kind = res.mime_type or "binary"
                blocks.append(TextBlock(text=f"[resource {res.uri}: {kind}, ~{size} bytes]"))
        elif isinstance(item, ResourceLink):
            what = f": {item.description}" if item.description else ""
            blocks.append(TextBlock(text=f"[resource link {item.name} {item.uri}{what}]"))
        elif isinstance(item, AudioContent):
            size = len(item.data) * 3 // 4
            blocks.append(TextBlock(text=f"[audio: {item.mime_type}, ~{size} bytes]"))
    if not blocks and result.structured_content is not None:
        return json.dumps(result.structured_content, ensure_ascii=False)
    if all(isinstance(b, TextBlock) for b in blocks):
        return _text_of(blocks)
    return blocks


def _text_of(blocks: list[ContentBlock]) -> str:
    return "\n\n".join(b.text for b in blocks if isinstance(b, TextBlock))
