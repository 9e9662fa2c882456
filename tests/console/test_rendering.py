"""Pure parts of the console: SVG charts, the history ring buffers, listener and parameter parsing."""
from __future__ import annotations

import math
from collections import deque
from types import SimpleNamespace

import pytest

pytest.importorskip("aiohttp")

from kafkapy.console import server  # noqa: E402
from kafkapy.console.charts import human, line_chart  # noqa: E402
from kafkapy.console.history import History  # noqa: E402
from kafkapy.console.state import ConsoleError, _ranges  # noqa: E402


def test_line_chart_is_svg_with_escaped_labels():
    now = 10_000.0
    svg = line_chart("Rate <x>", {"a&b": [(now - 20, 1.0), (now - 10, 4.0)], "empty": []}, now=now)
    assert svg.startswith("<svg") and svg.endswith("</svg>")
    assert "Rate &lt;x&gt;" in svg and "a&amp;b: 4" in svg and "empty: no data" in svg
    assert svg.count("<polyline") == 1
    assert "no samples yet" in line_chart("t", {"a": []}, now=now)
    # points older than the window are left out
    assert "<polyline" not in line_chart("t", {"a": [(now - 7200, 1), (now - 7100, 2)]}, now=now)


def test_human():
    assert human(1234567) == "1.23M" and human(0) == "0" and human(2.5, "ms") == "2.5ms"
    assert human(3020, "ms") == "3.02s" and human(None) == "-"


def test_ranges():
    assert _ranges([5, 0, 1, 2, 7, 8]) == "0-2, 5, 7-8" and _ranges([]) == ""


def test_history_topic_rates():
    stats = SimpleNamespace(messages_in=0)
    metrics = SimpleNamespace(totals=lambda: {"requests": {}}, topics={"t": stats})
    broker = SimpleNamespace(metrics=metrics, loaded_group_coordinator=SimpleNamespace(manager=SimpleNamespace(groups={})))
    history = History(broker)
    history.sample(now=0.0)
    assert history.topic_rates == {}
    stats.messages_in = 100
    history.sample(now=10.0)
    assert history.topic_rates == {"t": 10.0}


def test_history_rates_and_missing_metrics():
    totals = {"messages_in": 0, "bytes_in": 0, "bytes_out": 0,
              "requests": {"Produce": {"count": 0, "errors": 0, "p99_ms": float("nan")}}}
    metrics = SimpleNamespace(totals=lambda: totals)
    group = SimpleNamespace(offsets={})
    broker = SimpleNamespace(metrics=metrics, loaded_group_coordinator=SimpleNamespace(
        manager=SimpleNamespace(groups={"g": group})), partitions=None)
    history = History(broker, points=3)
    history.sample(now=100.0)
    totals.update(messages_in=50, bytes_in=5000, requests={"Produce": {"count": 20, "errors": 1, "p99_ms": 4.0}})
    history.sample(now=110.0)
    assert list(history.throughput["messages_in"]) == [(110.0, 5.0)]
    assert list(history.throughput["bytes_in"]) == [(110.0, 500.0)]
    assert history.current_rates() == {"Produce": 2.0}
    assert list(history.request_p99["Produce"]) == [(110.0, 4.0)]  # the NaN sample is skipped
    assert list(history.group_lag["g"]) == [(100.0, 0), (110.0, 0)]
    for i in range(5):
        history.sample(now=120.0 + i)
    assert len(history.throughput["messages_in"]) == 3 and isinstance(history.group_lag["g"], deque)
    del broker.metrics
    history.sample(now=200.0)  # no metrics: throughput unchanged, no error
    assert history.totals() is None and history.throughput["messages_in"][-1][0] == 124.0


@pytest.mark.parametrize("text,expected", [
    ("http://127.0.0.1:9405", ("127.0.0.1", 9405)), ("http://127.0.0.1:0", ("127.0.0.1", 0)),
    ("http://0.0.0.0:8080/", ("0.0.0.0", 8080)), ("http://[::1]:9405", ("::1", 9405))])
def test_parse_listener(text, expected):
    assert server.parse_listener(text) == expected


@pytest.mark.parametrize("text", ["https://127.0.0.1:9405", "http://127.0.0.1", "127.0.0.1:9405", "http://h:1/console"])
def test_parse_listener_refuses(text):
    with pytest.raises(ValueError, match="http"):
        server.parse_listener(text)


def test_timestamp_param():
    assert server._timestamp_param("") is None
    assert server._timestamp_param("1700000000000") == 1_700_000_000_000
    assert server._timestamp_param("2023-11-14T22:13:20") == 1_700_000_000_000
    assert server._timestamp_param("2023-11-14T23:13:20+01:00") == 1_700_000_000_000
    with pytest.raises(ConsoleError):
        server._timestamp_param("yesterday")
    assert math.isclose(server._timestamp_param("2023-11-14T22:13:20.5Z"), 1_700_000_000_500)
