"""Real MCP servers for the tests: the registry's (npm) and a small one of ours (mcp_app.py).

The npm servers are installed by ``.ci/run`` into ``.ci/node`` (pinned in
``.ci/node/package.json``); if they are missing and npm is here, they are
installed once on first use. Without npm those tests are skipped.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.mcp.servers import NODE, free_port, start_http_app


@pytest.fixture
def app_log(tmp_path: Path) -> Path:
    return tmp_path / "app.log"


@pytest.fixture(scope="session")
def http_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """Our test server over streamable HTTP (uvicorn on 127.0.0.1): its URL and log."""
    log = tmp_path_factory.mktemp("http") / "app.log"
    port = free_port()
    proc = start_http_app(port, log)
    try:
        yield f"http://127.0.0.1:{port}/mcp", log
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture(scope="session")
def npm_bin() -> Path:
    """``.ci/node/node_modules/.bin``, with the registry's MCP servers installed."""
    bin_dir = NODE / "node_modules" / ".bin"
    wanted = ("mcp-server-everything", "mcp-server-filesystem")
    if not all((bin_dir / name).exists() for name in wanted):
        npm = shutil.which("npm")
        if npm is None:
            pytest.skip("npm is not installed: the registry's MCP servers cannot be installed")
        subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=NODE,
            check=True,
            timeout=600,
        )
    return bin_dir
