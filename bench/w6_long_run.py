"""W6: a 1,000-turn run with summarization on: middleware CPU per turn, history write volume.

One agent, 1,000 model turns on a FunctionModel (no latency), each calling a
tool that returns 2,000 characters, with the default stack. Three shapes run in
the same process, on asyncio and trio:

* ``summarizing``: trigger 20k tokens, keep 5k: the view stays small and a
  summary (a model call, a history append) comes every ~30 turns.
* ``growing``: summarization on but never firing (the trigger is out of reach):
  the history grows to 2,000 messages, which shows whether the per-turn token
  count is O(new messages) or O(history).
* ``floor``: the same run with the middleware replaced by a pass-through.

For each, the CPU of the summarization middleware itself (``process_time``,
whole process, threads included; the model call and inner middleware are
excluded) is averaged over turns 50-149 ("turn 100") and 901-1000 ("turn
1,000"), amortizing the summary turns, and split into the median plain turn and the
mean summary turn; whole-process CPU per turn is shown beside it. The goal: the
middleware's cost at turn 1,000 within 1.5x of turn 100.

The history file lives on a ``FilesystemBackend`` (``O_APPEND``): its total write
volume is its final size, measured on disk and by the process's write counter
(``/proc/self/io`` wchar), beside what a read-and-rewrite per summary would
write. Median of 3 repeats after a warm-up; figures are indicative (a shared
2-core machine).

    python bench/w6_long_run.py [--turns 1000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import itertools
import logging
import re
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import structlog

from deepactors import AssistantMessage, ToolCall, create_deep_agent
from deepactors.backends import FilesystemBackend
from deepactors.hooks import AgentMiddleware, ModelHandler
from deepactors.middleware import SummarizationMiddleware
from deepactors.models import FunctionModel, ModelRequest
from deepactors.persistence import SqliteCheckpointer

PAGE = "x" * 2_000


async def fetch(page: int) -> str:
    """Fetch one page.

    Args:
        page: The page number.
    """
    return PAGE


@dataclass
class Probe:
    """Per-turn CPU samples: the middleware's own, and the whole process's."""

    own: list[float] = field(default_factory=list)
    summarized: list[bool] = field(default_factory=list)
    turn_starts: list[float] = field(default_factory=list)


class TimedSummarization(SummarizationMiddleware):
    """The real middleware, timing its own work (its handler's time excluded)."""

    def __init__(self, probe: Probe, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.probe = probe

    @property
    def name(self) -> str:
        return "SummarizationMiddleware"  # replaces the default in place

    async def wrap_model_call(self, request: ModelRequest, handler: ModelHandler) -> Any:
        inner = 0.0

        async def timed(req: ModelRequest) -> Any:
            nonlocal inner
            t = time.process_time()
            try:
                return await handler(req)
            finally:
                inner += time.process_time() - t

        before = _summaries(request)
        t0 = time.process_time()
        try:
            return await super().wrap_model_call(request, timed)
        finally:
            self.probe.own.append(time.process_time() - t0 - inner)
            self.probe.summarized.append(_summaries(request) != before)


def _summaries(request: ModelRequest) -> int:
    assert request.state is not None
    return int((request.state.get("summarization") or {}).get("summaries", 0))


class PassThrough(AgentMiddleware):
    """The floor: no summarization at all."""

    @property
    def name(self) -> str:
        return "SummarizationMiddleware"

    async def wrap_model_call(self, request: ModelRequest, handler: ModelHandler) -> Any:
        return await handler(request)


def make_model(turns: int, probe: Probe) -> FunctionModel:
    state = {"turn": 0}

    def answer(request: ModelRequest) -> AssistantMessage | str:
        if not request.tools:
            return "SUMMARY: pages fetched; nothing else happened."
        probe.turn_starts.append(time.process_time())
        state["turn"] += 1
        if state["turn"] > turns:
            return "done"
        return AssistantMessage(tool_calls=[ToolCall(name="fetch", args={"page": state["turn"]})])

    return FunctionModel(answer)


def wchar() -> int:
    try:
        text = Path("/proc/self/io").read_text()
    except OSError:
        return -1
    found = re.search(r"^wchar: (\d+)$", text, re.MULTILINE)
    return int(found.group(1)) if found else -1


@dataclass
class Outcome:
    own_100: float  # amortized: mean of every turn in the window, summary turns included
    own_1000: float
    plain_100: float  # median of the turns without a summary
    plain_1000: float
    summary_100: float  # mean cost of a summary turn
    summary_1000: float
    turn_100: float
    turn_1000: float
    summaries: int
    file_bytes: int = 0
    wchar_bytes: int = 0
    rewrite_bytes: int = 0


def window(samples: list[float], lo: int, hi: int) -> float:
    part = samples[lo:hi]
    return sum(part) / max(len(part), 1)


def split(probe: Probe, lo: int, hi: int) -> tuple[float, float]:
    """Median own CPU of the window's plain turns; mean of its summary turns."""
    pairs = list(zip(probe.own[lo:hi], probe.summarized[lo:hi], strict=True))
    plain = [t for t, s in pairs if not s]
    summary = [t for t, s in pairs if s]
    return (
        statistics.median(plain) if plain else 0.0,
        sum(summary) / len(summary) if summary else 0.0,
    )


def run_once(shape: str, loop: str, turns: int, folder: Path) -> Outcome:
    probe = Probe()
    root = folder / f"{shape}-{loop}-{time.monotonic_ns()}"
    if shape == "floor":
        mw: AgentMiddleware = PassThrough()
    else:
        trigger = ("tokens", 20_000) if shape == "summarizing" else ("tokens", 10**9)
        mw = TimedSummarization(probe, trigger=trigger, keep=("tokens", 5_000))
    agent = create_deep_agent(
        make_model(turns, probe),
        tools=[fetch],
        middleware=[mw],
        backend=FilesystemBackend(root),
        max_steps=turns + 5,
    )

    async def go() -> dict[str, Any]:
        return await agent.ainvoke("fetch every page", thread_id=None)

    w0 = wchar()
    result = anyio.run(go, backend=loop)
    written = wchar() - w0
    steps = [b - a for a, b in itertools.pairwise(probe.turn_starts)]
    # 100-turn windows: each holds three or four summaries of the "summarizing" shape.
    lo, hi = max(turns // 10 - 50, 0), turns // 10 + 50
    end = (turns - 100, turns)
    plain_100, summary_100 = split(probe, lo, hi) if probe.own else (0.0, 0.0)
    plain_1000, summary_1000 = split(probe, *end) if probe.own else (0.0, 0.0)
    outcome = Outcome(
        own_100=window(probe.own, lo, hi),
        own_1000=window(probe.own, *end),
        plain_100=plain_100,
        plain_1000=plain_1000,
        summary_100=summary_100,
        summary_1000=summary_1000,
        turn_100=window(steps, lo, hi),
        turn_1000=window(steps, *end),
        summaries=int((result.get("summarization") or {}).get("summaries", 0)),
    )
    histories = list((root / "conversation_history").glob("*.md"))
    if histories:
        text = histories[0].read_text()
        outcome.file_bytes = len(text.encode())
        outcome.wchar_bytes = written
        # What a read-and-rewrite of the whole file per summary would have written.
        starts = [m.start() for m in re.finditer(r"^## Messages ", text, re.MULTILINE)]
        ends = [*starts[1:], len(text)]
        outcome.rewrite_bytes = sum(len(text[:end].encode()) for end in ends)
    return outcome


def state_backend_checkpoints(loop: str, turns: int, folder: Path) -> tuple[int, int]:
    """The summarizing run on the default StateBackend with SQLite checkpoints.

    Returns the history file's size and the checkpoint file's size. A state file
    is one string, but an append is checkpointed as the added text only, so the
    checkpoint holds the history about once, beside the messages.
    """
    db = folder / f"state-{loop}-{time.monotonic_ns()}.db"
    agent = create_deep_agent(
        make_model(turns, Probe()),
        tools=[fetch],
        middleware=[SummarizationMiddleware(trigger=("tokens", 20_000), keep=("tokens", 5_000))],
        checkpointer=SqliteCheckpointer(db),
        max_steps=turns + 5,
    )

    async def go() -> dict[str, Any]:
        return await agent.ainvoke("fetch every page", thread_id="w6")

    result = anyio.run(go, backend=loop)
    history = result["files"]["/conversation_history/w6.md"].content
    return len(history.encode()), db.stat().st_size


def median_outcome(samples: list[Outcome]) -> Outcome:
    def med(attr: str) -> Any:
        return statistics.median(getattr(s, attr) for s in samples)

    return Outcome(**{k: med(k) for k in Outcome.__dataclass_fields__})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    # The middleware logs each summary at info; the figures should not include a console.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    turns = args.turns
    print(
        f"W6: {turns} turns, 2,000-char tool results, FunctionModel, FilesystemBackend; "
        "summarization trigger 20k tokens, keep 5k"
    )
    t = f"@{turns}"
    print(
        f"{'loop':8} {'shape':12} | middleware us/turn: {'amortized @100':>14} {t:>7} {'ratio':>6} "
        f"| {'plain @100':>10} {t:>7} | {'a summary @100':>14} {t:>7} "
        f"| process ms/turn {'@100':>6} {t:>7} | summaries"
    )
    histories: dict[str, Outcome] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for loop in ("asyncio", "trio"):
            for shape in ("summarizing", "growing", "floor"):
                samples = [run_once(shape, loop, turns, folder) for _ in range(args.repeats + 1)]
                m = median_outcome(samples[1:])  # the first run warms up
                if shape == "floor":
                    own = f"{'-':>14} {'-':>7} {'':>6} | {'-':>10} {'-':>7} | {'-':>14} {'-':>7}"
                else:
                    ratio = m.own_1000 / m.own_100 if m.own_100 else float("nan")
                    own = (
                        f"{m.own_100 * 1e6:14.1f} {m.own_1000 * 1e6:7.1f} {ratio:5.2f}x "
                        f"| {m.plain_100 * 1e6:10.1f} {m.plain_1000 * 1e6:7.1f} "
                        f"| {m.summary_100 * 1e6:14.0f} {m.summary_1000 * 1e6:7.0f}"
                    )
                print(
                    f"{loop:8} {shape:12} | {'':19} {own} | {'':15} {m.turn_100 * 1e3:6.3f} "
                    f"{m.turn_1000 * 1e3:7.3f} | {m.summaries}"
                )
                if shape == "summarizing":
                    histories[loop] = m
        for loop in ("asyncio", "trio"):
            history, checkpoints = state_backend_checkpoints(loop, turns, folder)
            print(
                f"StateBackend + SQLite ({loop}): history file {history / 1e6:.2f} MB, "
                f"checkpoint file {checkpoints / 1e6:.1f} MB (appends are stored as the "
                "added text)"
            )
    for loop, m in histories.items():
        print(
            f"history file ({loop}): {m.summaries} appends, {m.file_bytes / 1e6:.2f} MB on disk, "
            f"{m.wchar_bytes / 1e6:.2f} MB written by the process (wchar); a read-and-rewrite "
            f"per summary would write {m.rewrite_bytes / 1e6:.1f} MB "
            f"({m.rewrite_bytes / max(m.file_bytes, 1):.0f}x)"
        )


if __name__ == "__main__":
    main()
