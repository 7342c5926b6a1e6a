"""W8's model server: the Anthropic Messages API and OpenAI Chat Completions on 127.0.0.1.

Run as its own process (``python bench/_w8_server.py N``), so that the client
process's CPU figures hold the client's work only. It prints ``PORT <n>`` once it
listens. The answers follow W2's shape: a request offering the ``task`` tool is
the main agent's (first turn: N ``task`` calls; then an answer); any other is a
subagent's (two ``lookup`` calls one at a time, then an answer).

``GET /first/<anthropic|openai>/<main|child>`` returns the first such request body
received: the floor sends requests of the same shape (its system prompt and tools).
"""

from __future__ import annotations

import itertools
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

JSON = dict[str, Any]

N = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
FIRST: dict[str, JSON] = {}
_ids = itertools.count(1)
USAGE_IN, USAGE_OUT = 1200, 40


def _anthropic(body: JSON, n: int) -> JSON:
    tools = {t.get("name") for t in body.get("tools", [])}
    turns = body["messages"]
    results = sum(
        1
        for turn in turns
        if turn["role"] == "user" and isinstance(turn["content"], list)
        for block in turn["content"]
        if block.get("type") == "tool_result"
    )
    kind = "main" if "task" in tools else "child"
    FIRST.setdefault(f"anthropic/{kind}", body)
    if kind == "main":
        if results == 0:
            content = [
                {
                    "type": "tool_use",
                    "id": f"toolu_{next(_ids)}",
                    "name": "task",
                    "input": {"description": f"topic {i}", "subagent_type": "r"},
                }
                for i in range(n)
            ]
        else:
            content = [{"type": "text", "text": f"report from {results} findings"}]
    elif results < 2:
        content = [
            {
                "type": "tool_use",
                "id": f"toolu_{next(_ids)}",
                "name": "lookup",
                "input": {"key": f"k{results}"},
            }
        ]
    else:
        content = [{"type": "text", "text": "finding"}]
    return {
        "id": f"msg_{next(_ids)}",
        "type": "message",
        "role": "assistant",
        "model": body["model"],
        "content": content,
        "stop_reason": "tool_use" if content[0]["type"] == "tool_use" else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": USAGE_IN, "output_tokens": USAGE_OUT},
    }


def _openai(body: JSON, n: int) -> JSON:
    tools = {t["function"]["name"] for t in body.get("tools", [])}
    results = sum(1 for m in body["messages"] if m.get("role") == "tool")
    kind = "main" if "task" in tools else "child"
    FIRST.setdefault(f"openai/{kind}", body)
    calls: list[JSON] = []
    text: str | None = None
    if kind == "main":
        if results == 0:
            calls = [
                {
                    "id": f"call_{next(_ids)}",
                    "type": "function",
                    "function": {
                        "name": "task",
                        "arguments": json.dumps(
                            {"description": f"topic {i}", "subagent_type": "r"}
                        ),
                    },
                }
                for i in range(n)
            ]
        else:
            text = f"report from {results} findings"
    elif results < 2:
        calls = [
            {
                "id": f"call_{next(_ids)}",
                "type": "function",
                "function": {"name": "lookup", "arguments": json.dumps({"key": f"k{results}"})},
            }
        ]
    else:
        text = "finding"
    message: JSON = {"role": "assistant", "content": text, "refusal": None}
    if calls:
        message["tool_calls"] = calls
    return {
        "id": f"chatcmpl-{next(_ids)}",
        "object": "chat.completion",
        "created": 0,
        "model": body["model"],
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if calls else "stop",
                "logprobs": None,
            }
        ],
        "usage": {
            "prompt_tokens": USAGE_IN,
            "completion_tokens": USAGE_OUT,
            "total_tokens": USAGE_IN + USAGE_OUT,
            "prompt_tokens_details": {"cached_tokens": 0},
        },
    }


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, data: JSON) -> None:
        payload = json.dumps(data).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def do_GET(self) -> None:
        self._send(FIRST.get(self.path.removeprefix("/first/"), {}))

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        if not raw:
            return  # the client left (a run that failed elsewhere is cancelling)
        body = json.loads(raw)
        n = int(self.headers.get("x-fanout", N))  # the warm-up runs use a small one
        if self.path.startswith("/v1/messages"):
            self._send(_anthropic(body, n))
        else:
            self._send(_openai(body, n))


class Server(ThreadingHTTPServer):
    request_queue_size = 2048
    daemon_threads = True


def main() -> None:
    server = Server(("127.0.0.1", 0), Handler)
    print(f"PORT {server.server_address[1]}", flush=True)
    server.serve_forever(poll_interval=0.05)


if __name__ == "__main__":
    main()
