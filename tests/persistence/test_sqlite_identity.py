"""A SQLite file deleted or replaced while in use is an error naming it, never silent loss.

A deleted file stays writable through the connection that has it open: SQLite
went on committing into the unlinked inode, and the run ended "fine" with every
record gone at exit. Now the file's identity (device, inode) is checked after
every operation, on both loops (aiosqlite on asyncio, worker threads on trio).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import anyio.to_thread
import pytest

from deepactors import AssistantMessage, ScriptedModel, ToolCall, create_deep_agent
from deepactors.errors import CheckpointError, CheckpointFileLost, StoreError, StoreFileLost
from deepactors.persistence import CheckpointWrite, SqliteCheckpointer, SqliteStore


def write(step: int, **data: object) -> CheckpointWrite:
    return CheckpointWrite(path="main", step=step, kind="update", data=dict(data))


async def test_a_put_after_the_file_is_deleted_fails_naming_it(tmp_path: Path) -> None:
    file = tmp_path / "cp.db"
    async with SqliteCheckpointer(file) as cp:
        await cp.put("t", [write(0, n=1)])
        await anyio.to_thread.run_sync(os.unlink, file)
        with pytest.raises(CheckpointFileLost) as info:
            await cp.put("t", [write(1, n=2)])
        assert str(file) in str(info.value)
        assert "deleted" in str(info.value)
        assert isinstance(info.value, CheckpointError)
        # And every later operation, reads and the thread list included.
        with pytest.raises(CheckpointFileLost):
            await cp.read("t")
        with pytest.raises(CheckpointFileLost):
            await cp.threads()


async def test_a_file_replaced_by_another_sqlite_file_fails_naming_it(tmp_path: Path) -> None:
    file, other = tmp_path / "cp.db", tmp_path / "other.db"
    async with SqliteCheckpointer(other) as cp2:
        await cp2.put("t", [write(0, who="other")])
    async with SqliteCheckpointer(file) as cp:
        await cp.put("t", [write(0, who="first")])
        await anyio.to_thread.run_sync(os.replace, other, file)
        with pytest.raises(CheckpointFileLost) as info:
            await cp.put("t", [write(1, who="first")])
        assert str(file) in str(info.value)
        assert "replaced" in str(info.value)


async def test_a_new_connection_does_not_adopt_a_replacement(tmp_path: Path) -> None:
    # Closed between runs, then the file is swapped: the object stays bound to
    # the file it first opened, so the next run is refused, not served another
    # history.
    file, other = tmp_path / "cp.db", tmp_path / "other.db"
    cp = SqliteCheckpointer(file)
    await cp.put("t", [write(0)])
    await cp.aclose()
    await anyio.to_thread.run_sync(shutil.copyfile, file, other)
    await anyio.to_thread.run_sync(os.replace, other, file)
    with pytest.raises(CheckpointFileLost, match="replaced"):
        await cp.read("t")
    await cp.aclose()


async def test_rewriting_the_file_in_place_is_not_a_replacement(tmp_path: Path) -> None:
    # Same inode: not this check's business (the records' checksums are).
    file = tmp_path / "cp.db"
    cp = SqliteCheckpointer(file)
    await cp.put("t", [write(0, n=1)])
    await cp.aclose()
    content = await anyio.Path(file).read_bytes()
    await anyio.Path(file).write_bytes(content)
    assert [r.data for r in await cp.read("t")] == [{"n": 1}]
    await cp.aclose()


async def test_the_store_reports_its_own_lost_file(tmp_path: Path) -> None:
    file = tmp_path / "store.db"
    async with SqliteStore(file) as store:
        await store.put(("ns",), "k", {"v": 1})
        await anyio.to_thread.run_sync(os.unlink, file)
        with pytest.raises(StoreFileLost) as info:
            await store.put(("ns",), "k", {"v": 2})
        assert str(file) in str(info.value)
        assert isinstance(info.value, StoreError)
        assert not isinstance(info.value, CheckpointError)


async def test_a_run_whose_file_is_deleted_midway_fails_with_the_clear_error(
    tmp_path: Path,
) -> None:
    file = tmp_path / "cp.db"

    async def delete_the_database() -> str:
        """Delete the checkpoint file."""
        await anyio.to_thread.run_sync(os.unlink, file)
        return "deleted"

    model = ScriptedModel(
        [AssistantMessage(tool_calls=[ToolCall(name="delete_the_database", args={})]), "done"]
    )
    async with SqliteCheckpointer(file) as cp:
        agent = create_deep_agent(model, tools=[delete_the_database], checkpointer=cp)
        with anyio.fail_after(10), pytest.raises(CheckpointError) as info:
            await agent.ainvoke("go", thread_id="t")
    # The journal says which thread could not be saved, and why: the lost file.
    assert "could not save thread 't'" in str(info.value)
    assert f"{file} was deleted while in use" in str(info.value)
    assert isinstance(info.value.__cause__, CheckpointFileLost)
    assert not file.exists()  # nothing quietly made a new, empty file to go on with


async def test_taking_a_lease_in_a_deleted_file_fails_naming_it(tmp_path: Path) -> None:
    file = tmp_path / "cp.db"
    async with SqliteCheckpointer(file) as cp:
        await cp.put("t", [write(0)])
        await anyio.to_thread.run_sync(os.unlink, file)
        with pytest.raises(CheckpointFileLost, match="deleted"):
            async with cp.lease("t"):
                pass  # pragma: no cover - the lease is refused
