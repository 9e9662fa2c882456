"""Topic subscription regular expressions of KIP-848 consumer groups (RE2J syntax on Python's re).

Kafka 4.0 compiles ConsumerGroupHeartbeat's SubscribedTopicRegex with Google's RE2J and
subscribes a member to every non-internal topic whose whole name matches
(``pattern.matcher(name).matches()``). We translate the RE2 syntax into an equivalent Python
pattern instead of handing it to ``re`` as is, because the two dialects differ:

* rejected, as RE2J rejects them (Python would accept): backreferences (``\\1``, ``(?P=n)``),
  lookahead/lookbehind, atomic groups ``(?>``, possessive quantifiers ``a*+``, conditionals
  ``(?(1)``, comments ``(?#``, flags other than ``imsU``, stacked repetition ``a**``,
  repeat counts over 1000, ``\\Z``, escaped letters RE2 does not know, escaped non-ASCII;
* translated, as Python lacks or spells them differently: ``\\Q...\\E`` quoting, ``\\z``,
  ``\\x{10FFFF}``, octal ``\\123``, ``\\pL`` / ``\\p{Greek}`` / ``\\PN`` / ``\\p{^Lu}``,
  ``[[:alpha:]]``, ASCII-only ``\\d \\s \\w`` (Python's are Unicode), inline flags anywhere
  (``a(?i)b`` applies to the rest of the group, Python only allows them at the start),
  ``(?<name>`` and group names starting with a digit, ``{,n}`` (a literal in RE2);
* accepted without effect: the ``U`` (ungreedy) flag, since a full match either exists or not
  whatever the greediness.

Known differences, none of which change which topic names match (legal topic names contain
only ASCII letters, digits, ``.``, ``_`` and ``-``): Unicode classes (``\\p...``) are
evaluated over ASCII only; ``$`` without ``(?m)`` also matches before a final newline in
Python; the list of script names is Unicode 15's where RE2J's tables may be older; RE2J's
limit on the total size of a compiled program is not enforced (only repeat counts <= 1000).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterable

from kafkapy.controller.topic_rules import is_internal_topic

__all__ = ["InvalidTopicRegex", "compile_topic_regex", "matching_topics", "translate_re2"]


class InvalidTopicRegex(ValueError):
    """The pattern is not a valid RE2J regular expression (Kafka's INVALID_REGULAR_EXPRESSION).

    ``description`` is RE2J's short description (``missing closing )``), ``str(exc)`` the full
    message in RE2J's ``error parsing regexp: <description>: `<fragment>``` form.
    """

    def __init__(self, description: str, fragment: str) -> None:
        super().__init__(f"error parsing regexp: {description}: `{fragment}`")
        self.description = description
        self.fragment = fragment


_MAX_REPEAT = 1000
_MAX_CP = 0x10FFFF

# --- character sets, as sorted lists of inclusive code point ranges --------------------------

_Ranges = list[tuple[int, int]]


def _ranges_of(chars: Iterable[int]) -> _Ranges:
    out: _Ranges = []
    for c in sorted(set(chars)):
        if out and out[-1][1] == c - 1:
            out[-1] = (out[-1][0], c)
        else:
            out.append((c, c))
    return out


def _negate(ranges: _Ranges) -> _Ranges:
    out: _Ranges = []
    nxt = 0
    for lo, hi in sorted(ranges):
        if lo > nxt:
            out.append((nxt, lo - 1))
        nxt = max(nxt, hi + 1)
    if nxt <= _MAX_CP:
        out.append((nxt, _MAX_CP))
    return out


def _ascii(pred) -> _Ranges:  # type: ignore[no-untyped-def]
    return _ranges_of(c for c in range(128) if pred(chr(c)))


_PERL = {
    "d": _ranges_of(range(ord("0"), ord("9") + 1)),
    "s": _ranges_of(ord(c) for c in "\t\n\f\r "),
    "w": _ascii(lambda ch: ch.isascii() and (ch.isalnum() or ch == "_")),
}

_POSIX = {
    "alnum": _ascii(lambda ch: ch.isalnum()),
    "alpha": _ascii(lambda ch: ch.isalpha()),
    "ascii": [(0, 127)],
    "blank": _ranges_of([9, 32]),
    "cntrl": _ranges_of(list(range(32)) + [127]),
    "digit": _PERL["d"],
    "graph": [(33, 126)],
    "lower": _ascii(lambda ch: ch.islower()),
    "print": [(32, 126)],
    "punct": _ascii(lambda ch: 33 <= ord(ch) <= 126 and not ch.isalnum()),
    "space": _ranges_of(range(9, 14)) + [(32, 32)],
    "upper": _ascii(lambda ch: ch.isupper()),
    "word": _PERL["w"],
    "xdigit": _ascii(lambda ch: ch in "0123456789abcdefABCDEF"),
}

_CATEGORIES = frozenset(
    "C Cc Cf Co Cs L Ll Lm Lo Lt Lu M Mc Me Mn N Nd Nl No P Pc Pd Pe Pf Pi Po Ps "
    "S Sc Sk Sm So Z Zl Zp Zs".split())

_SCRIPTS = frozenset("""
Adlam Ahom Anatolian_Hieroglyphs Arabic Armenian Avestan Balinese Bamum Bassa_Vah Batak Bengali
Bhaiksuki Bopomofo Brahmi Braille Buginese Buhid Canadian_Aboriginal Carian Caucasian_Albanian
Chakma Cham Cherokee Chorasmian Common Coptic Cuneiform Cypriot Cypro_Minoan Cyrillic Deseret
Devanagari Dives_Akuru Dogra Duployan Egyptian_Hieroglyphs Elbasan Elymaic Ethiopic Georgian
Glagolitic Gothic Grantha Greek Gujarati Gunjala_Gondi Gurmukhi Han Hangul Hanifi_Rohingya Hanunoo
Hatran Hebrew Hiragana Imperial_Aramaic Inherited Inscriptional_Pahlavi Inscriptional_Parthian
Javanese Kaithi Kannada Kawi Katakana Kayah_Li Kharoshthi Khitan_Small_Script Khmer Khojki
Khudawadi Lao Latin Lepcha Limbu Linear_A Linear_B Lisu Lycian Lydian Mahajani Makasar Malayalam
Mandaic Manichaean Marchen Masaram_Gondi Medefaidrin Meetei_Mayek Mende_Kikakui Meroitic_Cursive
Meroitic_Hieroglyphs Miao Modi Mongolian Mro Multani Myanmar Nabataean Nag_Mundari Nandinagari
New_Tai_Lue Newa Nko Nushu Nyiakeng_Puachue_Hmong Ogham Ol_Chiki Old_Hungarian Old_Italic
Old_North_Arabian Old_Permic Old_Persian Old_Sogdian Old_South_Arabian Old_Turkic Old_Uyghur Oriya
Osage Osmanya Pahawh_Hmong Palmyrene Pau_Cin_Hau Phags_Pa Phoenician Psalter_Pahlavi Rejang Runic
Samaritan Saurashtra Sharada Shavian Siddham SignWriting Sinhala Sogdian Sora_Sompeng Soyombo
Sundanese Syloti_Nagri Syriac Tagalog Tagbanwa Tai_Le Tai_Tham Tai_Viet Takri Tamil Tangsa Tangut
Telugu Thaana Thai Tibetan Tifinagh Tirhuta Toto Ugaritic Vai Vithkuqi Wancho Warang_Citi Yezidi
Yi Zanabazar_Square""".split())


@functools.lru_cache(maxsize=None)
def _unicode_class(name: str) -> _Ranges | None:
    """The ASCII members of a Unicode class RE2J knows (None for an unknown name)."""
    if name == "Any":
        return [(0, _MAX_CP)]
    if name in _CATEGORIES:
        return _ascii(lambda ch: unicodedata.category(ch).startswith(name)
                      and (len(name) == 2 or unicodedata.category(ch) != "Cn"))
    if name in _SCRIPTS:
        # Every ASCII character is in script Latin (letters) or Common (the rest).
        if name == "Latin":
            return _ascii(lambda ch: ch.isalpha())
        if name == "Common":
            return _ascii(lambda ch: not ch.isalpha())
        return []
    return None


def _py_char(cp: int) -> str:
    ch = chr(cp)
    if ch.isascii() and (ch.isalnum() or ch == "_"):
        return ch
    if 33 <= cp <= 126:
        return "\\" + ch
    return f"\\U{cp:08x}"


def _py_class(ranges: _Ranges, negated: bool = False) -> str:
    if not ranges:
        # An empty class matches nothing (negated: anything, including newline).
        return "[\\s\\S]" if negated else "[^\\s\\S]"
    body = "".join(_py_char(lo) if lo == hi else f"{_py_char(lo)}-{_py_char(hi)}" for lo, hi in ranges)
    return f"[{'^' if negated else ''}{body}]"


# --- the translator ---------------------------------------------------------------------------

_REPEAT = re.compile(r"\{(\d+)(,(\d*))?\}")
_GROUP_NAME = re.compile(r"[A-Za-z0-9_]+")
_HEX = "0123456789abcdefABCDEF"


class _Translator:
    """One pass over an RE2 pattern producing the equivalent Python pattern."""

    def __init__(self, pattern: str) -> None:
        self.s = pattern
        self.i = 0
        self.out: list[str] = []
        # Per open group: the scoped flag groups opened by "(?flags)" inside it, reopened after '|'.
        self.frames: list[list[str]] = [[]]
        self.names: set[str] = set()
        # Whether the output ends with something a quantifier may follow.
        self.can_repeat = False

    def error(self, description: str, fragment: str) -> InvalidTopicRegex:
        return InvalidTopicRegex(description, fragment)

    def run(self) -> str:
        s = self.s
        while self.i < len(s):
            c = s[self.i]
            if c == "\\":
                if s.startswith("\\Q", self.i):
                    self.quote()
                    continue
                start = self.i
                self.i += 1
                atom = self.escape(in_class=False)
                assert isinstance(atom, str)
                self.emit_atom(atom, start)
            elif c == "[":
                start = self.i
                self.emit_atom(self.char_class(), start)
            elif c == "(":
                self.open_group()
            elif c == ")":
                self.close_group()
            elif c == "|":
                frame = self.frames[-1]
                self.out.append(")" * len(frame) + "|" + "".join(frame))
                self.i += 1
                self.can_repeat = False
            elif c in "*+?":
                self.repeat(c, self.i)
            elif c == "{":
                m = _REPEAT.match(s, self.i)
                if m:
                    self.repeat(m.group(0), self.i)
                else:
                    self.out.append("\\{")
                    self.i += 1
                    self.can_repeat = True
            elif c in "^$":
                self.i += 1
                self.emit_atom(c, self.i - 1)
            else:
                self.i += 1
                self.out.append("." if c == "." else _py_char(ord(c)))
                self.can_repeat = True
        if len(self.frames) > 1:
            raise self.error("missing closing )", s)
        self.out.append(")" * len(self.frames[0]))
        return "".join(self.out)

    def emit_atom(self, atom: str, start: int) -> None:
        # Python refuses to repeat an assertion (``^*``); RE2 allows it, so wrap it in a group.
        if atom in ("^", "$", "\\A", "\\Z", "\\b", "\\B") and self.i < len(self.s) and self.s[self.i] in "*+?{":
            atom = f"(?:{atom})"
        self.out.append(atom)
        self.can_repeat = True

    def quote(self) -> None:
        end = self.s.find("\\E", self.i + 2)
        text = self.s[self.i + 2:] if end < 0 else self.s[self.i + 2:end]
        self.i = len(self.s) if end < 0 else end + 2
        if text:
            # Each character becomes one atom, so a following quantifier applies to the last one.
            self.out.append("".join(_py_char(ord(ch)) for ch in text))
            self.can_repeat = True

    def repeat(self, op: str, start: int) -> None:
        s = self.s
        if not self.can_repeat:
            raise self.error("missing argument to repetition operator", op)
        if op.startswith("{"):
            m = _REPEAT.match(op)
            assert m is not None
            lo = int(m.group(1))
            hi = None if m.group(2) and not m.group(3) else int(m.group(3) or m.group(1))
            if lo > _MAX_REPEAT or (hi is not None and (hi > _MAX_REPEAT or hi < lo)):
                raise self.error("invalid repeat count", op)
        self.i += len(op)
        if self.i < len(s) and s[self.i] == "?":
            op += "?"
            self.i += 1
        if self.i < len(s) and s[self.i] in "*+?{":
            raise self.error("invalid nested repetition operator", s[start:self.i + 1])
        self.out.append(op)
        self.can_repeat = False

    def open_group(self) -> None:
        s, i = self.s, self.i
        if not s.startswith("(?", i):
            self.i += 1
            self.out.append("(")
            self.frames.append([])
            self.can_repeat = False
            return
        for prefix, what in (("(?=", "lookahead"), ("(?!", "lookahead"), ("(?<=", "lookbehind"),
                             ("(?<!", "lookbehind"), ("(?>", "atomic group"), ("(?#", "comment"),
                             ("(?(", "conditional"), ("(?P=", "backreference"), ("(?P>", "recursion"),
                             ("(?&", "recursion"), ("(?R", "recursion")):
            if s.startswith(prefix, i):
                raise self.error(f"invalid or unsupported Perl syntax ({what})", prefix)
        if s.startswith("(?P<", i) or s.startswith("(?<", i):
            begin = i + (4 if s[i + 2] == "P" else 3)
            end = s.find(">", begin)
            name = s[begin:end] if end >= 0 else ""
            if end < 0:
                raise self.error("invalid named capture", s[i:])
            if not _GROUP_NAME.fullmatch(name):
                raise self.error("invalid named capture", s[i:end + 1])
            if name in self.names:
                raise self.error("duplicate capture group name", s[i:end + 1])
            self.names.add(name)
            # Names are never referenced (no backreferences), and RE2 allows names Python does not.
            self.out.append("(")
            self.frames.append([])
            self.i = end + 1
            self.can_repeat = False
            return
        # Flags: (?imsU-imsU) or (?imsU-imsU:re)
        j = i + 2
        on: set[str] = set()
        off: set[str] = set()
        negative = False
        saw = False
        while j < len(s):
            c = s[j]
            if c in "imsU":
                (off if negative else on).add(c)
                saw = True
            elif c == "-" and not negative:
                negative = True
                saw = False
            elif c in ":)":
                if negative and not saw:
                    break
                on -= off
                on.discard("U")
                off.discard("U")
                flags = "".join(sorted(on)) + ("-" + "".join(sorted(off)) if off else "")
                self.i = j + 1
                self.can_repeat = False
                if c == ":":
                    self.out.append(f"(?{flags}:")
                    self.frames.append([])
                elif flags:
                    scoped = f"(?{flags}:"
                    self.out.append(scoped)
                    self.frames[-1].append(scoped)
                return
            else:
                break
            j += 1
        raise self.error("invalid or unsupported Perl syntax", s[i:j + 1])

    def close_group(self) -> None:
        if len(self.frames) == 1:
            raise self.error("unexpected )", self.s)
        frame = self.frames.pop()
        self.out.append(")" * len(frame) + ")")
        self.i += 1
        self.can_repeat = True

    def escape(self, in_class: bool) -> str | int | _Ranges:
        """Parse an escape after the backslash.

        Outside a class: the Python atom. Inside: a code point, or the ranges of a class escape.
        """
        s = self.s
        if self.i >= len(s):
            raise self.error("trailing backslash at end of expression", "")
        c = s[self.i]
        start = self.i - 1
        self.i += 1
        if "1" <= c <= "7" and not (self.i < len(s) and "0" <= s[self.i] <= "7"):
            raise self.error("invalid escape sequence", s[start:self.i])
        if "0" <= c <= "7":
            value = int(c)
            for _ in range(2):
                if self.i < len(s) and "0" <= s[self.i] <= "7":
                    value = value * 8 + int(s[self.i])
                    self.i += 1
                else:
                    break
            return self.literal(value, in_class)
        if c == "x":
            if self.i < len(s) and s[self.i] == "{":
                end = s.find("}", self.i)
                digits = s[self.i + 1:end] if end >= 0 else ""
                if end < 0 or not digits or any(d not in _HEX for d in digits) or int(digits, 16) > _MAX_CP:
                    raise self.error("invalid escape sequence", s[start:(end + 1) if end >= 0 else len(s)])
                self.i = end + 1
                return self.literal(int(digits, 16), in_class)
            digits = s[self.i:self.i + 2]
            if len(digits) < 2 or any(d not in _HEX for d in digits):
                raise self.error("invalid escape sequence", s[start:self.i + 2])
            self.i += 2
            return self.literal(int(digits, 16), in_class)
        simple = {"a": 7, "f": 12, "t": 9, "n": 10, "r": 13, "v": 11}
        if c in simple:
            return self.literal(simple[c], in_class)
        if c.lower() in _PERL:
            ranges = _PERL[c.lower()]
            if c.isupper():
                ranges = _negate(ranges)
            return ranges if in_class else _py_class(ranges)
        if c in "pP":
            return self.unicode_class(c == "P", start, in_class)
        if not in_class and c in "AbB":
            return "\\" + c
        if not in_class and c == "z":
            return "\\Z"
        if c.isascii() and not c.isalnum():
            return self.literal(ord(c), in_class)
        raise self.error("invalid escape sequence", s[start:self.i])

    @staticmethod
    def literal(cp: int, in_class: bool) -> str | int:
        return cp if in_class else _py_char(cp)

    def unicode_class(self, negated: bool, start: int, in_class: bool) -> str | _Ranges:
        s = self.s
        if self.i >= len(s):
            raise self.error("invalid character class range", s[start:])
        if s[self.i] == "{":
            end = s.find("}", self.i)
            if end < 0:
                raise self.error("invalid character class range", s[start:])
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
            raise self.error("invalid character class range", s[start:self.i])
        if negated:
            ranges = _negate(ranges)
        return ranges if in_class else _py_class(ranges)

    def char_class(self) -> str:
        s = self.s
        start = self.i
        self.i += 1
        negated = False
        if self.i < len(s) and s[self.i] == "^":
            negated = True
            self.i += 1
        ranges: _Ranges = []
        first = True
        while True:
            if self.i >= len(s):
                raise self.error("missing closing ]", s[start:])
            c = s[self.i]
            if c == "]" and not first:
                self.i += 1
                break
            first = False
            if s.startswith("[:", self.i):
                end = s.find(":]", self.i + 2)
                if end >= 0:
                    name = s[self.i + 2:end]
                    neg = name.startswith("^")
                    cls = _POSIX.get(name[1:] if neg else name)
                    if cls is None:
                        raise self.error("invalid character class range", s[self.i:end + 2])
                    ranges.extend(_negate(cls) if neg else cls)
                    self.i = end + 2
                    continue
            lo = self.class_char()
            if isinstance(lo, list):
                ranges.extend(lo)
                continue
            if self.i + 1 < len(s) and s[self.i] == "-" and s[self.i + 1] != "]":
                self.i += 1
                hi = self.class_char()
                if isinstance(hi, list):
                    raise self.error("invalid character class range", s[start:self.i])
                if hi < lo:
                    raise self.error("invalid character class range", f"{chr(lo)}-{chr(hi)}")
                ranges.append((lo, hi))
            else:
                ranges.append((lo, lo))
        merged = _ranges_of(()) if not ranges else _merge(ranges)
        return _py_class(merged, negated)

    def class_char(self) -> int | _Ranges:
        """One character of a class, or the ranges of a class escape (\\d, \\pL, ...)."""
        s = self.s
        c = s[self.i]
        if c != "\\":
            self.i += 1
            return ord(c)
        self.i += 1
        r = self.escape(in_class=True)
        assert not isinstance(r, str)
        return r


def _merge(ranges: _Ranges) -> _Ranges:
    out: _Ranges = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def translate_re2(pattern: str) -> str:
    """The Python ``re`` pattern equivalent to RE2J ``pattern`` (raises InvalidTopicRegex)."""
    return _Translator(pattern).run()


@functools.lru_cache(maxsize=1024)
def compile_topic_regex(pattern: str) -> re.Pattern[str]:
    """Compile a SubscribedTopicRegex as Kafka's RE2J would, or raise InvalidTopicRegex."""
    translated = translate_re2(pattern)
    try:
        return re.compile(translated)
    except re.error as exc:
        # Our translation only lets through what RE2 accepts, so what Python still refuses is
        # something RE2 refuses too (e.g. "missing )", "nothing to repeat").
        raise InvalidTopicRegex(exc.msg, pattern) from None
    except (OverflowError, RecursionError) as exc:
        raise InvalidTopicRegex("expression too large", pattern) from exc


def matching_topics(pattern: str | re.Pattern[str], topic_names: Iterable[str]) -> set[str]:
    """The non-internal topics whose whole name matches ``pattern`` (RE2J ``matches()``)."""
    compiled = compile_topic_regex(pattern) if isinstance(pattern, str) else pattern
    fullmatch = compiled.fullmatch
    return {name for name in topic_names if not is_internal_topic(name) and fullmatch(name) is not None}
