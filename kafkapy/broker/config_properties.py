"""Java .properties syntax, as server.properties and --override are read: Properties.load's
escapes, continuation lines, comments and separators."""
from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from ..metadata.errors import ConfigError


_WS = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str) -> str:
    """Java Properties.loadConvert: \\t \\n \\r \\f, \\uXXXX, and \\c -> c."""
    if "\\" not in text:
        return text
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        i += 1
        if ch != "\\" or i >= n:
            out.append(ch)
            continue
        ch = text[i]
        i += 1
        if ch == "u":
            digits = text[i:i + 4]
            if len(digits) != 4 or not all(c in "0123456789abcdefABCDEF" for c in digits):
                raise ConfigError("Malformed \\uxxxx encoding.")
            out.append(chr(int(digits, 16)))
            i += 4
        else:
            out.append(_ESCAPES.get(ch, ch))
    return "".join(out)


def _logical_lines(text: str) -> Iterable[str]:
    """Java's LineReader: skip blanks and #/! comments, join lines ending in an odd run of backslashes."""
    pending: str | None = None
    for natural in re.split(r"\r\n|\r|\n", text):
        line = natural.lstrip(_WS)
        if pending is None:
            if not line or line[0] in "#!":
                continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending = (pending or "") + line[:-1]
            continue
        yield (pending or "") + line
        pending = None
    if pending:
        yield pending


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java .properties text into an ordered dict (later keys win, like Properties.load)."""
    props: dict[str, str] = {}
    for line in _logical_lines(text):
        key_end, value_start, has_sep, backslash = 0, len(line), False, False
        while key_end < len(line):
            ch = line[key_end]
            if ch in "=:" and not backslash:
                value_start, has_sep = key_end + 1, True
                break
            if ch in _WS and not backslash:
                value_start = key_end + 1
                break
            backslash = (not backslash) if ch == "\\" else False
            key_end += 1
        while value_start < len(line):
            ch = line[value_start]
            if ch not in _WS:
                if not has_sep and ch in "=:":
                    has_sep = True
                else:
                    break
            value_start += 1
        props[_unescape(line[:key_end])] = _unescape(line[value_start:])
    return props


def _read_properties_file(path: str | Path) -> dict[str, str]:
    data = Path(path).read_bytes()
    try:  # Kafka reads ISO-8859-1; UTF-8 files (the common case today) are read as such
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("latin-1")
    return parse_properties(text)
