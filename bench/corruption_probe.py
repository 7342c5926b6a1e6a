"""Byte-overwrite probe: random bytes changed in a real SQLite checkpoint file, then read.

Issue 34, finding 9: of 600 reads after random byte overwrites, 15 returned
changed data with no error. Each trial here copies a reference file, overwrites
1..N random bytes in its data pages (every page but the first, which holds the
file header and the schema), opens it with :class:`SqliteCheckpointer` and reads
every thread of the reference. A trial is

- **intact**: every read returned exactly the reference records (the bytes hit
  free space, or left a value as it was);
- **detected**: a read (or the open) raised a clear error: a
  :class:`~deepactors.errors.PersistenceError` (``CheckpointCorrupt`` for a
  damaged record or file), naming the file;
- **silent**: a read returned records that differ from the reference, with no
  error: the failure this probe hunts;
- **unclear**: an exception that is not one of ours (a raw ``sqlite3`` error, a
  ``ValueError``...): an error, but not a clear one.

``threads()`` (the list of threads, a summary read from the index, no record
data) is compared too and reported apart as ``listing changed``.

    python bench/corruption_probe.py [--trials 1000] [--max-bytes 8] [--seed 34]
        [--loop asyncio|trio]

Prints the counts; exits 1 if any trial was silent or unclear.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import anyio.to_thread

from deepactors.errors import PersistenceError
from deepactors.persistence import CheckpointRecord, CheckpointWrite, SqliteCheckpointer, ThreadInfo


def _message(i: int, size: int) -> dict[str, object]:
    """A realistic step: an assistant turn with a tool call, and the tool's result."""
    return {
        "messages": [
            {
                "role": "assistant",
                "content": f"Step {i}: reading the file next.",
                "tool_calls": [{"id": f"call_{i}", "name": "read_file", "args": {"path": "/a.py"}}],
            },
            {"role": "tool", "tool_call_id": f"call_{i}", "content": "x = 1\n" * (size // 6)},
        ],
        "step": i,
        "ok": i % 2 == 0,
        "score": i / 7,
    }


async def make_reference(file: Path) -> None:
    """Six threads: four of 15 records of ~1.5 KB, two of 30 with some of ~6 KB
    (bigger than a 4 KB page: their data spills into overflow pages)."""
    async with SqliteCheckpointer(file, clock=lambda: 1_700_000_000.25) as cp:
        for t in range(6):
            count = 15 if t < 4 else 30
            for i in range(count):
                size = 6000 if t >= 4 and i % 5 == 0 else 1500
                writes = [
                    CheckpointWrite(path="main", step=i, kind="update", data=_message(i, size))
                ]
                await cp.put(f"thread-{t}", writes)
    # The last connection's close checkpoints the log into the file and deletes it.
    assert not await anyio.Path(f"{file}-wal").exists()


async def snapshot(file: Path) -> tuple[list[ThreadInfo], dict[str, list[CheckpointRecord]]]:
    async with SqliteCheckpointer(file) as cp:
        listing = await cp.threads()
        return listing, {info.thread_id: await cp.read(info.thread_id) for info in listing}


@dataclass
class Counts:
    """How the trials ended (see the module docstring)."""

    trials: int = 0
    intact: int = 0
    detected: int = 0
    silent: int = 0
    unclear: int = 0
    listing_changed: int = 0
    reads: int = 0
    silent_reads: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    examples: list[str] = field(default_factory=list)

    def line(self) -> str:
        return (
            f"trials {self.trials}: intact {self.intact}, detected {self.detected},"
            f" silent {self.silent}, unclear {self.unclear}"
            f" (reads {self.reads}, silent reads {self.silent_reads};"
            f" listing changed without error {self.listing_changed})"
        )


def overwrite(file: Path, rng: random.Random, max_bytes: int) -> list[int]:
    """Overwrite 1..max_bytes random bytes outside page 1 with different values."""
    data = bytearray(file.read_bytes())
    page_size = int.from_bytes(data[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    where = [rng.randrange(page_size, len(data)) for _ in range(rng.randint(1, max_bytes))]
    for at in where:
        data[at] = (data[at] + rng.randrange(1, 256)) % 256
    file.write_bytes(bytes(data))
    return where


def describe(want: list[CheckpointRecord], got: list[CheckpointRecord]) -> str:
    """Where two readings of a thread differ (for the report, not the data itself)."""
    if len(want) != len(got):
        return f"{want[0].thread_id}: {len(got)} records instead of {len(want)}"
    for a, b in zip(want, got, strict=True):
        if a != b:
            fields = [
                f
                for f in ("seq", "path", "step", "kind", "data", "created_at")
                if getattr(a, f) != getattr(b, f)
            ]
            return f"{a.thread_id} seq {a.seq}: {', '.join(fields)} differ"
    return "?"


async def trial(
    file: Path,
    listing: list[ThreadInfo],
    reference: dict[str, list[CheckpointRecord]],
    counts: Counts,
) -> None:
    changed = False
    try:
        with anyio.fail_after(30):
            async with SqliteCheckpointer(file) as cp:
                for thread_id, records in reference.items():
                    counts.reads += 1
                    got = await cp.read(thread_id)
                    if got != records:
                        counts.silent_reads += 1
                        changed = True
                        if len(counts.examples) < 5:
                            counts.examples.append(f"silent read: {describe(records, got)}")
                got_listing = await cp.threads()
                if got_listing != listing:
                    counts.listing_changed += 1
                    if len(counts.examples) < 5:
                        changed_rows = [
                            f"{w} -> {g}"
                            for w, g in zip(listing, got_listing, strict=False)
                            if w != g
                        ]
                        counts.examples.append(f"listing changed: {changed_rows or 'length'}")
    except PersistenceError as exc:
        name = type(exc).__name__
        counts.errors[name] = counts.errors.get(name, 0) + 1
        outcome = "detected"
    except Exception as exc:
        if len(counts.examples) < 5:
            counts.examples.append(f"unclear: {type(exc).__name__}: {exc}")
        outcome = "unclear"
    else:
        outcome = "intact"
    # A read that returned changed data makes the trial silent, whatever a
    # later read raised: that caller was served the wrong records.
    if changed:
        outcome = "silent"
    setattr(counts, outcome, getattr(counts, outcome) + 1)


async def probe(folder: Path, *, trials: int, max_bytes: int, seed: int) -> Counts:
    """Run ``trials`` trials in ``folder`` and count how they ended."""
    reference_file = folder / "reference.db"
    await make_reference(reference_file)
    listing, reference = await snapshot(reference_file)
    rng = random.Random(seed)
    counts = Counts()
    for n in range(trials):
        file = folder / f"trial{n}.db"
        await anyio.to_thread.run_sync(shutil.copyfile, reference_file, file)
        where = await anyio.to_thread.run_sync(overwrite, file, rng, max_bytes)
        silent_before = counts.silent
        await trial(file, listing, reference, counts)
        counts.trials += 1
        if counts.silent > silent_before and len(counts.examples) < 5:
            counts.examples.append(f"silent: trial {n}, bytes at {where}")
        async for leftover in anyio.Path(folder).glob(f"trial{n}.db*"):
            await leftover.unlink()
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--max-bytes", type=int, default=8)
    parser.add_argument("--seed", type=int, default=34)
    parser.add_argument("--loop", choices=["asyncio", "trio"], default="asyncio")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        counts = anyio.run(
            lambda: probe(Path(tmp), trials=args.trials, max_bytes=args.max_bytes, seed=args.seed),
            backend=args.loop,
        )
        took = time.perf_counter() - started
    print(f"byte-overwrite probe ({args.loop}, 1..{args.max_bytes} bytes, seed {args.seed})")
    print(counts.line())
    print("errors: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.errors.items())))
    for example in counts.examples:
        print("  " + example)
    print(f"{took:.1f} s")
    sys.exit(1 if counts.silent or counts.unclear else 0)


if __name__ == "__main__":
    main()
