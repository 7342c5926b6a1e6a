"""examples/fastapi_app.py under a real server: the agent in an existing app's lifespan."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import httpx

from .conftest import Served

EXAMPLE = Path(__file__).parents[2] / "examples" / "fastapi_app.py"


def _example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("fastapi_app_example", EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_fastapi_example_answers_and_streams(serve: Callable[..., Served]) -> None:
    served = serve(_example().app)
    with httpx.Client(base_url=served.url, timeout=30) as http:
        answer = http.post("/ask", json={"question": "why?", "thread_id": "t1"}).json()
        assert answer["answer"]["report_path"] == "/report.md"
        assert "/report.md" in answer["files"]
        with http.stream("POST", "/ask/stream", json={"question": "again?"}) as response:
            events = [
                json.loads(line.removeprefix("data: "))
                for line in response.iter_lines()
                if line.startswith("data: ")
            ]
    assert events[0]["event"] == "RunStarted"
    assert events[-1]["event"] == "RunFinished"
    assert any(e["path"].startswith("main/task-") for e in events)
    assert http.is_closed
