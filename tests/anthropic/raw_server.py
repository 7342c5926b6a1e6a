"""A raw-socket HTTP server on 127.0.0.1 that breaks connections on purpose.

:class:`FakeAnthropicAPI` always finishes its answers; this one is for transport
failures: an event stream cut off after its first event (with a TCP reset), a
stream that stalls until the client's read timeout fires, a plain answer whose
body stops short. Each accepted connection reads one request and then runs the
scripted behaviour.
"""

from __future__ import annotations

import contextlib
import json
import socket
import struct
import threading
from types import TracebackType
from typing import Literal

__all__ = ["Behaviour", "RawServer"]

Behaviour = Literal["reset_mid_stream", "stall_mid_stream", "short_body", "reset_before_answer"]

_MESSAGE_START = {
    "type": "message_start",
    "message": {
        "id": "msg_raw",
        "type": "message",
        "role": "assistant",
        "model": "claude-raw",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    },
}


class RawServer:
    """Serve ``behaviour`` to every connection until closed.

    Attributes:
        connections: How many connections were accepted.
    """

    def __init__(self, behaviour: Behaviour) -> None:
        self.behaviour = behaviour
        self.connections = 0
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)
        self._closed = threading.Event()
        self._clients: list[socket.socket] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._sock.getsockname()[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> RawServer:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._closed.set()
        # Wake accept() by connecting once; then close everything.
        with contextlib.suppress(OSError):
            socket.create_connection(self._sock.getsockname()[:2], timeout=1).close()
        self._thread.join(timeout=5)
        self._sock.close()
        for client in self._clients:
            client.close()

    def _serve(self) -> None:
        while not self._closed.is_set():
            client, _ = self._sock.accept()
            if self._closed.is_set():
                client.close()
                return
            self.connections += 1
            self._clients.append(client)
            threading.Thread(target=self._answer, args=(client,), daemon=True).start()

    def _answer(self, client: socket.socket) -> None:
        try:
            _read_request(client)
            if self.behaviour == "reset_before_answer":
                _reset(client)
            elif self.behaviour == "short_body":
                client.sendall(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                    b"content-length: 1000\r\n\r\n" + b'{"id": "msg_raw", "type": "mess'
                )
                _reset(client)
            else:
                client.sendall(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                    b"transfer-encoding: chunked\r\n\r\n"
                )
                chunk = f"event: message_start\ndata: {json.dumps(_MESSAGE_START)}\n\n".encode()
                client.sendall(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                if self.behaviour == "reset_mid_stream":
                    _reset(client)
                else:
                    # Stall: the client's read timeout has to end this.
                    self._closed.wait(10)
        except OSError:
            pass


def _read_request(client: socket.socket) -> None:
    data = b""
    while b"\r\n\r\n" not in data:
        piece = client.recv(65536)
        if not piece:
            return
        data += piece
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        piece = client.recv(65536)
        if not piece:
            return
        body += piece


def _reset(client: socket.socket) -> None:
    """Close with a TCP RST (SO_LINGER 0): "connection reset by peer" on the client."""
    client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    client.close()
