"""Files: the file tools, enforced read-before-write, and eviction of large results."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from .._core.logs import get_logger
from ..backends import Backend
from ..context import RunContext, ToolRuntime
from ..errors import ConfigurationError, ToolError
from ..hooks import AgentMiddleware, ToolCallRequest, ToolHandler
from ..messages import TextBlock, ToolMessage
from ..state import State
from ..tools import Command, Tool
from ._fs_format import eviction_notice, result_path, wrap_long_lines
from ._fs_tools import READS_CHANNEL, FileToolLimits, make_file_tools, reads_channel

__all__ = ["FILESYSTEM_PROMPT", "FilesystemMiddleware"]

_log = get_logger("deepactors")

FILESYSTEM_PROMPT = """\
## Files
You have a file system for notes, drafts, data and results: keep long material in files
rather than in your replies. Paths are absolute and start at `/`.
- Find files with `ls`, `glob` (name patterns) and `grep` (text inside files).
- `read_file` shows a file as numbered lines, a page at a time; use `offset` to go on.
- `write_file` creates or replaces a file; `edit_file` replaces an exact string in one.
  A file that already exists must be read with `read_file` first (again if it changed
  since your last read), or the change is refused.
- Tool results too large to show are saved under `/large_tool_results/`; read them in pages."""

# The tools whose output is bounded by their own paging or cutting: evicting them
# would only hide a result the model can already narrow, or (read_file) loop.
_SELF_BOUNDED = frozenset({"ls", "read_file", "write_file", "edit_file", "delete", "glob", "grep"})


def _plain_text(message: ToolMessage) -> str | None:
    """The message's text, or None when it holds more than text (images are kept)."""
    content = message.content
    if isinstance(content, str):
        return content
    if all(isinstance(block, TextBlock) for block in content):
        return message.text
    return None


class FilesystemMiddleware(AgentMiddleware):
    """File tools over the agent's backend, and eviction of large tool results.

    Tools: ``ls``, ``read_file``, ``write_file``, ``edit_file``, ``delete``,
    ``glob``, ``grep``, and ``execute`` when commands can run.

    **Read before write is enforced**, not just asked for: ``edit_file``, and
    ``write_file`` over an existing file, are refused unless this actor has read
    the file since it last changed. Each read records the file's version token;
    a write compares it with the current version, so a change by another agent, a
    subagent merge or the user since the read means reading again. A successful
    write or edit records the new version, so consecutive edits need no re-read.
    The record is kept per actor and per run.

    Any tool result (other than the file tools', which page or cut their own
    output) longer than ``large_result_chars`` is saved to
    ``/large_tool_results/<tool call id>`` and replaced by a short notice with a
    preview and how to page through it; if saving fails the result is kept whole.

    Args:
        backend: Use this backend instead of the agent's (``run.backend``); it is
            bound to each actor's state with ``backend.bind(state, name=agent)``.
        execute: Whether to offer the ``execute`` tool. None: only when
            ``backend`` is given and can run commands. The tool list is fixed per
            agent, so when the file backend is the agent's, whoever builds the
            agent says here whether that backend can execute.
        large_result_chars: Results longer than this are evicted to a file; also
            the most characters one page of ``read_file`` (or a listing) shows.
            None disables eviction and the page cap.
        read_limit_default: Lines ``read_file`` shows when the model gives no limit.
        max_line_chars: Longer lines are clipped in ``read_file`` and ``grep``
            output (and split in evicted results, so they can be read whole).
        grep_max_matches: Matching lines a ``grep`` collects before it stops.
        max_entries: Entries ``ls`` and ``glob`` list before they stop.
        system_prompt: The section added to the system prompt; None for none.

    Raises:
        ConfigurationError: A limit below 1.
    """

    def __init__(
        self,
        *,
        backend: Backend | None = None,
        execute: bool | None = None,
        large_result_chars: int | None = 80_000,
        read_limit_default: int = 100,
        max_line_chars: int = 2000,
        grep_max_matches: int = 500,
        max_entries: int = 1000,
        system_prompt: str | None = FILESYSTEM_PROMPT,
    ) -> None:
        for name, value in (
            ("large_result_chars", large_result_chars),
            ("read_limit_default", read_limit_default),
            ("max_line_chars", max_line_chars),
            ("grep_max_matches", grep_max_matches),
            ("max_entries", max_entries),
        ):
            if value is not None and value < 1:
                raise ConfigurationError(f"FilesystemMiddleware: {name} must be at least 1")
        self.backend = backend
        self.large_result_chars = large_result_chars
        self.read_limit_default = read_limit_default
        self.max_line_chars = max_line_chars
        self.grep_max_matches = grep_max_matches
        self.max_entries = max_entries
        self.system_prompt = system_prompt
        self.channels = {READS_CHANNEL: reads_channel()}
        if execute is None:
            execute = backend is not None and backend.can_execute
        limits = FileToolLimits(
            read_limit_default=read_limit_default,
            max_line_chars=max_line_chars,
            max_chars=large_result_chars,
            grep_max_matches=grep_max_matches,
            max_entries=max_entries,
        )
        self.tools: Sequence[Tool] = make_file_tools(
            self._runtime_backend, limits, with_execute=execute
        )

    def _backend(self, state: State, run: RunContext) -> Backend | None:
        own = self.backend
        if own is None:
            return run.backend
        bind = getattr(own, "bind", None)
        return own if bind is None else bind(state, name=run.agent_name)

    def _runtime_backend(self, runtime: ToolRuntime) -> Backend:
        backend = self._backend(runtime.state, runtime.run)
        if backend is None:
            raise ToolError("this agent has no file backend, so the file tools cannot work")
        return backend

    # -- large results -------------------------------------------------------

    async def wrap_tool_call(
        self, request: ToolCallRequest, handler: ToolHandler
    ) -> ToolMessage | Command:
        """Save a result longer than ``large_result_chars`` to a file; keep a notice."""
        out = await handler(request)
        limit = self.large_result_chars
        if limit is None or request.call.name in _SELF_BOUNDED:
            return out
        if isinstance(out, ToolMessage):
            text = _plain_text(out)
            if text is None or len(text) <= limit:
                return out
            notice = await self._evict(text, request)
            return out if notice is None else out.model_copy(update={"content": notice})
        return await self._evict_command(out, request, limit)

    async def _evict_command(
        self, command: Command, request: ToolCallRequest, limit: int
    ) -> Command:
        """The same for a tool's Command: its answering ToolMessage, or its ``result``."""
        update = dict(command.update or {})
        messages = list(update.get("messages", ()))
        for i, m in enumerate(messages):
            if isinstance(m, ToolMessage) and m.tool_call_id == request.call.id:
                text = _plain_text(m)
                if text is None or len(text) <= limit:
                    return command
                notice = await self._evict(text, request)
                if notice is None:
                    return command
                messages[i] = m.model_copy(update={"content": notice})
                update["messages"] = messages
                return dataclasses.replace(command, update=update)
        if len(command.result) <= limit:
            return command
        notice = await self._evict(command.result, request)
        return command if notice is None else dataclasses.replace(command, result=notice)

    async def _evict(self, text: str, request: ToolCallRequest) -> str | None:
        """Write ``text`` to the results folder; the notice, or None when that failed."""
        backend = self._backend(request.state, request.run)
        if backend is None:
            return None
        path = result_path(request.call.id)
        stored, wrapped = wrap_long_lines(text, self.max_line_chars)
        try:
            await backend.write(path, stored)
        except Exception as exc:  # cancellation is a BaseException and passes through
            _log.warning(
                "large tool result kept in the history: saving it failed",
                path=request.run.path,
                tool=request.call.name,
                error=f"{type(exc).__name__}: {exc}",
            )
            return None
        total_lines = stored.count("\n") + (0 if stored.endswith("\n") else 1)
        return eviction_notice(
            text, path, total_lines=total_lines, wrapped=wrapped, wrap_width=self.max_line_chars
        )
