"""How the admin commands print: aligned tables like Kafka's tools, JSON for scripts, progress bars."""
from __future__ import annotations

import json
import sys
import time
from typing import Any, Iterable, Sequence, TextIO

__all__ = ["emit", "print_json", "print_table", "Progress"]


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


def print_table(headers: Sequence[str], rows: Iterable[Sequence[Any]], out: TextIO | None = None) -> None:
    """Left-aligned columns, one space apart, widths from the widest cell (as kafka-consumer-groups.sh)."""
    out = out or sys.stdout
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, text in enumerate(row):
            widths[i] = max(widths[i], len(text))
    last = len(headers) - 1
    for row in [list(headers), *cells]:
        out.write(" ".join(text if i == last else text.ljust(widths[i]) for i, text in enumerate(row)).rstrip()
                  + "\n")


def print_json(value: Any, out: TextIO | None = None) -> None:
    out = out or sys.stdout
    json.dump(value, out, indent=2, sort_keys=False, default=str)
    out.write("\n")


def emit(fmt: str, records: list[dict], headers: Sequence[str], keys: Sequence[str] | None = None) -> None:
    """Print `records` (dicts) as a table with `headers` (columns `keys`, default the headers) or as JSON."""
    if fmt == "json":
        print_json(records)
        return
    keys = keys or headers
    print_table(headers, [[r.get(k) for k in keys] for r in records])


class Progress:
    """A one-line progress bar on stderr, drawn only when stderr is a terminal."""

    def __init__(self, total: int | None, label: str, stream: TextIO | None = None, min_interval_s: float = 0.1):
        self.stream = stream or sys.stderr
        self.enabled = bool(getattr(self.stream, "isatty", lambda: False)())
        self.total = total
        self.label = label
        self.done = 0
        self._drawn = 0.0
        self._interval = min_interval_s

    def advance(self, n: int = 1) -> None:
        self.done += n
        if self.enabled and time.monotonic() - self._drawn >= self._interval:
            self._draw()

    def _draw(self) -> None:
        self._drawn = time.monotonic()
        if self.total:
            share = min(self.done / self.total, 1.0)
            bar = "#" * int(share * 30)
            text = f"\r{self.label} [{bar:<30}] {self.done}/{self.total} {share:4.0%}"
        else:
            text = f"\r{self.label} {self.done}"
        self.stream.write(text)
        self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self._draw()
            self.stream.write("\n")
            self.stream.flush()
