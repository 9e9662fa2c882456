"""Web activity events (page views) and the per-page, per-minute counts expected from them.

An event is published with the user as key, a JSON value

    {"user": "user-17", "page": "/products/3", "event_time": "2026-11-21T12:00:01.234Z"}

and the event time as the record's CreateTime timestamp.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Iterable, Iterator

WINDOW_MS = 60_000

DEFAULT_PAGES = (
    "/", "/search", "/cart", "/checkout", "/login", "/help",
    "/products/1", "/products/2", "/products/3", "/products/4", "/blog", "/about",
)


@dataclass(slots=True, frozen=True)
class PageView:
    """One page view by one user at one moment of event time."""

    user: str
    page: str
    event_time_ms: int

    @property
    def key(self) -> bytes:
        return self.user.encode()

    @property
    def value(self) -> bytes:
        return json.dumps(
            {"user": self.user, "page": self.page, "event_time": format_event_time(self.event_time_ms)},
            separators=(",", ":"),
        ).encode()

    @property
    def window_start_ms(self) -> int:
        return self.event_time_ms - self.event_time_ms % WINDOW_MS


@dataclass(slots=True, frozen=True)
class WindowKey:
    """One page in one 1-minute event-time window: what the streaming job counts by."""

    page: str
    window_start_ms: int

    @property
    def sink_key(self) -> str:
        """The record key the streaming job writes for this window (see streaming_job)."""
        return f"{self.page}|{format_window_time(self.window_start_ms)}"


def format_event_time(epoch_ms: int) -> str:
    """ISO 8601 in UTC with milliseconds, e.g. 2026-11-21T12:00:01.234Z."""
    moment = datetime.fromtimestamp(epoch_ms / 1000, tz=timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{epoch_ms % 1000:03d}Z"


def format_window_time(epoch_ms: int) -> str:
    """Window bounds as the streaming job prints them: 2026-11-21T12:00:00Z."""
    return datetime.fromtimestamp(epoch_ms / 1000, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def generate_page_views(
    count: int,
    start_ms: int,
    events_per_minute: int = 600,
    users: int = 50,
    pages: tuple[str, ...] = DEFAULT_PAGES,
    max_disorder_ms: int = 5_000,
    seed: int = 7,
) -> list[PageView]:
    """Deterministic page views whose event times advance at `events_per_minute`.

    Each event's time is its slot on that steady clock minus up to `max_disorder_ms`, so
    events arrive out of order by at most that much: a watermark delay longer than it never
    drops an event. Page popularity is skewed (a few pages get most views), as real traffic is.
    """
    rng = random.Random(seed)
    step_ms = WINDOW_MS / events_per_minute
    weights = [1.0 / (rank + 1) for rank in range(len(pages))]
    chosen = rng.choices(pages, weights=weights, k=count)
    events = []
    for index in range(count):
        slot_ms = start_ms + int(index * step_ms)
        jitter = rng.randint(0, max_disorder_ms) if max_disorder_ms else 0
        events.append(PageView(f"user-{rng.randrange(users)}", chosen[index], max(start_ms, slot_ms - jitter)))
    return events


def window_counts(events: Iterable[PageView]) -> dict[WindowKey, int]:
    """Views per page per 1-minute window, computed directly from the events."""
    return dict(Counter(WindowKey(event.page, event.window_start_ms) for event in events))


def sink_counts(events: Iterable[PageView]) -> dict[str, int]:
    """The same counts keyed as the streaming job's output records are."""
    return {key.sink_key: views for key, views in window_counts(events).items()}


def iter_records(events: Iterable[PageView]) -> Iterator[tuple[bytes, bytes, int]]:
    """(key, value, timestamp_ms) for each event, in publishing order."""
    for event in events:
        yield event.key, event.value, event.event_time_ms
