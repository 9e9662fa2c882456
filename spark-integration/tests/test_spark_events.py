"""The page-view generator and the counts expected from it (no Spark needed)."""

from __future__ import annotations

import json

from kafkapy_spark.events import (
    WINDOW_MS,
    PageView,
    WindowKey,
    format_event_time,
    generate_page_views,
    sink_counts,
    window_counts,
)

START_MS = 1_763_726_400_000  # 2025-11-21T12:00:00Z, a minute boundary


def test_generator_is_deterministic_and_bounded_out_of_order() -> None:
    events = generate_page_views(3000, START_MS, events_per_minute=600, max_disorder_ms=4000, seed=3)
    assert events == generate_page_views(3000, START_MS, events_per_minute=600, max_disorder_ms=4000, seed=3)
    assert len(events) == 3000
    assert min(e.event_time_ms for e in events) >= START_MS
    latest = START_MS
    for event in events:  # no event is older than 4 s behind the newest one seen before it
        assert event.event_time_ms >= latest - 4000 - 100
        latest = max(latest, event.event_time_ms)
    assert (max(e.event_time_ms for e in events) - START_MS) // WINDOW_MS == 4  # 3000 events at 600/min
    assert len({e.page for e in events}) > 5 and len({e.user for e in events}) > 10


def test_record_shape() -> None:
    event = PageView("user-7", "/cart", START_MS + 61_234)
    assert event.key == b"user-7"
    assert json.loads(event.value) == {"user": "user-7", "page": "/cart", "event_time": "2025-11-21T12:01:01.234Z"}
    assert event.window_start_ms == START_MS + WINDOW_MS
    assert format_event_time(START_MS + 5) == "2025-11-21T12:00:00.005Z"


def test_window_counts_cover_every_event_once() -> None:
    events = generate_page_views(2000, START_MS, events_per_minute=500)
    counts = window_counts(events)
    assert sum(counts.values()) == 2000
    assert all(key.window_start_ms % WINDOW_MS == 0 for key in counts)
    keyed = sink_counts(events)
    assert keyed[WindowKey("/", START_MS).sink_key] == counts[WindowKey("/", START_MS)]
    assert WindowKey("/", START_MS).sink_key == "/|2025-11-21T12:00:00Z"
