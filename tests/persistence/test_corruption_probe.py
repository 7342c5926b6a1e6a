"""The byte-overwrite probe, small enough for CI: no read returns changed records silently.

``bench/corruption_probe.py`` runs 1,000 trials and prints the counts; here 200
per loop. Each trial copies a real checkpoint file, overwrites 1..8 random bytes
in its data pages, opens it and reads every thread: each read returns exactly
what was written or raises one of our errors (before checksums, about one
trial in a hundred served changed or missing records with no error).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench.corruption_probe import probe


# Both loops, as everywhere, but asyncio without its debug mode: it makes each of
# the 200 connections opened here about six times slower, and the rest of the
# suite runs the same code under it.
@pytest.fixture(params=[pytest.param("asyncio", id="asyncio"), pytest.param("trio", id="trio")])
def anyio_backend(request: pytest.FixtureRequest) -> Any:
    return request.param


async def test_random_byte_overwrites_never_change_what_is_read(tmp_path: Path) -> None:
    counts = await probe(tmp_path, trials=200, max_bytes=8, seed=34)
    assert counts.trials == 200
    assert counts.silent == 0, counts.examples
    assert counts.unclear == 0, counts.examples
    assert counts.listing_changed == 0
    # The probe probes: most trials hit a record, some only free space.
    assert counts.detected > 100
    assert counts.intact > 0
