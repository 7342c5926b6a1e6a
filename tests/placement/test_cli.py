"""``deepactors run --ray``: the command's subagents run on Ray workers, their model
(an OpenAI-compatible server's, here a local fake one) sent to the workers."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from deepactors.cli import main
from deepactors.placement._cluster import _POOLS
from tests.openai.fake_api import FakeOpenAI, answer, call

ray = pytest.importorskip("ray")


@pytest.fixture
def own_workers(ray_cluster: None) -> Iterator[None]:
    """The test's own placements' workers are stopped after it (they hold CPUs)."""
    before = set(_POOLS)
    yield
    for key in set(_POOLS) - before:
        for handle in _POOLS.pop(key).handles:
            ray.kill(handle)


def test_run_with_ray_places_the_subagents_on_workers(
    own_workers: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # (One loop: the command's; the placement's loops are the other tests'.)
    before = set(_POOLS)
    with FakeOpenAI() as api:
        brief = {"description": "Say hi.", "subagent_type": "general-purpose"}
        api.reply(
            answer("Delegating.", calls=[call("task", brief)]),
            answer("Hi from a worker."),
            answer("The subagent said: Hi from a worker."),
        )
        monkeypatch.setenv("OLLAMA_BASE_URL", api.base_url)
        code = main(["run", "--ray", "--model", "ollama:llama3.3", "--loop", "trio", "Go"])
        out = capsys.readouterr()
        assert code == 0, out.err
        assert "[main] answer: The subagent said: Hi from a worker." in out.out
        assert len(api.requests) == 3
        assert api.invalid == []
    # The child ran on the command's own worker (made for its placement).
    [placed] = set(_POOLS) - before
    stats = ray.get([h.statistics.remote() for h in _POOLS[placed].handles])
    assert sum(s.finished for s in stats) == 1


def test_ray_beside_an_agent_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    # The loaded agent brings its own subagents (and placement): refused before
    # the agent is loaded or Ray is started.
    code = main(["run", "--ray", "--agent", "nowhere:agent", "Go"])
    assert code == 2
    assert "--ray with --agent" in capsys.readouterr().err
