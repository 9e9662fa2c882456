"""RE2J's regular expression syntax: a parser to a syntax tree, with RE2J's rules and errors.

Kafka 4.0 compiles SubscribedTopicRegex with Google's RE2J (``com.google.re2j.Pattern``); this
module accepts exactly what RE2J's parser accepts, with its limits (repeat counts up to 1000) and
its error descriptions, and turns it into a small tree (character sets, concatenation,
alternation, repetition, empty-width assertions) that ``topic_regex`` runs as an automaton.
Case folding under ``(?i)`` is applied to the character sets here, so the tree has no flags.
``to_python`` writes the tree as an equivalent Python ``re`` pattern (used for display only:
Python's engine backtracks).

RE2J's syntax, as parsed here: literals and escapes (``\\x41``, ``\\x{10FFFF}``, octal ``\\101``,
``\\a\\f\\t\\n\\r\\v``, any escaped punctuation), ``\\Q...\\E``, ``.``, classes with ranges,
negation, ``[:alpha:]`` POSIX classes and ``\\d \\s \\w`` (ASCII, as RE2), ``\\pL``, ``\\p{Greek}``,
``\\PN``, ``\\p{^Lu}``, groups ``(...)``, ``(?:...)``, ``(?P<name>...)``, ``(?<name>...)``, flags
``(?imsU)`` / ``(?i-s:...)`` anywhere (in effect to the end of the group), ``^ $ \\A \\z \\b \\B``,
``* + ? {n} {n,} {n,m}`` (counts <= 1000) with lazy ``?``. Rejected, as RE2J rejects them:
backreferences, lookaround, atomic groups, possessive or stacked quantifiers (``a*+``, ``a**``),
conditionals, comments, ``\\Z``, ``\\C``, unknown escapes.

Unicode classes (``\\pL``, ``\\p{Greek}``) hold only their ASCII members and ``(?i)`` folds
non-ASCII characters with Python's case mapping; both are exact on legal topic names (ASCII).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["ERR_NESTING", "ERR_TOO_LARGE", "MAX_CP", "Alternate", "Assertion", "CharSet", "Concat",
           "InvalidTopicRegex", "Repeat", "parse_re2", "to_python"]


class InvalidTopicRegex(ValueError):
    """The pattern is not a valid RE2J regular expression (Kafka's INVALID_REGULAR_EXPRESSION).

    ``description`` is RE2J's description (``missing closing )``), ``str(exc)`` RE2J's full
    message, ``error parsing regexp: <description>: `<fragment>```.
    """

    def __init__(self, description: str, fragment: str = "") -> None:
        super().__init__(f"error parsing regexp: {description}: `{fragment}`")
        self.description = description
        self.fragment = fragment


# RE2J's error descriptions (com.google.re2j.Parser).
_ERR_INVALID_CHAR_RANGE = "invalid character class range"
_ERR_INVALID_ESCAPE = "invalid escape sequence"
_ERR_INVALID_NAMED_CAPTURE = "invalid named capture"
_ERR_INVALID_PERL_OP = "invalid or unsupported Perl syntax"
_ERR_INVALID_REPEAT_OP = "invalid nested repetition operator"
_ERR_INVALID_REPEAT_SIZE = "invalid repeat count"
_ERR_MISSING_BRACKET = "missing closing ]"
_ERR_MISSING_PAREN = "missing closing )"
_ERR_INTERNAL = "regexp/syntax: internal error"  # RE2J's description of a ')' without its '('

_ERR_MISSING_REPEAT_ARGUMENT = "missing argument to repetition operator"
_ERR_TRAILING_BACKSLASH = "trailing backslash at end of expression"
_ERR_DUPLICATE_NAMED_CAPTURE = "duplicate capture group name"
ERR_TOO_LARGE = "expression too large"
ERR_NESTING = "expression nests too deeply"

_MAX_REPEAT = 1000
MAX_CP = 0x10FFFF
_MAX_NESTING = 100
_FOLD_RANGE_LIMIT = 5000

# --- character sets: sorted, merged lists of inclusive code point ranges ---------------------

Ranges = tuple[tuple[int, int], ...]


def _merge(ranges: Iterable[tuple[int, int]]) -> Ranges:
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            if hi > out[-1][1]:
                out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return tuple(out)


def _negate(ranges: Ranges) -> Ranges:
    out: list[tuple[int, int]] = []
    nxt = 0
    for lo, hi in ranges:
        if lo > nxt:
            out.append((nxt, lo - 1))
        nxt = max(nxt, hi + 1)
    if nxt <= MAX_CP:
        out.append((nxt, MAX_CP))
    return tuple(out)


def _ascii(pred) -> Ranges:  # type: ignore[no-untyped-def]
    return _merge((c, c) for c in range(128) if pred(chr(c)))


def _fold(ranges: Ranges) -> Ranges:
    """Add the other-case forms of the ranges' characters (RE2's case folding for (?i))."""
    extra: list[tuple[int, int]] = []
    for lo, hi in ranges:
        # ASCII letters exactly; other characters when the range is small enough to walk.
        for a, b in ((65, 90), (97, 122)):
            x, y = max(lo, a), min(hi, b)
            if x <= y:
                extra.append((x ^ 0x20, y ^ 0x20))
        # The two non-ASCII members of ASCII letters' case orbits: KELVIN SIGN and LONG S.
        for letters, other in (("kK", 0x212A), ("sS", 0x17F)):
            if any(lo <= ord(letter) <= hi for letter in letters):
                extra.append((other, other))
        if hi >= 128 and hi - max(lo, 128) < _FOLD_RANGE_LIMIT:
            for cp in range(max(lo, 128), hi + 1):
                ch = chr(cp)
                for other in (ch.lower(), ch.upper()):
                    if len(other) == 1 and other != ch:
                        extra.append((ord(other), ord(other)))
    return _merge((*ranges, *extra)) if extra else ranges


_PERL = {
    "d": _ascii(lambda ch: "0" <= ch <= "9"),
    "s": _merge((ord(c), ord(c)) for c in "\t\n\f\r "),
    "w": _ascii(lambda ch: ch.isalnum() or ch == "_"),
}

_POSIX = {
    "alnum": _ascii(lambda ch: ch.isalnum()),
    "alpha": _ascii(lambda ch: ch.isalpha()),
    "ascii": ((0, 127),),
    "blank": ((9, 9), (32, 32)),
    "cntrl": ((0, 31), (127, 127)),
    "digit": _PERL["d"],
    "graph": ((33, 126),),
    "lower": _ascii(lambda ch: ch.islower()),
    "print": ((32, 126),),
    "punct": _ascii(lambda ch: 33 <= ord(ch) <= 126 and not ch.isalnum()),
    "space": ((9, 13), (32, 32)),
    "upper": _ascii(lambda ch: ch.isupper()),
    "word": _PERL["w"],
    "xdigit": _ascii(lambda ch: ch in "0123456789abcdefABCDEF"),
}

# RE2J's UnicodeTables.CATEGORIES and SCRIPTS keys.
_CATEGORIES = frozenset(
    "C Cc Cf Co Cs L Ll Lm Lo Lt Lu M Mc Me Mn N Nd Nl No P Pc Pd Pe Pf Pi Po Ps "
    "S Sc Sk Sm So Z Zl Zp Zs".split())
_SCRIPTS = frozenset("""
Arabic Armenian Avestan Balinese Bamum Batak Bengali Bopomofo Brahmi Braille Buginese Buhid
Canadian_Aboriginal Carian Cham Cherokee Common Coptic Cuneiform Cypriot Cyrillic Deseret
Devanagari Egyptian_Hieroglyphs Ethiopic Georgian Glagolitic Gothic Greek Gujarati Gurmukhi Han
Hangul Hanunoo Hebrew Hiragana Imperial_Aramaic Inherited Inscriptional_Pahlavi
Inscriptional_Parthian Javanese Kaithi Kannada Katakana Kayah_Li Kharoshthi Khmer Lao Latin Lepcha
Limbu Linear_B Lisu Lycian Lydian Malayalam Mandaic Meetei_Mayek Mongolian Myanmar New_Tai_Lue Nko
Ogham Ol_Chiki Old_Italic Old_Persian Old_South_Arabian Old_Turkic Oriya Osmanya Phags_Pa
Phoenician Rejang Runic Samaritan Saurashtra Shavian Sinhala Sundanese Syloti_Nagri Syriac Tagalog
Tagbanwa Tai_Le Tai_Tham Tai_Viet Tamil Telugu Thaana Thai Tibetan Tifinagh Ugaritic Unknown Vai Yi
""".split())


# The ASCII part of RE2J's UnicodeTables.FOLD_CATEGORIES / FOLD_SCRIPT (what (?i) adds to \\p{..}).
_UNICODE_FOLDS: dict[str, Ranges] = {
    "Lu": ((97, 122),),             # a-z
    "Ll": ((75, 75), (83, 83)),     # K and S only: RE2J's table, not the full closure
    "Lt": (), "Mn": (), "Common": (), "Inherited": (), "Greek": (),
    "Any": ((0, MAX_CP),),
}


@functools.lru_cache(maxsize=None)
def _unicode_class(name: str) -> Ranges | None:
    """The ASCII members of a Unicode class RE2J knows (None for an unknown name)."""
    if name == "Any":
        return ((0, MAX_CP),)
    if name in _CATEGORIES:
        return _ascii(lambda ch: unicodedata.category(ch).startswith(name))
    if name in _SCRIPTS:
        # Every ASCII character is in script Latin (the letters) or Common (the rest).
        if name == "Latin":
            return _ascii(lambda ch: ch.isalpha())
        if name == "Common":
            return _ascii(lambda ch: not ch.isalpha())
        return ()
    return None


# --- the syntax tree ------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class CharSet:
    """One character out of ``ranges``."""
    ranges: Ranges


@dataclass(frozen=True, slots=True)
class Concat:
    items: tuple[object, ...]


@dataclass(frozen=True, slots=True)
class Alternate:
    branches: tuple[object, ...]


@dataclass(frozen=True, slots=True)
class Repeat:
    item: object
    min: int
    max: int | None  # None: unbounded
    lazy: bool = False


@dataclass(frozen=True, slots=True)
class Assertion:
    """An empty-width assertion: ``bot``/``eot`` (text), ``bol``/``eol`` (line), ``wb``/``nwb``."""
    kind: str


_ANY = CharSet(((0, MAX_CP),))
_ANY_NOT_NL = CharSet(((0, 9), (11, MAX_CP)))

_REPEAT = re.compile(r"\{(0|[1-9][0-9]*)(,(0|[1-9][0-9]*)?)?\}")
_HEX = "0123456789abcdefABCDEF"


def _isalnum(c: str) -> bool:
    return c.isascii() and c.isalnum()


class _Parser:
    """Recursive descent over RE2J's grammar, with RE2J's flags, limits and error messages."""

    def __init__(self, pattern: str) -> None:
        self.s = pattern
        self.i = 0
        self.fold = False        # (?i)
        self.multiline = False   # (?m)
        self.dotnl = False       # (?s)
        self.names: set[str] = set()
        self.depth = 0

    def error(self, description: str, fragment: str) -> InvalidTopicRegex:
        return InvalidTopicRegex(description, fragment)

    def parse(self) -> object:
        node = self.alternation()
        if self.i < len(self.s):  # a ')' without its '('
            raise self.error(_ERR_INTERNAL, "stack underflow")
        return node

    def alternation(self) -> object:
        branches = [self.concatenation()]
        while self.i < len(self.s) and self.s[self.i] == "|":
            self.i += 1
            branches.append(self.concatenation())
        return branches[0] if len(branches) == 1 else Alternate(tuple(branches))

    def concatenation(self) -> object:
        s = self.s
        items: list[object] = []
        last_was_repeat = False
        last_repeat_pos = 0
        while self.i < len(s) and s[self.i] not in "|)":
            c = s[self.i]
            start = self.i
            repeat = None
            if c in "*+?":
                self.i += 1
                repeat = (0 if c != "+" else 1, None if c != "?" else 1)
            elif c == "{":
                m = _REPEAT.match(s, self.i)
                if m is not None:
                    self.i = m.end()
                    lo = int(m.group(1))
                    hi = lo if m.group(2) is None else (None if m.group(3) is None else int(m.group(3)))
                    if lo > _MAX_REPEAT or (hi is not None and (hi > _MAX_REPEAT or lo > hi)):
                        raise self.error(_ERR_INVALID_REPEAT_SIZE, s[start:self.i])
                    repeat = (lo, hi)
                else:
                    # A '{' that is not a repetition is a literal, but RE2J still counts it as
                    # a repetition operator for the next one: "a{+" is a nested repetition.
                    self.i += 1
                    items.append(self.literal(ord("{")))
                    last_was_repeat = True
                    last_repeat_pos = start
                    continue
            if repeat is not None:
                lazy = False
                if self.i < len(s) and s[self.i] == "?":
                    self.i += 1
                    lazy = True
                if last_was_repeat:
                    raise self.error(_ERR_INVALID_REPEAT_OP, s[last_repeat_pos:self.i])
                if not items:
                    raise self.error(_ERR_MISSING_REPEAT_ARGUMENT, s[start:self.i])
                items[-1] = Repeat(items[-1], repeat[0], repeat[1], lazy)
                last_was_repeat = True
                last_repeat_pos = start
                continue
            last_was_repeat = False
            atom = self.atom()
            if isinstance(atom, list):
                items.extend(atom)  # \Q...\E: a quantifier after it applies to its last character
            elif atom is not None:
                items.append(atom)
        return items[0] if len(items) == 1 else Concat(tuple(items))

    def atom(self) -> object | list[CharSet] | None:
        """The next atom; None for a construct that matches nothing by itself ((?i), \\Q\\E)."""
        s = self.s
        c = s[self.i]
        if c == "(":
            return self.group()
        if c == "[":
            return self.char_class()
        if c == ".":
            self.i += 1
            return _ANY if self.dotnl else _ANY_NOT_NL
        if c == "^":
            self.i += 1
            return Assertion("bol" if self.multiline else "bot")
        if c == "$":
            self.i += 1
            return Assertion("eol" if self.multiline else "eot")
        if c == "\\":
            nxt = s[self.i + 1] if self.i + 1 < len(s) else ""
            if nxt == "A":
                self.i += 2
                return Assertion("bot")
            if nxt == "z":
                self.i += 2
                return Assertion("eot")
            if nxt == "b":
                self.i += 2
                return Assertion("wb")
            if nxt == "B":
                self.i += 2
                return Assertion("nwb")
            if nxt == "C":
                raise self.error(_ERR_INVALID_ESCAPE, "\\C")
            if nxt == "Q":
                end = s.find("\\E", self.i + 2)
                text = s[self.i + 2:] if end < 0 else s[self.i + 2:end]
                self.i = len(s) if end < 0 else end + 2
                return [self.literal(ord(ch)) for ch in text] or None
            if nxt in ("p", "P"):
                return CharSet(self.unicode_class())
            if nxt and nxt in _PERL_ESCAPES:
                self.i += 2
                return CharSet(self.group_ranges(*_PERL_ESCAPES[nxt]))
            return self.literal(self.escape())
        self.i += 1
        return self.literal(ord(c))

    def literal(self, cp: int) -> CharSet:
        return self.set_node(((cp, cp),))

    def set_node(self, ranges: Ranges) -> CharSet:
        return CharSet(_fold(ranges) if self.fold else ranges)

    def group_ranges(self, ranges: Ranges, negated: bool) -> Ranges:
        """A class group (\\d, \\pL, [:alpha:], ...): folded under (?i) before negation, as RE2J."""
        if self.fold:
            ranges = _fold(ranges)
        return _negate(ranges) if negated else ranges

    def group(self) -> object | None:
        s, start = self.s, self.i
        saved = (self.fold, self.multiline, self.dotnl)
        if s.startswith("(?P<", start) or s.startswith("(?<", start):
            begin = start + (4 if s[start + 2] == "P" else 3)
            end = s.find(">", begin)
            if end < 0:
                raise self.error(_ERR_INVALID_NAMED_CAPTURE, s[start:])
            name = s[begin:end]
            if not name or not all(_isalnum(ch) or ch == "_" for ch in name):
                raise self.error(_ERR_INVALID_NAMED_CAPTURE, s[start:end + 1])
            if name in self.names:
                raise self.error(_ERR_DUPLICATE_NAMED_CAPTURE, name)
            self.names.add(name)
            self.i = end + 1
        elif s.startswith("(?", start):
            if not self.flags(start):
                return None  # (?flags): in effect until the enclosing group ends
        else:
            self.i += 1
        self.depth += 1
        if self.depth > _MAX_NESTING:
            raise self.error(ERR_NESTING, s)
        node = self.alternation()
        self.depth -= 1
        if self.i >= len(s):
            raise self.error(_ERR_MISSING_PAREN, s)
        self.i += 1  # ')'
        self.fold, self.multiline, self.dotnl = saved
        return node

    def flags(self, start: int) -> bool:
        """Parse ``(?flags)`` or ``(?flags:``; True when it opens a group."""
        s = self.s
        j = start + 2
        fold, multiline, dotnl = self.fold, self.multiline, self.dotnl
        negative = False
        saw = False
        while j < len(s):
            c = s[j]
            j += 1
            if c in "imsU":
                value = not negative
                if c == "i":
                    fold = value
                elif c == "m":
                    multiline = value
                elif c == "s":
                    dotnl = value
                # U (ungreedy) only changes which of several matches is found, never whether
                # a whole name matches.
                saw = True
            elif c == "-" and not negative:
                negative = True
                saw = False
            elif c in ":)" and (saw or not negative):
                self.i = j
                self.fold, self.multiline, self.dotnl = fold, multiline, dotnl
                return c == ":"
            else:
                break
        raise self.error(_ERR_INVALID_PERL_OP, s[start:j])

    def escape(self) -> int:
        """A single-character escape (RE2J parseEscape), starting at the backslash."""
        s = self.s
        start = self.i
        self.i += 1
        if self.i >= len(s):
            raise self.error(_ERR_TRAILING_BACKSLASH, "")
        c = s[self.i]
        self.i += 1
        if not _isalnum(c):
            return ord(c)
        if "1" <= c <= "7" and not (self.i < len(s) and "0" <= s[self.i] <= "7"):
            raise self.error(_ERR_INVALID_ESCAPE, s[start:self.i])  # a backreference
        if "0" <= c <= "7":
            value = int(c)
            for _ in range(2):
                if self.i < len(s) and "0" <= s[self.i] <= "7":
                    value = value * 8 + int(s[self.i])
                    self.i += 1
            return value
        if c == "x" and self.i < len(s):
            if s[self.i] == "{":
                end = s.find("}", self.i)
                digits = s[self.i + 1:end] if end >= 0 else ""
                if end >= 0 and digits and all(d in _HEX for d in digits) and int(digits, 16) <= MAX_CP:
                    self.i = end + 1
                    return int(digits, 16)
                self.i = len(s) if end < 0 else end + 1
            else:
                digits = s[self.i:self.i + 2]
                self.i += len(digits)
                if len(digits) == 2 and all(d in _HEX for d in digits):
                    return int(digits, 16)
        simple = {"a": 7, "f": 12, "n": 10, "r": 13, "t": 9, "v": 11}
        if c in simple:
            return simple[c]
        raise self.error(_ERR_INVALID_ESCAPE, s[start:self.i])

    def unicode_class(self) -> Ranges:
        s = self.s
        start = self.i
        negated = s[self.i + 1] == "P"
        self.i += 2
        if self.i >= len(s):
            raise self.error(_ERR_INVALID_CHAR_RANGE, s[start:])
        if s[self.i] == "{":
            end = s.find("}", self.i)
            if end < 0:
                raise self.error(_ERR_INVALID_CHAR_RANGE, s[start:])
            name = s[self.i + 1:end]
            self.i = end + 1
        else:
            name = s[self.i]
            self.i += 1
        if name.startswith("^"):
            negated = not negated
            name = name[1:]
        ranges = _unicode_class(name)
        if ranges is None:
            raise self.error(_ERR_INVALID_CHAR_RANGE, s[start:self.i])
        if self.fold and name in _UNICODE_FOLDS:
            # RE2J adds its fold table for the class (only Lu, Ll, Lt, Mn, Common, Inherited,
            # Greek have one, and it is not the full case closure), then negates.
            ranges = _merge((*ranges, *_UNICODE_FOLDS[name]))
        return _negate(ranges) if negated else ranges

    def char_class(self) -> CharSet:
        s = self.s
        start = self.i
        self.i += 1
        negated = False
        if self.i < len(s) and s[self.i] == "^":
            negated = True
            self.i += 1
        ranges: list[tuple[int, int]] = []
        first = True
        while self.i >= len(s) or s[self.i] != "]" or first:
            if self.i >= len(s):
                raise self.error(_ERR_MISSING_BRACKET, s[start:])
            first = False
            if s.startswith("[:", self.i):
                end = s.find(":]", self.i)
                if end >= 0:
                    name = s[self.i + 2:end]
                    neg = name.startswith("^")
                    cls = _POSIX.get(name[1:] if neg else name)
                    if cls is None:
                        raise self.error(_ERR_INVALID_CHAR_RANGE, s[self.i:end + 2])
                    ranges.extend(self.group_ranges(cls, neg))
                    self.i = end + 2
                    continue
            if s.startswith("\\p", self.i) or s.startswith("\\P", self.i):
                ranges.extend(self.unicode_class())
                continue
            if s[self.i] == "\\" and self.i + 1 < len(s) and s[self.i + 1] in _PERL_ESCAPES:
                ranges.extend(self.group_ranges(*_PERL_ESCAPES[s[self.i + 1]]))
                self.i += 2
                continue
            before = self.i
            lo = self.class_char(start)
            hi = lo
            if self.i < len(s) and s[self.i] == "-" and not (self.i + 1 < len(s) and s[self.i + 1] == "]"):
                self.i += 1
                hi = self.class_char(start)
                if hi < lo:
                    raise self.error(_ERR_INVALID_CHAR_RANGE, s[before:self.i])
            ranges.extend(_fold(((lo, hi),)) if self.fold else ((lo, hi),))
        self.i += 1  # ']'
        merged = _merge(ranges)
        return CharSet(_negate(merged) if negated else merged)

    def class_char(self, class_start: int) -> int:
        s = self.s
        if self.i >= len(s):
            raise self.error(_ERR_MISSING_BRACKET, s[class_start:])
        if s[self.i] == "\\":
            return self.escape()
        self.i += 1
        return ord(s[self.i - 1])


_PERL_ESCAPES: dict[str, tuple[Ranges, bool]] = {
    "d": (_PERL["d"], False), "D": (_PERL["d"], True),
    "s": (_PERL["s"], False), "S": (_PERL["s"], True),
    "w": (_PERL["w"], False), "W": (_PERL["w"], True),
}


def parse_re2(pattern: str) -> object:
    """The syntax tree of an RE2J pattern, or InvalidTopicRegex with RE2J's description."""
    return _Parser(pattern).parse()


# --- the equivalent Python pattern ----------------------------------------------------------

def _py_char(cp: int) -> str:
    ch = chr(cp)
    if ch.isascii() and (ch.isalnum() or ch == "_"):
        return ch
    if 33 <= cp <= 126:
        return "\\" + ch
    return f"\\U{cp:08x}"


def _py_set(node: CharSet) -> str:
    ranges = node.ranges
    if not ranges:
        return "[^\\s\\S]"
    if ranges == _ANY.ranges:
        return "[\\s\\S]"
    if ranges == _ANY_NOT_NL.ranges:
        return "."
    if len(ranges) == 1 and ranges[0][0] == ranges[0][1]:
        return _py_char(ranges[0][0])
    body = "".join(_py_char(lo) if lo == hi else f"{_py_char(lo)}-{_py_char(hi)}" for lo, hi in ranges)
    return f"[{body}]"


_PY_ASSERTIONS = {"bot": "\\A", "eot": "\\Z", "bol": "(?m:^)", "eol": "(?m:$)", "wb": "(?a:\\b)",
                  "nwb": "(?a:\\B)"}


def to_python(node: object) -> str:
    if isinstance(node, CharSet):
        return _py_set(node)
    if isinstance(node, Assertion):
        return _PY_ASSERTIONS[node.kind]
    if isinstance(node, Concat):
        return "".join(f"(?:{to_python(n)})" if isinstance(n, Alternate) else to_python(n) for n in node.items)
    if isinstance(node, Alternate):
        return "|".join(to_python(n) for n in node.branches)
    assert isinstance(node, Repeat)
    inner = to_python(node.item)
    if not isinstance(node.item, CharSet):
        inner = f"(?:{inner})"
    if node.max is None:
        op = "*" if node.min == 0 else "+" if node.min == 1 else f"{{{node.min},}}"
    elif node.min == 0 and node.max == 1:
        op = "?"
    else:
        op = f"{{{node.min}}}" if node.min == node.max else f"{{{node.min},{node.max}}}"
    return inner + op + ("?" if node.lazy else "")
