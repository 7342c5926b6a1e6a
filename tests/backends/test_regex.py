"""Grep patterns and globs on RE2: Python's meaning, linear time, named refusals."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deepactors.backends._glob import compile_glob, strip_mount
from deepactors.backends._regex import MAX_PATTERN_CHARS, compile_pattern
from deepactors.backends._text import split_lines
from deepactors.errors import InvalidPath, InvalidPattern
from tests.guards import returns_within


def python_lines(pattern: str, text: str) -> list[int]:
    """The line numbers Python's re finds, searching line by line."""
    regex = re.compile(pattern)
    return [n for n, line in enumerate(split_lines(text), 1) if regex.search(line)]


def re2_lines(pattern: str, text: str) -> list[int]:
    return [n for n, _ in compile_pattern(pattern).search_text(text)]


# -- same answers as Python's re -------------------------------------------------

ATOMS = [
    "a", "b", "é", " ", "-", r"\.", ".", r"\d", r"\D", r"\w", r"\W", r"\s", r"\S",
    "[ab]", "[^a]", r"[\w-]", "[a-c]", r"[\d\s]", r"[^\d]", r"\x61", r"\u00e9", r"\141",
    r"\N{LATIN SMALL LETTER E WITH ACUTE}", "^", "$", r"\A", r"\Z",
]  # fmt: skip
QUANTIFIERS = ["", "", "*", "+", "?", "{1,2}", "{2}", "*?", "+?", "{,2}"]


def _pattern() -> st.SearchStrategy[str]:
    atom = st.sampled_from(ATOMS)
    piece = st.builds(lambda a, q: a + q if a not in ("^", "$", r"\A", r"\Z") else a, atom,
                      st.sampled_from(QUANTIFIERS))  # fmt: skip
    sequence = st.lists(piece, min_size=1, max_size=5).map("".join)

    def extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.one_of(
            st.builds(lambda x, q: f"({x}){q}", inner, st.sampled_from(QUANTIFIERS)),
            st.builds(lambda x: f"(?:{x})", inner),
            st.builds(lambda x, y: f"{x}|{y}", inner, inner),
            st.builds(lambda x, y: x + y, inner, inner),
        )

    body = st.recursive(sequence, extend, max_leaves=6)
    return st.builds(lambda flag, b: flag + b, st.sampled_from(["", "", "(?i)", "(?s)"]), body)


TEXT = st.lists(st.text(alphabet="aAbé É٣1_-. \t\u00a0\r", max_size=12), max_size=6).map("\n".join)


@settings(max_examples=300, deadline=None)
@given(pattern=_pattern(), text=TEXT)
def test_grep_finds_the_lines_pythons_re_finds(pattern: str, text: str) -> None:
    assert re2_lines(pattern, text) == python_lines(pattern, text)


@pytest.mark.parametrize(
    ("pattern", "line"),
    [
        (r"\w+", "naïve"),
        (r"\d", "٤"),  # an Arabic-Indic digit is \d in Python
        (r"\s", "\u00a0"),
        (r"\s", "\x1c"),  # str.isspace(), not Unicode White_Space
        (r"^\W$", "€"),
        (r"[\W]", "€"),
        (r"(?i)É", "é"),
        (r"\0", "\0"),
        (r"\x{e9}", "é"),
        (r"a{,2}b", "aab"),
        (r"(?#a comment)x", "x"),
        (r"\Qa.b\E", "a.b"),
        (r"\p{Greek}", "λ"),
        (r"[[:digit:]]", "7"),
    ],
)
def test_pythons_meaning_is_kept(pattern: str, line: str) -> None:
    assert re2_lines(pattern, line) == [1]


def test_word_boundaries_are_ascii_only() -> None:
    # The one documented difference: RE2 has no Unicode \b.
    assert re2_lines(r"\bcafé\b", "un café noir") == []
    assert re2_lines(r"\bcafe\b", "un cafe noir") == [1]


def test_a_text_is_searched_across_windows_like_line_by_line() -> None:
    lines = [("x" * 1000 if i % 7 else "") + ("hit" if i % 13 == 0 else "") for i in range(300)]
    text = "\r\n".join(lines) + "\r\n"  # CRLF, a final newline, empty lines, 300 KB
    for pattern in ["hit$", "^$", "^x", r"^hit\Z", "t$|^$"]:
        assert re2_lines(pattern, text) == python_lines(pattern, text), pattern


def test_no_match_crosses_a_line() -> None:
    text = "a\nb\n"
    for pattern in [r"a\sb", r"a[^x]b", "(?s)a.b", r"a\nb", r"a\Wb", r"a[\S\s]b"]:
        assert re2_lines(pattern, text) == [], pattern


# -- refusals name the feature -------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "feature"),
    [
        (r"(a)\1", "backreferences"),
        (r"(?P<x>a)(?P=x)", "backreferences to named groups"),
        ("a(?=b)", "lookahead"),
        ("a(?!b)", "lookahead"),
        ("(?<=a)b", "lookbehind"),
        ("(?<!a)b", "lookbehind"),
        ("(?>ab)", "atomic groups"),
        ("a*+", "possessive quantifiers"),
        ("a{2}+", "possessive quantifiers"),
        ("(a)?(?(1)b|c)", "conditional groups"),
        ("(?x)a b", "verbose mode"),
        ("(?a)\\w", "ASCII-only mode"),
        (r"[^\W\d]", "negated class"),
        (r"\C", "single byte"),
        ("(unclosed", "missing )"),
        ("a{1001}", "above 1000"),
        (r"\w{1000}", "too large"),
        (r"\q", "bad escape"),
        ("[a", "unterminated character set"),
    ],
)
def test_unsupported_and_malformed_patterns_are_named(pattern: str, feature: str) -> None:
    with pytest.raises(InvalidPattern, match=re.escape(feature)) as caught:
        compile_pattern(pattern)
    assert str(caught.value).startswith(f"invalid regular expression {pattern!r}")


def test_an_overlong_pattern_is_refused_not_truncated() -> None:
    with pytest.raises(InvalidPattern, match="at most 10,000"):
        compile_pattern("a" * (MAX_PATTERN_CHARS + 1))


@pytest.mark.parametrize(
    "pattern", ["(a+)+$", "(a|a)+$", "(a*)*b", "(x+x+)+y", r"(\w+\s?)+$", "(.*a){20}$"]
)
def test_catastrophic_patterns_take_linear_time(pattern: str) -> None:
    # Python's re needs astronomically long for any of these on this line.
    line = "a" * 100_000 + "!"
    assert returns_within(30, re2_lines, pattern, line) == []


# -- globs ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        ("*.py", "a.py", True),
        ("*.py", ".a.py", False),  # a wildcard never matches a leading dot
        (".*.py", ".a.py", True),
        ("?a", ".a", False),
        ("[.]a", ".a", False),  # nor does a class
        ("a*", "a.b.c", True),  # dots elsewhere are plain characters
        ("**/*.py", "x/.git/y.py", False),
        ("**/*.py", "x/y/z.py", True),
        (".git/**", ".git/a/b", True),
        ("[!a]", "/", False),
        ("a[--0]b", "a/b", False),  # a range over "/" does not cross folders
        ("a[--0]b", "a.b", True),
        ("[a-c]x", "bx", True),
        ("\\*", "\\x", True),  # a backslash is a plain character in a glob
        ("a(b)+", "a(b)+", True),  # regex syntax is literal
        ("[ab", "[ab", True),  # an unclosed class is literal, as in fnmatch
        ("**/**/**/x", "x", True),
    ],
)
def test_glob_semantics(pattern: str, path: str, matches: bool) -> None:
    assert compile_glob(pattern).matches(path) is matches


def test_a_catastrophic_glob_takes_linear_time() -> None:
    # A backtracking matcher never ends on these.
    assert not returns_within(30, compile_glob("*a" * 30 + "*b").matches, "a" * 5000)
    assert not returns_within(30, compile_glob("**/" * 50 + "b").matches, "a/" * 200 + "c")


def test_glob_refusals() -> None:
    for bad in ["../x", "a/../b", "a\0b", "[z-a]", "x" * 10_001]:
        with pytest.raises(InvalidPath):
            compile_glob(bad)


def test_strip_mount_is_linear_in_a_long_pattern() -> None:
    pattern = "/".join(["**", "*"] * 1500) + "/*.md"
    residuals = returns_within(30, strip_mount, pattern, ("a", "b", "c"))  # it used to recurse
    assert residuals
    assert strip_mount("**/*.md", ("memories",)) == ["**/*.md"]
    assert strip_mount("memories/*.md", ("memories",)) == ["*.md"]
    assert strip_mount("src/*", ("memories",)) == []
    assert strip_mount("**/**/x/*.md", (".hidden", "x")) == []
