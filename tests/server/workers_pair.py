"""Two ``deepactors serve`` processes sharing runs through one PostgreSQL database,
started once for a module's tests (a start costs seconds, tens on a loaded machine).

:func:`workers_pair` serves :data:`AGENT_MODULE` from a folder of the module's
own, on each loop, two ports over one database; the tests keep apart by thread
ids. Its ``ticker`` tool ticks until a ``release`` file appears beside the
agent: :func:`release` gives a test that file's path, removed first, so a test
releases its own runs only (the module's tests run one after another).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.pgserver import PostgresServer

from .serve_process import serve_processes

__all__ = ["AGENT_MODULE", "WorkersPair", "release", "workers_pair"]

AGENT_MODULE = """
import anyio
from pathlib import Path

from deepactors import AssistantMessage, ToolCall, ToolMessage, ToolRuntime, create_deep_agent
from deepactors.models import FunctionModel, ModelRequest

RELEASE = Path(__file__).with_name("release")


async def ticker(runtime: ToolRuntime) -> str:
    \"\"\"Tick until released.\"\"\"
    n = 0
    while not await anyio.Path(RELEASE).exists():
        n += 1
        runtime.write({"tick": n})
        await anyio.sleep(0.02)
    return "released"


async def blocker() -> str:
    \"\"\"Block until cancelled.\"\"\"
    await anyio.sleep_forever()
    return "never"


def model(request: ModelRequest) -> AssistantMessage:
    last = request.messages[-1]
    if isinstance(last, ToolMessage):
        return AssistantMessage(content="done: " + last.text)
    return AssistantMessage(tool_calls=[ToolCall(name=last.text, args={})])


agent = create_deep_agent(FunctionModel(model), tools=[ticker, blocker])
"""


@dataclass(frozen=True, slots=True)
class WorkersPair:
    """The module's two server processes, A and B, and what they were started with."""

    folder: Path
    loop: str
    dsn: str
    a: str
    b: str

    def args(self, *more: str) -> list[str]:
        """``deepactors serve`` arguments for another process sharing A's and B's runs."""
        return ["workers_agent:agent", "--db", self.dsn, "--loop", self.loop, *more]


@pytest.fixture(scope="module", params=["asyncio", "trio"])
def workers_pair(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    postgres_server: PostgresServer,
) -> Iterator[WorkersPair]:
    """Two server processes on two ports sharing threads and runs in one PostgreSQL,
    on the loop (uvicorn on asyncio, hypercorn on trio), for the module."""
    folder = tmp_path_factory.mktemp("workers")
    (folder / "workers_agent.py").write_text(AGENT_MODULE)
    pair = WorkersPair(folder, str(request.param), postgres_server.new_database(), "", "")
    with serve_processes([pair.args(), pair.args()], folder) as ((a, _), (b, _)):
        yield WorkersPair(pair.folder, pair.loop, pair.dsn, a, b)


@pytest.fixture
def release(workers_pair: WorkersPair) -> Path:
    """The file whose appearance ends the ``ticker`` runs; absent when the test starts."""
    path = workers_pair.folder / "release"
    path.unlink(missing_ok=True)
    return path
