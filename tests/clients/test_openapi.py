"""``/openapi.json`` read by a real client generator (openapi-typescript), and the
``/docs`` page, which loads nothing from elsewhere."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import httpx

from .test_js_sdk import JS, node_or_skip


def test_openapi_lists_every_operation_with_its_body_schema(url: str) -> None:
    spec = httpx.get(f"{url}/openapi.json").json()
    assert spec["openapi"] == "3.1.0"
    run = spec["paths"]["/threads/{thread_id}/runs/stream"]["post"]
    assert run["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/RunCreate"
    }
    assert "text/event-stream" in run["responses"]["200"]["content"]
    fields = spec["components"]["schemas"]["RunCreate"]["properties"]
    assert {"assistant_id", "checkpoint", "stream_resumable", "command"} <= set(fields)
    assert {"get", "post"} <= set(spec["paths"]["/threads/{thread_id}/history"])
    ids = [op["operationId"] for ops in spec["paths"].values() for op in ops.values()]
    assert len(ids) == len(set(ids))


def test_a_client_generator_reads_it(url: str, tmp_path: Path) -> None:
    node_or_skip()
    spec = tmp_path / "openapi.json"
    spec.write_bytes(httpx.get(f"{url}/openapi.json").content)
    out = tmp_path / "deepactors.d.ts"
    generated = subprocess.run(
        [str(JS / "node_modules" / ".bin" / "openapi-typescript"), str(spec), "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert generated.returncode == 0, generated.stdout + generated.stderr
    types = out.read_text()
    assert 'post: operations["stream_run"]' in types
    assert "RunCreate: {" in types


def test_the_docs_page_works_offline(url: str) -> None:
    page = httpx.get(f"{url}/docs")
    assert page.status_code == 200
    assert "/threads/{thread_id}/runs/stream" in page.text
    assert not re.search(r"""(src|href)=['"]?(https?:)?//""", page.text)
