"""The order CI's xdist workers take the suite in (tests/scheduling.py)."""

from __future__ import annotations

from pathlib import Path

from tests.scheduling import ONE_UNIT, SCOPE_SECONDS, load_weights, unit_of

ROOT = Path(__file__).parent.parent


def test_a_package_in_one_unit_is_one_unit_and_any_other_file_its_own() -> None:
    assert ONE_UNIT == ("tests/placement/",)
    assert unit_of("tests/placement/test_task.py::test_x[asyncio]") == "tests/placement/"
    assert unit_of("tests/placement/test_caps.py::test_y[trio-1]") == "tests/placement/"
    # A sibling whose name starts the same is not in the package.
    assert unit_of("tests/placement_nodes/test_nodes.py::test_z") == (
        "tests/placement_nodes/test_nodes.py"
    )
    assert unit_of("tests/server/test_crons.py::test_a[b::c]") == "tests/server/test_crons.py"


def test_every_unit_the_table_weighs_is_still_there() -> None:
    # A file renamed or moved would otherwise fall back to its test count and
    # be handed out late again.
    weights = load_weights()
    assert weights, f"{SCOPE_SECONDS} is empty"
    for unit in weights:
        assert (ROOT / unit).exists(), f"{SCOPE_SECONDS.name} names {unit}, which is gone"
        assert unit.endswith("/") == (unit in ONE_UNIT), unit


def test_no_table_weighs_nothing(tmp_path: Path) -> None:
    assert load_weights(tmp_path / "missing.json") == {}
