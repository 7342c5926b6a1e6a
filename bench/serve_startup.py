"""Start-up of a ``deepactors serve`` process, beside a bare server's, in one run.

Each side is a fresh process on 127.0.0.1, timed from its spawn to its first
``200`` on ``/ok``: the **floor** is a bare Starlette app answering ``/ok``
under the same ASGI server (uvicorn on asyncio, hypercorn on trio), so what is
left is deepactors' own cost (importing the package and its server, building
the demo agent, opening the runtime). Prints, per side, the median over
``--repeats`` of the wall time and of the CPU seconds the process had used when
it answered (less noisy than the wall time on a shared machine), and the ratio.

    python bench/serve_startup.py [--loop asyncio|trio] [--repeats 5]

Whether Python could use or write bytecode matters here (every start compiles
the package again when it has none and ``PYTHONDONTWRITEBYTECODE`` is set):
the output says both.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

_FLOOR = """
import sys
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

async def ok(request):
    return JSONResponse({"ok": True})

app = Starlette(routes=[Route("/ok", ok)])
port = int(sys.argv[2])
if sys.argv[1] == "asyncio":
    import uvicorn
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")
else:
    import trio
    from hypercorn.config import Config
    from hypercorn.trio import serve
    config = Config()
    config.bind = [f"127.0.0.1:{port}"]
    trio.run(serve, app, config)
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _start_once(argv: list[str], cwd: str) -> tuple[float, float]:
    """Seconds from spawn to the first 200 on /ok, and the CPU seconds used by then."""
    started = time.perf_counter()
    process = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{argv[-1]}/ok"
    try:
        while True:
            if process.poll() is not None:
                raise SystemExit(f"{argv} ended with {process.returncode} before answering")
            try:
                if httpx.get(url, timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.005)
        return time.perf_counter() - started, _cpu_seconds(process.pid)
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--loop", choices=["asyncio", "trio"], default="asyncio")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    spec = importlib.util.find_spec("deepactors")
    assert spec is not None
    assert spec.origin is not None
    package = Path(spec.origin).parent  # the one the server processes will import
    print(f"deepactors from {package}; medians of {args.repeats} starts per side")
    print(
        f"PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE', '')!r};"
        f" deepactors has bytecode: {any(package.glob('__pycache__/*.pyc'))}"
    )
    sides = {
        "floor": lambda port: [sys.executable, "-c", _FLOOR, args.loop, str(port)],
        "deepactors serve": lambda port: [
            *(sys.executable, "-m", "deepactors", "serve", "--loop", args.loop),
            *("--port", str(port)),
        ],
    }
    figures: dict[str, list[tuple[float, float]]] = {name: [] for name in sides}
    with tempfile.TemporaryDirectory() as cwd:
        for _ in range(args.repeats):  # the sides alternate, so load hits both alike
            for name, argv in sides.items():
                figures[name].append(_start_once(argv(_free_port()), cwd))
    medians = {
        name: (statistics.median(w for w, _ in runs), statistics.median(c for _, c in runs))
        for name, runs in figures.items()
    }
    for name, (wall, cpu) in medians.items():
        print(f"{name:>17} ({args.loop}): wall {wall:.2f} s, CPU {cpu:.2f} s")
    (floor_wall, floor_cpu), (ours_wall, ours_cpu) = medians.values()
    print(f"{'ratio':>17}: wall {ours_wall / floor_wall:.2f}x, CPU {ours_cpu / floor_cpu:.2f}x")


if __name__ == "__main__":
    main()
