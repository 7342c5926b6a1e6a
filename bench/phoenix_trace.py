"""A run's trace in a trace viewer nobody here wrote: Arize Phoenix, over OTLP/HTTP.

Starts Phoenix (``arize-phoenix`` from PyPI, in a virtual environment of its
own: its dependencies are many) as an OTLP receiver on 127.0.0.1, runs a deep
agent whose main agent fans out to ``--children`` subagents (each calling a
tool), exports the spans with the OpenTelemetry SDK's OTLP/HTTP exporter, and
reads the trace back through Phoenix's REST API: every span we sent, in one
trace, each with the parent we gave it. With ``--screenshot PATH``, Debian's
Chromium (driven by Playwright, no browser download) takes a picture of the
trace's page.

    python -m venv /tmp/phoenix && /tmp/phoenix/bin/pip install arize-phoenix
    pip install opentelemetry-exporter-otlp-proto-http playwright
    python bench/phoenix_trace.py --phoenix /tmp/phoenix/bin/phoenix \\
        [--children 50] [--loop asyncio|trio] [--screenshot docs/img/phoenix-trace.png]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from typing import Any

import anyio


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())


def _agent(children: int) -> Any:
    from deepactors import AssistantMessage, ToolCall, Usage, create_deep_agent
    from deepactors.models import FunctionModel, ModelRequest

    usage = Usage(input_tokens=1200, output_tokens=80, cache_read_tokens=1000)

    def search(topic: str) -> str:
        """Search for a topic.

        Args:
            topic: The topic.
        """
        return f"three facts about {topic}"

    def researcher(request: ModelRequest) -> AssistantMessage:
        if len(request.messages) == 1:
            topic = request.messages[0].text
            call = ToolCall(name="search", args={"topic": topic})
            return AssistantMessage(tool_calls=[call], usage=usage, model="researcher-1")
        return AssistantMessage(content="findings", usage=usage, model="researcher-1")

    def main(request: ModelRequest) -> AssistantMessage:
        if len(request.messages) == 1:
            calls = [
                ToolCall(name="task", args={"description": f"topic {i}", "subagent_type": "r"})
                for i in range(children)
            ]
            return AssistantMessage(tool_calls=calls, usage=usage, model="lead-1")
        return AssistantMessage(content="report", usage=usage, model="lead-1")

    sub = {
        "name": "r",
        "description": "researches a topic",
        "system_prompt": "research",
        "tools": [search],
        "model": FunctionModel(researcher, name="researcher-1"),
    }
    return create_deep_agent(FunctionModel(main, name="lead-1"), subagents=[sub], name="lead")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--phoenix", default="phoenix", help="the phoenix command")
    parser.add_argument("--children", type=int, default=50)
    parser.add_argument("--loop", default="asyncio", choices=["asyncio", "trio"])
    parser.add_argument("--screenshot", help="a PNG of the trace's page in Chromium")
    args = parser.parse_args()

    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from deepactors import open_runtime
    from deepactors.tracing import Tracing

    port, grpc = _free_port(), _free_port()
    work = tempfile.mkdtemp(prefix="phoenix-")
    env = {
        **os.environ,
        "PHOENIX_WORKING_DIR": work,
        "PHOENIX_PORT": str(port),
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_GRPC_PORT": str(grpc),
    }
    base = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [args.phoenix, "serve"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                if urllib.request.urlopen(f"{base}/healthz", timeout=2).status == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline or server.poll() is not None:
                sys.exit("phoenix did not start")
            time.sleep(0.5)

        sent = InMemorySpanExporter()
        resource = Resource.create({"service.name": "deepactors-demo"})
        provider = TracerProvider(resource=resource)
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(f"{base}/v1/traces")))
        provider.add_span_processor(SimpleSpanProcessor(sent))
        agent = _agent(args.children)

        async def run() -> None:
            async with open_runtime(tracing=Tracing(tracer_provider=provider)) as rt:
                await agent.ainvoke("research fifty topics", thread_id="demo", runtime=rt)

        anyio.run(run, backend=args.loop)
        provider.force_flush()
        ours = sent.get_finished_spans()
        (trace_id,) = {f"{s.context.trace_id:032x}" for s in ours}
        expected = {f"{s.context.span_id:016x}": s for s in ours}

        seen: dict[str, Any] = {}
        deadline = time.monotonic() + 60
        while len(seen) < len(expected) and time.monotonic() < deadline:
            time.sleep(1)
            cursor = None
            while True:
                url = f"{base}/v1/projects/default/spans?limit=1000"
                page = _get(url + (f"&cursor={cursor}" if cursor else ""))
                for span in page["data"]:
                    if span["context"]["trace_id"] == trace_id:
                        seen[span["context"]["span_id"]] = span
                cursor = page.get("next_cursor")
                if not cursor:
                    break
        missing = set(expected) - set(seen)
        wrong_parent = [
            sid
            for sid, span in seen.items()
            if sid in expected
            and (span.get("parent_id") or None)
            != (
                f"{expected[sid].parent.span_id:016x}" if expected[sid].parent is not None else None
            )
        ]
        names: dict[str, int] = {}
        for span in seen.values():
            kind = span["name"].split(" ")[0]
            names[kind] = names.get(kind, 0) + 1
        print(f"trace {trace_id}: sent {len(expected)} spans, Phoenix has {len(seen)}")
        print(f"  by kind: {json.dumps(names, sort_keys=True)}")
        print(f"  missing: {len(missing)}, with another parent: {len(wrong_parent)}")
        if args.screenshot:
            _screenshot(base, trace_id, args.screenshot)
            print(f"  screenshot: {args.screenshot}")
        if missing or wrong_parent:
            sys.exit(1)
    finally:
        server.terminate()
        server.wait(30)


def _screenshot(base: str, trace_id: str, path: str) -> None:
    from playwright.sync_api import sync_playwright

    project = _get(f"{base}/v1/projects")["data"][0]["id"]
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
    ]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=flags)
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        page.goto(f"{base}/projects/{project}/traces/{trace_id}")
        # The page is drawn by scripts, in steps (placeholders first): wait for
        # its requests to settle, then for the root span and its attributes.
        page.wait_for_load_state("networkidle", timeout=60_000)
        page.get_by_text("invoke_agent lead").first.wait_for(timeout=60_000)
        page.get_by_text("gen_ai.agent.name").first.wait_for(timeout=60_000)
        page.wait_for_timeout(1000)
        page.screenshot(path=path)
        browser.close()


if __name__ == "__main__":
    main()
