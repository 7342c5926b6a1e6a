"""Python's regex dialect, translated for RE2 and for ripgrep's default engine.

Both engines match in linear time and neither backtracks, so some of Python's
features have no translation: backreferences, lookahead and lookbehind, atomic
groups, possessive quantifiers, conditionals, verbose mode ``(?x)`` and ``(?a)``
are refused with an :class:`~deepactors.errors.InvalidPattern` naming the
feature. The rest keeps its Python meaning: ``\\d``, ``\\w`` and ``\\s`` are
Unicode-aware as in :mod:`re` (RE2's own are ASCII), ``\\A``/``\\Z`` are the
ends of the line, octal, ``\\uXXXX`` and ``\\N{NAME}`` escapes become ``\\x{...}``,
``(?#...)`` comments are dropped. ``\\b`` and ``\\B`` are ASCII-only (RE2 has no
Unicode word boundary); ripgrep is given ``(?-u:\\b)`` so that it agrees.

Characters are written so that both engines read them alike: control
characters (NUL, newlines) as ``\\x{...}`` (a ripgrep pattern is a command-line
argument), and only real metacharacters escaped (ripgrep refuses ``\\%``).
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

from deepactors.errors import InvalidPattern

__all__ = ["MAX_PATTERN_CHARS", "translate"]

MAX_PATTERN_CHARS = 10_000
"""Longest grep pattern accepted (longer ones are refused, not truncated)."""


# Python's \s for str patterns: str.isspace() (note \x1c-\x1f, which Unicode's
# White_Space leaves out).
_SPACE = (
    r"\t-\r\x1c-\x20\x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}"
)
# Python's \w: str.isalnum() or "_" (letters and numbers, exactly, for the
# characters of Python's Unicode version).
_WORD = r"\p{L}\p{N}_"
_DIGIT = r"\p{Nd}"

# Outside a class these are regex syntax, and escaped they mean themselves in
# both RE2 and ripgrep's engine. Any other escaped punctuation is a plain
# character (ripgrep refuses escapes like "\%").
_META = set(r"\.+*?()|[]{}^$#&-~")
_CLASS_META = set("\\]^-[&~")
_FLAGS = set("aiLmsuxU")


def _unsupported(pattern: str, feature: str, hint: str = "") -> InvalidPattern:
    return InvalidPattern(
        f"invalid regular expression {pattern!r}: grep does not support {feature} (it uses "
        f"RE2, a regex engine without backtracking, so that no pattern can stall it)"
        + (f"; {hint}" if hint else "")
    )


def _hex(code: int) -> str:
    return f"\\x{{{code:x}}}"


def _literal(ch: str, *, in_class: bool) -> str:
    """A character as a pattern that both engines read as that character."""
    code = ord(ch)
    if code < 0x20 or code == 0x7F or 0xD800 <= code <= 0xDFFF:
        return _hex(code)  # also keeps NUL and newlines out of ripgrep's argv
    if ch in (_CLASS_META if in_class else _META):
        return "\\" + ch
    return ch


@dataclass(slots=True)
class _Translator:
    """One pass over a Python-dialect pattern, writing the RE2 and ripgrep forms."""

    src: str
    i: int = 0

    def error(self, message: str) -> InvalidPattern:
        return InvalidPattern(
            f"invalid regular expression {self.src!r}: {message} at position {self.i}"
        )

    def peek(self, offset: int = 0) -> str:
        j = self.i + offset
        return self.src[j] if j < len(self.src) else ""

    def run(self) -> tuple[str, str]:
        out: list[tuple[str, str]] = []
        src = self.src
        while self.i < len(src):
            ch = src[self.i]
            if ch == "\\":
                out.append(self.escape(in_class=False))
            elif ch == "[":
                out.append(self.char_class())
            elif ch == "(":
                out.append(self.group())
            elif ch in "*+?":
                self.i += 1
                if ch != "?" or self.i < 2 or src[self.i - 2] not in "*+?}":
                    self.check_possessive()
                out.append((ch, ch))
            elif ch == "{":
                out.append(self.brace())
            else:
                self.i += 1
                lit = ch if ch in "^$.|)" else _literal(ch, in_class=False)
                out.append((lit, lit))
        return "".join(a for a, _ in out), "".join(b for _, b in out)

    def check_possessive(self) -> None:
        if self.peek() == "+":
            raise _unsupported(self.src, "possessive quantifiers (*+, ++, ?+, {n}+)")

    def brace(self) -> tuple[str, str]:
        """``{n}``, ``{n,}``, ``{,m}``, ``{n,m}``, ``{,}`` quantifiers; else a literal ``{``."""
        end = self.src.find("}", self.i)
        body = self.src[self.i + 1 : end] if end > 0 else ""
        low, comma, high = body.partition(",")
        if not body or not set(low + high) <= set("0123456789"):
            self.i += 1
            return "\\{", "\\{"
        if len(low) > 4 or len(high) > 4 or max(int(low or 0), int(high or 0)) > 1000:
            raise self.error("repetition counts above 1000 are not supported")
        self.i = end + 1
        self.check_possessive()
        text = "{" + (low or "0") + comma + high + "}"
        return text, text

    def group(self) -> tuple[str, str]:
        src = self.src
        if self.peek(1) != "?":
            self.i += 1
            return "(", "("
        rest = src[self.i + 2 : self.i + 4]
        if rest.startswith(("=", "!")):
            raise _unsupported(src, "lookahead assertions (?=...) and (?!...)")
        if rest in ("<=", "<!"):
            raise _unsupported(src, "lookbehind assertions (?<=...) and (?<!...)")
        if rest.startswith(">"):
            raise _unsupported(src, "atomic groups (?>...)")
        if rest.startswith("("):
            raise _unsupported(src, "conditional groups (?(1)...|...)")
        if rest.startswith("P="):
            raise _unsupported(src, "backreferences to named groups (?P=name)")
        if rest.startswith("#"):
            end = src.find(")", self.i)
            if end < 0:
                raise self.error("missing ), unterminated comment")
            self.i = end + 1
            return "", ""
        if rest.startswith(("P<", "<", ":")):
            head = "(?:" if rest.startswith(":") else "(?P<"
            self.i += len(head) if rest.startswith(("P<", ":")) else 3
            return head, head
        return self.flags()

    def flags(self) -> tuple[str, str]:
        """``(?flags)``, ``(?flags:...)``, ``(?on-off:...)``."""
        src = self.src
        j = self.i + 2
        on: list[str] = []
        off: list[str] = []
        target = on
        while j < len(src) and (src[j] in _FLAGS or (src[j] == "-" and target is on)):
            if src[j] == "-":
                target = off
            else:
                target.append(src[j])
            j += 1
        if j >= len(src) or src[j] not in ":)":
            raise self.error("unknown extension (?" + src[self.i + 2 : j + 1])
        for flag, name in (("x", "verbose mode (?x)"), ("a", "ASCII-only mode (?a)")):
            if flag in on or flag in off:
                raise _unsupported(src, name)
        if "L" in on or "L" in off:
            raise self.error("(?L) is only for bytes patterns")
        # Each line is a text of its own: "m" changes nothing; "u" is the default.
        keep_on = "".join(f for f in on if f in "isU")
        keep_off = "".join(f for f in off if f in "isU")
        self.i = j + 1
        if not keep_on and not keep_off:
            text = "(?:" if src[j] == ":" else ""
        else:
            text = "(?" + keep_on + ("-" + keep_off if keep_off else "") + src[j]
        return text, text

    def char_class(self) -> tuple[str, str]:
        src = self.src
        start = self.i
        self.i += 1
        negated = self.peek() == "^"
        if negated:
            self.i += 1
        body: list[tuple[str, str]] = []
        outside: list[str] = []  # \W and \S in a class: alternatives beside it
        first = True
        while True:
            if self.i >= len(src):
                self.i = start
                raise self.error("unterminated character set")
            ch = src[self.i]
            if ch == "]" and not first:
                self.i += 1
                break
            first = False
            if ch == "[" and self.peek(1) == ":":
                end = src.find(":]", self.i + 2)
                if end > 0 and src[self.i + 2 : end].lstrip("^").isalpha():
                    posix = src[self.i : end + 2]
                    body.append((posix, posix))
                    self.i = end + 2
                    continue
            if ch == "\\":
                if self.peek(1) in ("W", "S"):
                    if negated:
                        raise _unsupported(
                            src,
                            "\\W and \\S inside a negated class [^...]",
                            "write the positive class instead ([^\\W\\d_] is \\p{L})",
                        )
                    which = _WORD if self.peek(1) == "W" else _SPACE
                    outside.append(f"[^{which}]")
                    self.i += 2
                    continue
                piece = self.escape(in_class=True)
                multi = piece[0] in (_WORD, _SPACE) or piece[0].startswith(("\\p", "\\P"))
                if multi and self.peek() == "-" and self.peek(1) not in ("]", ""):
                    raise self.error("bad character range")
                body.append(piece)
                continue
            self.i += 1
            lit = "-" if ch == "-" else _literal(ch, in_class=True)
            body.append((lit, lit))
        inner_a = "".join(a for a, _ in body)
        inner_b = "".join(b for _, b in body)
        if not outside:
            caret = "^" if negated else ""
            return f"[{caret}{inner_a}]", f"[{caret}{inner_b}]"
        alternatives = ([f"[{inner_a}]"] if body else []) + outside
        text = "(?:" + "|".join(alternatives) + ")"
        return text, text

    def escape(self, *, in_class: bool) -> tuple[str, str]:
        """One backslash escape; returns its RE2 and ripgrep forms."""
        src = self.src
        start = self.i
        ch = self.peek(1)
        self.i += 2
        if ch == "":
            self.i -= 1
            raise self.error("a pattern cannot end with a lone backslash")
        classes = {
            "d": _DIGIT,
            "D": r"\P{Nd}",
            "w": _WORD if in_class else f"[{_WORD}]",
            "W": f"[^{_WORD}]",
            "s": _SPACE if in_class else f"[{_SPACE}]",
            "S": f"[^{_SPACE}]",
        }
        if ch in classes:
            return classes[ch], classes[ch]
        if ch in "bB" and not in_class:
            return "\\" + ch, f"(?-u:\\{ch})"
        if ch == "b":  # inside a class: a backspace, as in Python
            return _hex(8), _hex(8)
        if ch == "A" and not in_class:
            return "^", "^"
        if ch in "Zz" and not in_class:
            return "$", "$"
        if ch.isdigit():
            return self.number(ch, in_class=in_class)
        if ch in "xuU":
            code = self.hex_escape(ch)
            return _hex(code), _hex(code)
        if ch == "N":
            code = self.named_escape()
            return _hex(code), _hex(code)
        if ch in "pP":
            if self.peek() == "{":
                end = src.find("}", self.i)
                if end < 0:
                    raise self.error("missing } in \\p{...}")
                self.i = end + 1
            else:
                self.i += 1
            text = src[start : self.i]
            return text, text
        if ch == "Q":
            text = self.quoted(in_class=in_class)
            return text, text
        if ch == "C":
            raise _unsupported(src, "\\C (a single byte) escapes")
        if ch in "afnrtv":
            code = {"a": 7, "f": 12, "n": 10, "r": 13, "t": 9, "v": 11}[ch]
            return _hex(code), _hex(code)
        if ch.isascii() and ch.isalpha():
            raise self.error(f"bad escape \\{ch}")
        lit = _literal(ch, in_class=in_class)
        return lit, lit

    def hex_escape(self, ch: str) -> int:
        r"""The code point of a hex escape: ``\xhh``, ``\x{h...}``, ``\uhhhh``, ``\Uhhhhhhhh``."""
        src = self.src
        size = {"x": 2, "u": 4, "U": 8}[ch]
        if ch == "x" and self.peek() == "{":
            end = src.find("}", self.i)
            digits = src[self.i + 1 : end] if end > 0 else ""
            self.i = end + 1 if end > 0 else self.i
        else:
            digits = src[self.i : self.i + size]
            self.i += size
            if len(digits) != size:
                digits = ""
        try:
            code = int(digits, 16)
            if code > 0x10FFFF:
                raise ValueError(code)
        except ValueError:
            raise self.error(f"bad escape \\{ch}{digits}") from None
        return code

    def named_escape(self) -> int:
        r"""The code point of ``\N{NAME}`` (a Unicode character name)."""
        src = self.src
        end = src.find("}", self.i)
        if self.peek() != "{" or end < 0:
            raise self.error("bad escape \\N (use \\N{NAME})")
        name = src[self.i + 1 : end]
        self.i = end + 1
        try:
            return ord(unicodedata.lookup(name))
        except KeyError:
            raise self.error(f"undefined character name {name!r}") from None

    def quoted(self, *, in_class: bool) -> str:
        r"""``\Q...\E``: the text between, every character a literal (to the end without ``\E``)."""
        src = self.src
        end = src.find("\\E", self.i)
        literal = src[self.i : end if end >= 0 else len(src)]
        self.i = end + 2 if end >= 0 else len(src)
        return "".join(_literal(c, in_class=in_class) for c in literal)

    def number(self, first: str, *, in_class: bool) -> tuple[str, str]:
        r"""``\0``, ``\012``, ``\123`` are octal; ``\1``..``\99`` are backreferences."""
        src = self.src
        digits = first
        octal = set("01234567")
        if first == "0" or in_class:
            while len(digits) < 3 and self.peek() in octal:
                digits += self.peek()
                self.i += 1
            if not set(digits) <= octal:
                raise self.error(f"bad escape \\{digits}")
        else:
            two = self.peek() if self.peek().isdigit() else ""
            three = self.peek(1) if two and self.peek(1) in octal else ""
            if first in octal and two in octal and three:
                digits += two + three
                self.i += 2
            else:
                raise _unsupported(
                    src, "backreferences (\\1, \\2, ...)", "match the text itself instead"
                )
        code = int(digits, 8)
        if code > 0o377:
            raise self.error(f"octal escape value \\{digits} outside of range 0-0o377")
        return _hex(code), _hex(code)


def translate(pattern: str) -> tuple[str, str]:
    """A Python-dialect pattern as (RE2 pattern, ripgrep pattern).

    Raises:
        InvalidPattern: The pattern is malformed, too long, or uses a feature RE2
            does not have (the message names it).
    """
    if len(pattern) > MAX_PATTERN_CHARS:
        raise InvalidPattern(
            f"the pattern is {len(pattern):,} characters long; at most "
            f"{MAX_PATTERN_CHARS:,} are accepted"
        )
    return _Translator(pattern).run()
