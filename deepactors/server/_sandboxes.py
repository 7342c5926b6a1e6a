"""The served agents' sandboxes, opened with the server and closed after its runs."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from contextlib import AsyncExitStack, asynccontextmanager

from anyio.abc import AsyncResource

from ..agent import DeepAgent
from ..backends import SandboxProvider

__all__ = ["open_sandboxes"]


@asynccontextmanager
async def open_sandboxes(agents: Iterable[DeepAgent]) -> AsyncIterator[None]:
    """Open every agent's sandbox backend (each once) for the server's lifetime.

    A per-thread sandbox (``create_deep_agent(backend=BubblewrapSandbox(...))``)
    gives each thread its own workspace, keyed by the thread and by the
    authenticated caller's identity, which the server puts on every run. Opening
    it at start-up checks that it can run here: a server whose sandbox cannot
    work fails to start (``SandboxUnavailable``) instead of failing each command.
    Entered before the runtime, so it closes after every run has ended.
    """
    async with AsyncExitStack() as stack:
        seen: set[int] = set()
        for agent in agents:
            backend = agent.spec.backend
            if (
                isinstance(backend, SandboxProvider)
                and isinstance(backend, AsyncResource)
                and id(backend) not in seen
            ):
                seen.add(id(backend))
                await stack.enter_async_context(backend)
        yield
