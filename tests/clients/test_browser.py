"""deep-agents-ui's flows in a real browser: Debian's Chromium, driven by
Playwright (``executable_path``, never a browser download), on a page that uses
``useStream`` from ``@langchain/langgraph-sdk/react`` as deep-agents-ui does
(``js/page/app.jsx``, bundled with esbuild), served from another origin and
talking to ``deepactors serve --cors-origin`` on asyncio and trio.

Building deep-agents-ui's own Next.js app needs its whole dependency tree;
the page keeps exactly its calls (useChat.ts, ToolApprovalInterrupt.tsx).
Screenshots go to ``$DEEPACTORS_TEST_ARTIFACTS/browser`` (default: the test's
temporary folder).
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from .served import served_agent
from .test_js_sdk import JS, node_or_skip

CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def _bundle(into: Path) -> None:
    node_or_skip()
    # npm installs esbuild's own binary for this platform here.
    esbuild = JS / "node_modules" / "esbuild" / "bin" / "esbuild"
    built = subprocess.run(
        [
            str(esbuild),
            "page/app.jsx",
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


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextlib.contextmanager
def _static(folder: Path) -> Iterator[str]:
    """The page's folder over HTTP, on an origin of its own."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=folder))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _artifacts(tmp_path: Path, loop: str) -> Path:
    root = os.environ.get("DEEPACTORS_TEST_ARTIFACTS")
    folder = (Path(root) if root else tmp_path) / "browser" / loop
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def test_follow_ups_and_approve_reject_edit_in_chromium(loop: str, tmp_path: Path) -> None:
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (Debian's chromium package; .ci/run installs it)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is in the dev extra")
    page_dir = tmp_path / "page"
    page_dir.mkdir()
    _bundle(page_dir)
    shots = _artifacts(tmp_path, loop)
    with (
        _static(page_dir) as origin,
        served_agent(loop, tmp_path, "--cors-origin", origin) as api,
        sync_api.sync_playwright() as playwright,
    ):
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            page = browser.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(f"{origin}/index.html?api={api}")
            expect = sync_api.expect
            messages = page.locator("#messages li")

            def say(text: str) -> None:
                expect(page.locator("#send")).to_be_enabled()
                page.fill("#text", text)
                page.click("#send")

            say("one")
            expect(messages.last).to_have_text("echo #1: one")
            # The follow-up: useStream sends the head checkpoint with it.
            say("two")
            expect(messages.last).to_have_text("echo #2: two")
            page.screenshot(path=shots / "follow-up.png")

            say("email bob")
            expect(page.locator("#tool")).to_have_text("send_email")
            page.screenshot(path=shots / "approval.png")
            page.click("#approve")
            expect(messages.last).to_have_text("sent: sent to bob: email bob")

            say("email carol")
            page.click("#reject")
            page.fill("#reason", "not today")
            page.click("#confirm-reject")
            expect(messages.last).to_contain_text("not sent")

            say("email dan")
            page.click("#edit")
            page.fill("#edit-args", '{"to": "al", "body": "hi"}')
            page.click("#save-edit")
            expect(messages.last).to_have_text("sent: sent to al: hi")
            page.screenshot(path=shots / "after-edit.png")

            # A reload finds the thread again from its history.
            page.reload()
            expect(messages.last).to_have_text("sent: sent to al: hi")

            # A reload while a run streams: useStream rejoins it (Last-Event-ID).
            rejoins: list[Any] = []

            def rejoin(request: Any) -> None:
                if request.method == "GET" and request.url.split("?")[0].endswith("/stream"):
                    rejoins.append(request)

            page.on("request", rejoin)
            say("slow one")
            expect(page.locator("#status")).to_have_text("loading")
            page.reload()
            expect(messages.last).to_have_text("echo #6: slow one")
            expect(page.locator("#status")).to_have_text("idle")
            assert [r.headers.get("last-event-id") for r in rejoins] == ["-1"]
            expect(page.locator("#error")).to_have_text("")
            assert errors == []
        finally:
            browser.close()
