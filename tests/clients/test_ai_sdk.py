"""The AI SDK's ``useChat`` (``@ai-sdk/react``, ``ai`` 7) in a real browser: Debian's
Chromium driven by Playwright (``executable_path``, never a browser download), on
a page served from another origin (``js_protocols/page/chat.jsx``, bundled with
esbuild) talking to ``deepactors serve --cors-origin`` on asyncio (uvicorn) and
trio (hypercorn); one server and one browser per loop.

Send and stream (and a follow-up), reasoning, todos and files as data parts, 50
subagents each attributed by its actor path (and one type hidden), an approval
approved and one denied (the SDK's tool-approval parts, sent back
automatically), Stop (which cancels the run on the server), Regenerate (the
thread goes back before the answer), and a failing run. Screenshots go to
``$DEEPACTORS_TEST_ARTIFACTS/ai-sdk/<loop>/`` (default: a temporary folder).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.waiting import wait_until_sync

from .protocol_agent import write_agent
from .served import serving
from .test_agui import JS, protocol_node
from .test_browser import CHROMIUM, FLAGS, _static


def _bundle(into: Path) -> None:
    protocol_node()
    esbuild = JS / "node_modules" / "esbuild" / "bin" / "esbuild"
    built = subprocess.run(
        [
            str(esbuild),
            "page/chat.jsx",
            "--bundle",
            "--format=esm",
            f"--outfile={into / 'bundle.js'}",
            '--define:process.env.NODE_ENV="production"',
            "--log-level=warning",
        ],
        cwd=JS,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert built.returncode == 0, built.stderr
    shutil.copy(JS / "page" / "index.html", into / "index.html")


@dataclass
class Browser:
    """A browser on the chat page's origin, and the server it talks to."""

    browser: Any
    expect: Any
    origin: str
    server: str
    shots: Path
    chats: int = 0

    def open(self, hide: Any = None) -> Any:
        """A new page on a chat of its own (``hide``: the ``hideSubagents`` switch)."""
        self.chats += 1
        chat = f"chat-{os.getpid()}-{self.chats}"
        query = f"api={self.server}/ai-sdk/agent&chat={chat}"
        if hide is not None:
            query += f"&hide={json.dumps(hide)}"
        page = self.browser.new_page()
        page.errors = []
        page.on("pageerror", lambda exc: page.errors.append(str(exc)))
        page.goto(f"{self.origin}/index.html?{query}")
        page.chat = chat
        return page

    def say(self, page: Any, text: str) -> None:
        self.expect(page.locator("#send")).to_be_enabled()
        page.fill("#text", text)
        page.click("#send")

    def done(self, page: Any) -> None:
        """Wait for the chat to be ready again, with no error of the page's own."""
        self.expect(page.locator("#status")).to_have_text("ready", timeout=30_000)
        assert page.errors == []


@pytest.fixture(scope="module", params=["asyncio", "trio"])
def chat(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (Debian's chromium package; .ci/run installs it)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is in the dev extra")
    loop = str(request.param)
    folder = tmp_path_factory.mktemp(f"ai-sdk-{loop}")
    page_dir = folder / "page"
    page_dir.mkdir()
    _bundle(page_dir)
    root = os.environ.get("DEEPACTORS_TEST_ARTIFACTS")
    shots = (Path(root) if root else folder) / "ai-sdk" / loop
    shots.mkdir(parents=True, exist_ok=True)
    target = write_agent(folder)
    with (
        _static(page_dir) as origin,
        serving([target, "--loop", loop, "--cors-origin", origin], folder) as server,
        sync_api.sync_playwright() as playwright,
    ):
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            yield Browser(browser, sync_api.expect, origin, server, shots)
        finally:
            browser.close()


def test_send_stream_and_follow_up(chat: Browser) -> None:
    page = chat.open()
    chat.say(page, "hello")
    chat.expect(page.locator(".text").last).to_have_text("echo #1: hello")
    chat.done(page)
    chat.say(page, "again")
    chat.expect(page.locator(".text").last).to_have_text("echo #2: again")
    chat.done(page)
    page.screenshot(path=chat.shots / "follow-up.png")
    # Streamed: the answer was built from several deltas (the model sends 4 characters each).
    meta = page.evaluate("window.__chat.messages.at(-1).metadata")
    assert meta["deepactors"]["threadId"] == page.chat


def test_reasoning_todos_and_files(chat: Browser) -> None:
    page = chat.open()
    chat.say(page, "think")
    chat.expect(page.locator(".reasoning")).to_have_text("let me think")
    chat.expect(page.locator(".text").last).to_have_text("thought it through")
    chat.done(page)
    usage = page.evaluate("window.__chat.messages.at(-1).metadata.deepactors.usage")
    assert usage["input_tokens"] == 7
    chat.say(page, "plan")
    chat.expect(page.locator(".todos li")).to_have_text(["write notes"])
    chat.expect(page.locator('.file[data-path="/notes.md"]')).to_have_text("# notes")
    chat.expect(page.locator(".text").last).to_have_text("planned")
    chat.done(page)
    tools = page.locator(".tool")
    chat.expect(tools).to_have_count(2)
    chat.expect(tools.first).to_have_attribute("data-state", "output-available")


def test_fifty_subagents_each_attributed(chat: Browser) -> None:
    page = chat.open()
    chat.say(page, "fan 50")
    chat.expect(page.locator(".text").last).to_have_text("all 50 subagents done", timeout=60_000)
    chat.done(page)
    chat.expect(page.locator('.subagent[data-status="finished"]')).to_have_count(50)
    texts = page.locator(".subagent-text")
    chat.expect(texts).to_have_count(50)
    seen = {texts.nth(i).get_attribute("data-path"): texts.nth(i).inner_text() for i in range(50)}
    assert len(seen) == 50
    assert sorted(seen.values()) == sorted(f"done: job {i}" for i in range(50))
    assert all(path is not None and path.endswith(":worker") for path in seen)
    page.screenshot(path=chat.shots / "fifty.png", full_page=True)


def test_hidden_subagent_type_sends_only_its_progress(chat: Browser) -> None:
    page = chat.open(hide=["reader"])
    chat.say(page, "fan 50 mixed")
    chat.expect(page.locator(".text").last).to_have_text("all 50 subagents done", timeout=60_000)
    chat.done(page)
    chat.expect(page.locator('.subagent[data-status="finished"]')).to_have_count(50)
    paths = page.locator(".subagent-text")
    chat.expect(paths).to_have_count(25)
    for i in range(25):
        assert (paths.nth(i).get_attribute("data-path") or "").endswith(":worker")


def test_approve_and_deny_with_approval_parts(chat: Browser) -> None:
    page = chat.open()
    chat.say(page, "email alice")
    tool = page.locator('.tool[data-name="send_email"]')
    chat.expect(tool).to_have_attribute("data-state", "approval-requested")
    chat.done(page)
    page.screenshot(path=chat.shots / "approval.png")
    tool.locator(".approve").click()
    chat.expect(page.locator(".text").last).to_have_text("sent: sent to bob: email alice")
    chat.expect(tool).to_have_attribute("data-state", "output-available")
    chat.done(page)
    chat.say(page, "email carol")
    denied = page.locator('.tool[data-name="send_email"]').last
    chat.expect(denied).to_have_attribute("data-state", "approval-requested")
    denied.locator(".deny").click()
    chat.expect(page.locator(".text").last).to_contain_text("not sent: ")
    chat.expect(page.locator(".text").last).to_contain_text("not this one")
    chat.expect(denied).to_have_attribute("data-state", "output-denied")
    chat.done(page)


def test_stop_cancels_the_run(chat: Browser) -> None:
    page = chat.open()
    chat.say(page, "slow")
    chat.expect(page.locator("#status")).to_have_text("submitted")
    with httpx.Client(base_url=chat.server, timeout=10) as http:

        def first_run_is(status: str) -> bool:
            runs: list[dict[str, Any]] = http.get(f"/threads/{page.chat}/runs").json()
            return bool(runs) and runs[0]["status"] == status

        # The run is created once the request is in.
        wait_until_sync(lambda: first_run_is("running"), what="the run created, running")
        page.click("#stop")
        chat.expect(page.locator("#status")).to_have_text("ready")
        wait_until_sync(lambda: first_run_is("interrupted"), what="the run interrupted")
    assert page.errors == []


def test_regenerate_goes_back_before_the_answer(chat: Browser) -> None:
    page = chat.open()
    chat.say(page, "hello")
    chat.expect(page.locator(".text").last).to_have_text("echo #1: hello")
    chat.done(page)
    page.click("#regenerate")
    chat.done(page)
    # The model sees one user message again, not the same one twice.
    chat.expect(page.locator(".message.assistant .text")).to_have_text(["echo #1: hello"])
    with httpx.Client(base_url=chat.server, timeout=10) as http:
        values = http.get(f"/threads/{page.chat}/state").json()["values"]
    said = [m["content"] for m in values["messages"]]
    assert said == ["hello", "echo #1: hello"]


def test_a_failing_run_is_an_error(chat: Browser) -> None:
    page = chat.open()
    chat.say(page, "fail")
    chat.expect(page.locator("#status")).to_have_text("error")
    chat.expect(page.locator("#error")).to_contain_text("the model broke")
    assert page.errors == []
