"""The virtual clock of tests/conftest.py, on both loops (see tests/vtime.py)."""

from __future__ import annotations

import asyncio
import socket
import threading

import anyio
import pytest
import sniffio
import trio
import trio.testing

from tests.vtime import VirtualClockLoop, jump


def on_virtual_clock() -> bool:
    if sniffio.current_async_library() == "asyncio":
        return isinstance(asyncio.get_running_loop(), VirtualClockLoop)
    return isinstance(trio.lowlevel.current_clock(), trio.testing.MockClock)


async def test_unmarked_tests_run_on_the_real_clock() -> None:
    assert not on_virtual_clock()


@pytest.mark.virtual_time
async def test_an_hour_of_sleep_passes_exactly_and_at_once() -> None:
    assert on_virtual_clock()
    start = anyio.current_time()
    await anyio.sleep(3600)
    assert anyio.current_time() - start == pytest.approx(3600)


@pytest.mark.virtual_time
async def test_sleepers_wake_in_the_order_of_their_deadlines() -> None:
    woke: list[tuple[int, float]] = []

    async def sleeper(seconds: int) -> None:
        await anyio.sleep(seconds)
        woke.append((seconds, anyio.current_time()))

    start = anyio.current_time()
    async with anyio.create_task_group() as tg:
        for seconds in (30, 10, 20):
            tg.start_soon(sleeper, seconds)
    assert [s for s, _ in woke] == [10, 20, 30]
    assert [t - start for _, t in woke] == pytest.approx([10, 20, 30])


@pytest.mark.virtual_time
async def test_a_hang_meets_its_deadline_on_the_virtual_clock() -> None:
    start = anyio.current_time()
    with pytest.raises(TimeoutError), anyio.fail_after(5):
        await anyio.Event().wait()
    assert anyio.current_time() - start == pytest.approx(5)


@pytest.mark.virtual_time
async def test_the_clock_stands_still_while_tasks_run() -> None:
    start = anyio.current_time()
    for _ in range(100):
        await anyio.lowlevel.checkpoint()
    assert anyio.current_time() == start


@pytest.mark.virtual_time
async def test_io_within_the_loop_still_flows_under_a_deadline() -> None:
    # A listener and a client on this loop: the clock only jumps when nothing is ready.
    async with await anyio.create_tcp_listener(local_host="127.0.0.1") as listener:
        port = listener.extra(anyio.abc.SocketAttribute.local_port)

        async def echo(stream: anyio.abc.SocketStream) -> None:
            async with stream:
                await stream.send(await stream.receive())

        async with anyio.create_task_group() as tg:
            tg.start_soon(listener.serve, echo)
            with anyio.fail_after(5):
                async with await anyio.connect_tcp("127.0.0.1", port) as client:
                    await client.send(b"ping")
                    assert await client.receive() == b"ping"
            tg.cancel_scope.cancel()


@pytest.mark.virtual_time
async def test_without_a_deadline_the_loop_waits_for_io_from_outside() -> None:
    # Nothing scheduled: the loop blocks on I/O as usual instead of jumping.
    a, b = socket.socketpair()
    with a, b:
        later = threading.Timer(0.05, b.send, args=(b"x",))
        later.start()
        await anyio.wait_readable(a)
        assert a.recv(1) == b"x"
        later.join()


@pytest.mark.virtual_time(autojump_threshold=30)
async def test_a_threshold_waits_in_real_time_before_jumping() -> None:
    # A worker thread under a deadline: with 30 s of real grace the clock waits for it.
    start = anyio.current_time()
    with anyio.fail_after(1):
        assert await anyio.to_thread.run_sync(lambda: sum(range(10_000))) == 49995000
    assert anyio.current_time() - start < 1


@pytest.mark.virtual_time
async def test_jump_is_a_call_that_holds_the_loop() -> None:
    start = anyio.current_time()
    with anyio.move_on_after(1) as scope:
        jump(7)  # the deadline passes while nothing yields...
        assert anyio.current_time() >= anyio.current_effective_deadline()
        await anyio.sleep_forever()  # ...and is delivered without the clock moving on
    assert scope.cancelled_caught
    assert anyio.current_time() - start == pytest.approx(7)
