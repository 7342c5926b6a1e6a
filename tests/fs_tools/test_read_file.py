"""read_file: numbered pages, footers, and the notices for the empty cases."""

from __future__ import annotations

import re

import pytest

from deepactors.middleware._filesystem import FilesystemMiddleware

from .conftest import Env, call, run_turns

pytestmark = pytest.mark.anyio

LINES_250 = "".join(f"line {n}\n" for n in range(1, 251))


def numbered(text: str) -> list[tuple[int, str]]:
    """The (number, line) rows of a read_file result, footer left out."""
    rows = []
    for row in text.split("\n"):
        m = re.fullmatch(r" *(\d+)\t(.*)", row)
        if m:
            rows.append((int(m.group(1)), m.group(2)))
    return rows


async def test_first_page_shows_default_limit_and_next_offset(env: Env) -> None:
    env.seed({"/big.txt": LINES_250})
    out = await run_turns(env, [call("read_file", file_path="/big.txt")])
    text = out.ok(0)
    rows = numbered(text)
    assert rows[0] == (1, "line 1")
    assert rows[-1] == (100, "line 100")
    assert len(rows) == 100
    assert text.startswith("     1\tline 1\n     2\tline 2\n")
    assert "Showing lines 1-100 of 250. Call read_file with offset=100 to continue." in text


async def test_middle_page_numbers_lines_from_the_offset(env: Env) -> None:
    env.seed({"/big.txt": LINES_250})
    out = await run_turns(env, [call("read_file", file_path="/big.txt", offset=100, limit=50)])
    text = out.ok(0)
    assert numbered(text) == [(n, f"line {n}") for n in range(101, 151)]
    assert "Showing lines 101-150 of 250. Call read_file with offset=150" in text


async def test_last_page_says_end_of_file(env: Env) -> None:
    env.seed({"/big.txt": LINES_250})
    out = await run_turns(env, [call("read_file", file_path="/big.txt", offset=240)])
    text = out.ok(0)
    assert numbered(text)[-1] == (250, "line 250")
    assert "Lines 241-250 of 250: end of file." in text
    assert "offset=" not in text


async def test_whole_small_file_has_no_footer(env: Env) -> None:
    env.seed({"/s.txt": "a\nb\n"})
    out = await run_turns(env, [call("read_file", file_path="/s.txt")])
    assert out.ok(0) == "     1\ta\n     2\tb"


async def test_offset_past_the_end_is_an_error_naming_the_length(env: Env) -> None:
    env.seed({"/big.txt": LINES_250})
    out = await run_turns(env, [call("read_file", file_path="/big.txt", offset=250)])
    assert out.error(0) == (
        "offset=250 is past the end of /big.txt, which has 250 lines; use an offset from 0 to 249"
    )


async def test_limit_zero_shows_no_lines_and_says_so(env: Env) -> None:
    env.seed({"/big.txt": LINES_250})
    out = await run_turns(env, [call("read_file", file_path="/big.txt", limit=0)])
    assert out.ok(0) == "No lines shown (limit=0). /big.txt has 250 lines."


async def test_empty_file_has_its_own_notice(env: Env) -> None:
    env.seed({"/empty.txt": ""})
    out = await run_turns(env, [call("read_file", file_path="/empty.txt")])
    assert out.ok(0) == "/empty.txt exists but is empty (0 lines)."


async def test_long_line_is_clipped_with_a_note(env: Env) -> None:
    env.seed({"/long.txt": "short\n" + "x" * 5000 + "\nafter\n"})
    out = await run_turns(env, [call("read_file", file_path="/long.txt")])
    text = out.ok(0)
    rows = numbered(text)
    assert rows[0] == (1, "short")
    assert rows[1][1].startswith("x" * 2000 + " [... clipped, the line has 5,000 characters]")
    assert "x" * 2001 not in text
    assert rows[2] == (3, "after")
    assert "Line(s) 2 are longer than 2,000 characters and were clipped" in text


async def test_negative_offset_is_an_error(env: Env) -> None:
    env.seed({"/s.txt": "a\n"})
    out = await run_turns(env, [call("read_file", file_path="/s.txt", offset=-1)])
    assert out.error(0) == "offset and limit must be 0 or more"


async def test_missing_file_is_an_error_naming_the_path(env: Env) -> None:
    out = await run_turns(env, [call("read_file", file_path="/nope.txt")])
    assert "/nope.txt" in out.error(0)


async def test_folder_is_an_error(env: Env) -> None:
    env.seed({"/dir/a.txt": "a\n"})
    out = await run_turns(env, [call("read_file", file_path="/dir")])
    assert out.error(0) == "/dir is a folder"


async def test_page_stops_at_the_character_cap_and_gives_the_next_offset(env: Env) -> None:
    env.seed({"/wide.txt": "".join(f"{n:04d}" + "y" * 95 + "\n" for n in range(1, 101))})
    mw = FilesystemMiddleware(large_result_chars=1000)
    out = await run_turns(env, [call("read_file", file_path="/wide.txt")], middleware=mw)
    text = out.ok(0)
    rows = numbered(text)
    # Each row is 6 + 1 + 99 characters and a newline; 200 of the 1,000 are kept
    # for the footer, so 7 rows fit.
    assert [n for n, _ in rows] == list(range(1, 8))
    assert "Call read_file with offset=7 to continue." in text
    assert len(text) <= 1000


async def test_crlf_lines_are_shown_without_the_carriage_return(env: Env) -> None:
    env.seed({"/dos.txt": "one\r\ntwo\r\n"})
    out = await run_turns(env, [call("read_file", file_path="/dos.txt")])
    assert out.ok(0) == "     1\tone\n     2\ttwo"
